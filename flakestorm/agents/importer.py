"""Python references in the config (``module:attr``): imported without tracebacks.

Everything that can go wrong while importing user code (module missing, a syntax error, an
exception at import time, a misspelt attribute) becomes a :class:`ConfigError` whose
:class:`Problem` points at the config field, placed by the caller's ``locate`` callback.
"""

from __future__ import annotations

import difflib
import importlib
import sys
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
    """``TypeName: message (at file.py:LINE)``: the innermost frame, no traceback."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename]
    if user:
        text += f" (at {Path(user[-1].filename).name}:{user[-1].lineno})"
    return text
