"""What a python agent's source says, read without importing or running anything.

``flakestorm validate`` must not import the agent (importing runs user code), yet a python
agent whose callable cannot take a conversation's session id is worth refusing there, at the
config's line, rather than when the run starts (SPEC §12). :func:`takes_session` finds the
module's source file the way the runner's import would find it — the config's directory
first, then ``sys.path``; ``pkg/mod.py`` or ``pkg/mod/__init__.py``, with no
``importlib.util.find_spec``, which imports parent packages — parses it with :mod:`ast` and
reads the named top-level function's parameters.

The answer is True or False only when the source decides it: a ``def`` / ``async def`` bound
once at the top level, its decorators taken to keep its signature (as ``functools.wraps`` does,
which :func:`inspect.signature` reads through). Anything else — no source file (a compiled or
namespace module), a syntax error, a dotted attribute, a class, an assignment, an import, a name
bound under ``if`` or ``try`` — is None: undecided, and the run start reads the imported
callable itself (:attr:`flakestorm.agents.python.PythonAgent.takes_session`).

What the source decides, the run keeps (:func:`sessions_of`): ``validate``'s count of
invocations and the run's sends are then the same, whatever a decorator's wrapper accepts.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

from flakestorm.config import AgentConfig, AgentType

SESSION_PARAMETER = "session_id"


def no_session(endpoint: str) -> str:
    """Why a python agent's conversation cannot be isolated: the one wording of ``validate``
    and the run start."""
    return (
        "a conversation is sent in one session of its own, and this agent has no way to "
        f'isolate it: give its callable ("{endpoint}") a `{SESSION_PARAMETER}` parameter (each '
        "conversation's id is passed in it), or set agent.reset_function"
    )


def keeps_sessions(agent: AgentConfig, base_dir: Path) -> bool:
    """Whether the agent is known, before it is imported, to keep a session per conversation
    (:func:`sessions_of` is True)."""
    return sessions_of(agent, base_dir) is True


def sessions_of(agent: AgentConfig, base_dir: Path) -> bool | None:
    """Whether the agent keeps a session per cell and conversation, as the plan and the run
    read it: an http agent with ``agent.session``; a python agent without ``reset_function``
    whose callable's source takes ``session_id``; None when the source does not decide it
    (the run start then reads the imported callable)."""
    if agent.type is AgentType.HTTP:
        return agent.session is not None
    if agent.reset_function is not None:
        return False
    return takes_session(agent.endpoint, base_dir)


def takes_session(reference: str, base_dir: Path) -> bool | None:
    """Whether the top-level function ``module:name`` accepts a ``session_id`` keyword
    argument (a parameter of that name, or ``**kwargs``), as its source file says; None when
    the source does not decide it."""
    function = _top_function(reference, base_dir)
    if function is None:
        return None
    args = function.args
    named = [a.arg for a in (*args.args, *args.kwonlyargs)]
    return SESSION_PARAMETER in named or args.kwarg is not None


def defines_function(reference: str, base_dir: Path) -> bool | None:
    """Whether ``module:name`` is a top-level function (decorated or not) by its source; None
    when the source does not say (an assignment, a class, an import: a framework object that
    may hold tools of names of its own)."""
    return True if _top_function(reference, base_dir) is not None else None


def yields(reference: str, base_dir: Path) -> bool | None:
    """Whether the top-level function ``module:name`` is a generator (sync or async: its own
    body holds a ``yield``), as its source says; None when the source does not decide it."""
    function = _top_function(reference, base_dir)
    if function is None:
        return None
    return any(isinstance(node, ast.Yield | ast.YieldFrom) for node in _own_nodes(function))


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s body, not those of a function or class defined in it."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _top_function(reference: str, base_dir: Path) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level function ``module:name`` names, read from its source file; None when the
    source does not show one."""
    module, sep, name = reference.partition(":")
    if not sep or not module or not name or "." in name:
        return None
    path = module_file(module, [base_dir, *search_path()])
    if path is None:
        return None
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    return _function(tree, name)


def module_file(module: str, directories: Iterable[Path]) -> Path | None:
    """The source file of dotted ``module`` in the first directory that holds its top-level
    package, as an import would pick it; None when that directory holds no source for it (a
    compiled module, a namespace package) or no directory holds it."""
    parts = module.split(".")
    if any(not part.isidentifier() for part in parts):
        return None
    if parts[0] in sys.builtin_module_names:
        return None
    for directory in directories:
        top = directory / parts[0]
        if not (top.is_dir() or top.with_suffix(".py").is_file() or _compiled(directory, parts[0])):
            continue
        inner = directory.joinpath(*parts)
        for candidate in (inner.with_suffix(".py"), inner / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None
    return None


def _compiled(directory: Path, name: str) -> bool:
    try:
        return any(directory.glob(f"{name}.*.so")) or any(directory.glob(f"{name}.*.pyd"))
    except OSError:
        return False


def search_path() -> list[Path]:
    """``sys.path`` as directories (``""`` is the working directory; zip files are left out:
    their sources are not files)."""
    out = []
    for entry in sys.path:
        path = Path(entry or ".")
        if path.is_dir():
            out.append(path)
    return out


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level function bound to ``name`` once and for all (decorated or not), or
    None."""
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            if statement.name == name:
                found = statement
            elif any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(statement)):
                return None  # another function may rebind it
            continue
        if _binds(statement, name):
            return None  # a class, an assignment, an import, a binding under if/try...
    return found


def _binds(statement: ast.stmt, name: str) -> bool:
    """Whether ``statement`` (anything but a top-level def) may bind ``name`` at module
    level."""
    for node in ast.walk(statement):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if node.id == name:
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if alias.name == "*" or bound == name:
                    return True
        elif isinstance(node, ast.Global) and name in node.names:
            return True
    return False
