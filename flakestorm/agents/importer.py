"""Python references in the config (``module:attr``): imported without tracebacks.

Everything that can go wrong while importing user code (module missing, a syntax error, an
exception at import time, a misspelt attribute) becomes a :class:`ConfigError` whose
:class:`Problem` points at the config field, placed by the caller's ``locate`` callback.
"""

from __future__ import annotations

import difflib
import importlib
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flakestorm.errors import ConfigError, Problem

Locate = Callable[[str, str], Problem]
"""``locate(field, message) -> Problem``: place a problem with config field ``field`` (dotted,
e.g. ``agent.endpoint``) in the config file. The loader knows the lines; agents do not."""


def default_locate(field: str, message: str) -> Problem:
    return Problem("flakestorm.yaml", 1, 1, field, message)


def load_reference(
    reference: str, base_dir: Path, field: str, locate: Locate = default_locate
) -> Any:
    """Import ``module:attr`` (attr may be dotted) with ``base_dir`` first on ``sys.path``."""

    def fail(message: str) -> ConfigError:
        return ConfigError([locate(field, message)])

    module_name, sep, attr_path = reference.partition(":")
    if not sep or not module_name or not attr_path:
        raise fail(f'"{reference}" is not a python reference (expected module:attr)')
    directory = str(base_dir.resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise fail(
                f'cannot import "{module_name}": no such module '
                f"(looked in {directory} and the python path)"
            ) from None
        raise fail(f'importing "{module_name}" failed: {describe_exception(exc)}') from None
    except SyntaxError as exc:
        where = f"{Path(exc.filename or '?').name}:{exc.lineno}"
        raise fail(f'importing "{module_name}" failed: {where}: SyntaxError: {exc.msg}') from None
    except Exception as exc:
        raise fail(f'importing "{module_name}" failed: {describe_exception(exc)}') from None
    node: Any = module
    names = attr_path.split(".")
    for i, name in enumerate(names):
        if not hasattr(node, name):
            owner = ":".join([module_name, ".".join(names[:i])]) if i else module_name
            candidates = [n for n in dir(node) if not n.startswith("_")]
            close = difflib.get_close_matches(name, candidates, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise fail(f'"{owner}" has no attribute "{name}"{hint}')
        node = getattr(node, name)
    return node


def describe_exception(exc: BaseException) -> str:
    """``TypeName: message (at file.py:LINE)``, no traceback: the line named is the agent's own
    (:func:`agent_frame`), not flakestorm's wrapper nor a library's line that raised."""
    text = f"{type(exc).__name__}: {exc}"
    frame = agent_frame(traceback.extract_tb(exc.__traceback__))
    if frame is not None:
        text += f" (at {Path(frame.filename).name}:{frame.lineno})"
    return text


_LIBRARY_KEYS = ("stdlib", "platstdlib", "purelib", "platlib")
_FLAKESTORM = Path(__file__).resolve().parents[1]
"""The flakestorm package: a frame in it is flakestorm's (a wrapper raising a fault)."""
_LIBRARIES = tuple(
    {Path(path).resolve() for key, path in sysconfig.get_paths().items() if key in _LIBRARY_KEYS}
)
"""Where the standard library and installed packages are (a frame there is a library's)."""


def agent_frame(frames: list[traceback.FrameSummary]) -> traceback.FrameSummary | None:
    """The frame an exception is placed at: the innermost that is the agent's own code (in
    neither the flakestorm package nor the standard library or installed packages); without
    one, the innermost outside flakestorm; else the innermost. The import machinery's frames
    never count."""
    frames = [f for f in frames if "importlib" not in f.filename]
    outside = [f for f in frames if not _within(f.filename, (_FLAKESTORM,))]
    own = [f for f in outside if not _library(f.filename)]
    for found in (own, outside, frames):
        if found:
            return found[-1]
    return None


def _library(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen ...>, <string>
        return True
    parts = Path(filename).parts
    return "site-packages" in parts or "dist-packages" in parts or _within(filename, _LIBRARIES)


def _within(filename: str, roots: tuple[Path, ...]) -> bool:
    try:
        path = Path(filename).resolve()
    except (OSError, RuntimeError):
        return False
    return any(path.is_relative_to(root) for root in roots)
