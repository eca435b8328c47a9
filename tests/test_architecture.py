"""The rules of ARCHITECTURE.md ("Rules the code keeps") that the code's syntax can show: which
module imports which third-party library, who prints or exits, and the layering. Imports are
parsed (``ast``), not grepped: an import inside a function, under ``TYPE_CHECKING`` or in a
``from package import module`` form counts like any other.

Each failure names the file and the line.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (*sorted((ROOT / "flakestorm").rglob("*.py")), ROOT / "entrypoint.py")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = frozenset(_module_name(path) for path in SOURCES)

THIRD_PARTY = {
    "yaml": ("flakestorm/loader/",),
    "jinja2": ("flakestorm/reporters/html.py",),
    # jinja2's escaping, for the matrix cells the HTML report makes as strings
    "markupsafe": ("flakestorm/reporters/html.py", "flakestorm/reporters/html_matrix.py"),
    "junit_xml": ("flakestorm/reporters/junit.py",),
    "click": ("flakestorm/cli/",),
    "langsmith": ("flakestorm/replay/langsmith.py",),
    # the pinned price table, read when a model the config does not price is first met
    "genai_prices": ("flakestorm/results/prices.py",),
    "requests": (
        "flakestorm/agents/",
        "flakestorm/chaos/proxy/",
        # its transport adapter routed through the proxy in process (a python agent's tools)
        "flakestorm/chaos/routing/",
        "flakestorm/checks/similarity.py",
        # the llm_judge's chat completions client
        "flakestorm/checks/judge/client.py",
        "flakestorm/github/client.py",
        # the llm mutation generator's chat completions client (like similarity's embeddings)
        "flakestorm/mutations/llm.py",
    ),
}
"""A library -> the only places (a file, or a folder ending in ``/``) that may import it."""
THIRD_PARTY["urllib3"] = THIRD_PARTY["requests"]  # requests' transport goes with it

VALIDATION_ERROR_AT = "flakestorm/structure/model.py"
"""The one module that sees pydantic's ``ValidationError`` (and words it)."""
VALIDATION_ERROR_RAISED_AT = "flakestorm/config/base.py"
"""The base model's one check of a model's scalars raises its refusals together with the
model's other errors (as one error): raised there, worded in :data:`VALIDATION_ERROR_AT`."""

EDGES = frozenset(
    {
        "flakestorm/cli/",
        "entrypoint.py",
        "flakestorm/github/client.py",
        "flakestorm/chaos/proxy/serving.py",
    }
)
"""The only modules that print or exit (besides code that only runs as a program: a
``__main__.py``, or an ``if __name__ == "__main__":`` block)."""

ENGINE = ("engine", "agents", "chaos")
"""The packages that run the agent and its chaos, by their name under ``flakestorm``."""

LAYERS = {
    "flakestorm/results/": ENGINE,
    "flakestorm/checks/": ENGINE,
    "flakestorm/reporters/": ENGINE,
}
"""A file or folder -> the top-level packages it must not import: results, checks and reporters
are values and pure functions of them, usable without the engine (a merge, a report read from a
file)."""

FACE = frozenset(
    {"__init__.py", "__main__.py", "py.typed", "errors.py", "redaction.py", "stopping.py"}
)
"""The only files at the top of the package: its face and what every layer uses (the exception
tree, the redaction of secrets, the signals that stop a run, the action and the proxy)."""

LAYER_ORDER: tuple[tuple[str, ...], ...] = (
    ("errors", "redaction", "stopping"),
    ("config", "structure"),
    ("results", "checks"),
    ("agents",),
    ("chaos", "mutations"),
    ("meaning", "loader"),
    ("engine", "replay", "baseline"),
    ("reporters",),
    ("authoring", "github", "cli"),
)
"""The package's stages from the bottom up: each imports only its own layer and those below it.
Reading the file's meaning (``meaning``) sits above the chaos and the mutations because it checks
a fault's fields against their modes; the engine above the loader, which it reads the config
with; the reporters above the engine's results, which they render."""


@dataclass(frozen=True)
class Import:
    """One imported module, where it is imported."""

    path: str
    """The importing file, relative to the repository (``flakestorm/cli/app.py``)."""
    line: int
    module: str
    """Absolute and dotted: ``yaml``, ``flakestorm.engine.runner``,
    ``flakestorm.chaos.proxy.server``."""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def library(self) -> str:
        return self.module.partition(".")[0]

    @property
    def top(self) -> str | None:
        return top_module(self.module)


def top_module(module: str) -> str | None:
    """The top-level module of flakestorm that ``module`` is or is in (``runner``, ``chaos``;
    ``flakestorm`` for the package itself), or None outside the package."""
    parts = module.split(".")
    if parts[0] != "flakestorm":
        return None
    return parts[1] if len(parts) > 1 else "flakestorm"


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    """The module a ``from ... import`` names, with relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(path: Path) -> Iterator[Import]:
    """Every module ``path`` imports; ``from package import module`` imports the module."""
    where = _relative(path)
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(where, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            yield Import(where, node.lineno, module)
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    yield Import(where, node.lineno, f"{module}.{alias.name}")


def all_imports() -> Iterator[Import]:
    for path in SOURCES:
        yield from imports_of(path)


def _in(path: str, places: tuple[str, ...] | frozenset[str]) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in places)


# --------------------------------------------------------------------------- third-party libraries


def test_each_library_is_imported_only_where_it_is_allowed() -> None:
    wrong = [
        f"{i.where}: imports {i.module} (allowed only in {', '.join(THIRD_PARTY[i.library])})"
        for i in all_imports()
        if i.library in THIRD_PARTY and not _in(i.path, THIRD_PARTY[i.library])
    ]
    assert not wrong, "\n".join(wrong)


PYDANTIC = {"pydantic", "pydantic_core"}


def _validation_errors(path: Path) -> Iterator[int]:
    """Lines where ``path`` imports pydantic's ``ValidationError`` or names it as an attribute
    of an imported pydantic module (``pydantic.ValidationError``, ``pd.ValidationError``)."""
    tree = _tree(path)
    names = set(PYDANTIC)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.asname and a.name in PYDANTIC}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PYDANTIC:
            if any(a.name == "ValidationError" for a in node.names):
                yield node.lineno
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "ValidationError"
            and isinstance(node.value, ast.Name)
            and node.value.id in names
        ):
            yield node.lineno


def test_only_the_validation_package_sees_pydantic_validation_errors() -> None:
    wrong = [
        f"{_relative(path)}:{line}: pydantic's ValidationError (only in {VALIDATION_ERROR_AT})"
        for path in SOURCES
        if _relative(path) not in (VALIDATION_ERROR_AT, VALIDATION_ERROR_RAISED_AT)
        for line in _validation_errors(path)
    ]
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------- the edges print


def _dotted(node: ast.expr) -> str | None:
    """``sys.stdout.write`` for that expression, or None when it is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


STREAMS = {"sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__"}
CALLS = {"print", "exit", "quit", "sys.exit", "os._exit", "click.echo", "click.secho"}
FROM_SYS = {"stdout", "stderr", "__stdout__", "__stderr__", "exit"}


def _is_main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``"""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (
        isinstance(test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def _outputs(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, what)`` for each print, exit or use of the standard streams, outside
    ``if __name__ == "__main__":`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if _is_main_block(node):
            continue
        if isinstance(node, ast.Call) and _dotted(node.func) in CALLS:
            yield node.lineno, f"{_dotted(node.func)}()"
        elif isinstance(node, ast.Attribute) and _dotted(node) in STREAMS:
            yield node.lineno, f"uses {_dotted(node)}"
            continue
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if _dotted(exc) == "SystemExit":
                yield node.lineno, "raises SystemExit"
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            for alias in node.names:
                if alias.name in FROM_SYS:
                    yield node.lineno, f"imports sys.{alias.name}"
        yield from _outputs(node)


def test_only_the_edges_print_or_exit() -> None:
    wrong = [
        f"{_relative(path)}:{line}: {what} (only {', '.join(sorted(EDGES))} print or exit)"
        for path in SOURCES
        if not _in(_relative(path), EDGES) and path.name != "__main__.py"
        for line, what in _outputs(_tree(path))
    ]
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------- layering


def test_the_layers_import_nothing_above_them() -> None:
    wrong = [
        f"{i.where}: imports {i.module} ({place} imports none of {', '.join(banned)})"
        for i in all_imports()
        for place, banned in LAYERS.items()
        if _in(i.path, (place,)) and i.top in banned
    ]
    assert not wrong, "\n".join(wrong)


def _layer(top: str) -> int | None:
    return next((n for n, layer in enumerate(LAYER_ORDER) if top in layer), None)


def test_every_package_is_in_a_layer_and_imports_none_above_it() -> None:
    tops = {p.name.removesuffix(".py") for p in (ROOT / "flakestorm").iterdir()}
    tops -= {"__init__", "__main__", "py.typed", "__pycache__"}
    assert all(_layer(top) is not None for top in tops), sorted(
        t for t in tops if _layer(t) is None
    )
    wrong = []
    for i in all_imports():
        source = top_module(_module_name(ROOT / i.path))
        if source in (None, "flakestorm", "__main__") or i.top in (None, "flakestorm"):
            continue
        assert source is not None and i.top is not None
        if (_layer(i.top) or 0) > (_layer(source) or 0):
            wrong.append(f"{i.where}: {source} imports {i.module}, a layer above it")
    assert not wrong, "\n".join(wrong)


def test_the_top_level_holds_only_the_face_and_the_stages() -> None:
    loose = sorted(
        p.name for p in (ROOT / "flakestorm").iterdir() if p.is_file() and p.name not in FACE
    )
    assert not loose, f"modules at the top of flakestorm/ (place them in a stage): {loose}"


def test_nothing_in_the_package_imports_the_cli_or_the_entrypoint() -> None:
    # flakestorm/__main__.py is `python -m flakestorm`: it runs the CLI; the CLI's own modules
    # import one another
    wrong = [
        f"{i.where}: imports {i.module}"
        for i in all_imports()
        if i.path.startswith("flakestorm/")
        and i.path != "flakestorm/__main__.py"
        and not i.path.startswith("flakestorm/cli/")
        and (i.module == "entrypoint" or i.top == "cli")
    ]
    assert not wrong, "\n".join(wrong)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (``[a, b, a]``), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for successor in sorted(graph.get(node, ())):
            found = visit(successor, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for node in sorted(graph):
        found = visit(node, [])
        if found:
            return found
    return None


def test_the_top_level_modules_import_each_other_without_cycles() -> None:
    """A cycle between top-level modules (``runner`` -> ``phases`` -> ``runner``), counting
    every import of the package's modules; ``flakestorm/__init__.py`` (the package's public
    names) and ``__main__.py`` files are not modules of the graph."""
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], str] = {}
    for i in all_imports():
        source, target = top_module(_module_name(ROOT / i.path)), i.top
        if i.path.endswith("__main__.py") or source in (None, "flakestorm"):
            continue
        if target is None or target in ("flakestorm", source):
            continue
        assert source is not None
        graph.setdefault(source, set()).add(target)
        lines.setdefault((source, target), i.where)
    cycle = _cycle(graph)
    assert cycle is None, (
        "import cycle "
        + " -> ".join(cycle)
        + ":\n"
        + "\n".join(f"{a} -> {b}: {lines[a, b]}" for a, b in itertools.pairwise(cycle))
    )


def _runtime_imports(path: Path) -> Iterator[tuple[Import, bool]]:
    """The imports of ``path`` that run when it is imported or called, each with whether it
    sits inside a function (an ``if TYPE_CHECKING:`` block's imports never run)."""

    def walk(nodes: list[ast.stmt], in_function: bool) -> Iterator[tuple[ast.stmt, bool]]:
        for node in nodes:
            if isinstance(node, ast.If) and (_dotted(node.test) or "").endswith("TYPE_CHECKING"):
                yield from walk(node.orelse, in_function)
                continue
            yield node, in_function
            inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from walk([child], inner)

    where = _relative(path)
    for node, in_function in walk(_tree(path).body, False):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            names = [f"{module}.{a.name}" for a in node.names]
            for name in [module, *(n for n in names if n in MODULES)]:
                yield Import(where, node.lineno, name), in_function
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(where, node.lineno, alias.name), in_function


def test_the_results_modules_import_each_other_without_cycles_or_late_imports() -> None:
    """results/ is layered within itself (the status, the parts of a result, the model, then
    what reads the model): no cycle among its modules at run time, and none broken by an import
    inside a function."""
    package = "flakestorm.results"
    graph: dict[str, set[str]] = {}
    late = []
    for path in sorted((ROOT / "flakestorm" / "results").glob("*.py")):
        source = _module_name(path)
        for i, in_function in _runtime_imports(path):
            if not i.module.startswith(package + ".") or i.module == source:
                continue
            if in_function:
                late.append(f"{i.where}: imports {i.module} inside a function")
            graph.setdefault(source, set()).add(i.module)
    assert not late, "\n".join(late)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle " + " -> ".join(cycle or ())


# --------------------------------------------------------------------------- the test itself


def test_the_scan_sees_the_package_and_every_kind_of_output() -> None:
    """The scan sees the package (so a rule cannot pass by reading nothing), and each kind of
    violation it looks for is found in a file that has it."""
    assert ROOT / "flakestorm" / "cli" / "app.py" in SOURCES and ROOT / "entrypoint.py" in SOURCES
    assert sum(1 for i in all_imports() if i.library == "yaml") >= 1
    sample = ast.parse(
        "import sys\n"
        "def f():\n"
        "    print('x')\n"
        "    sys.stderr.write('x')\n"
        "    raise SystemExit(1)\n"
        "from sys import exit\n"
        "if __name__ == '__main__':\n"
        "    print('allowed')\n"
    )
    assert [line for line, _ in _outputs(sample)] == [3, 4, 5, 6]
    assert {"flakestorm.cli", "flakestorm.engine.runner", "entrypoint"} <= MODULES
