"""The fields of a result read back from a file, checked against their annotated types: a
hand-edited or truncated ``results.json`` must be refused when it is read
(:func:`flakestorm.results.from_document`), not crash a reporter later."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

_SCALARS: dict[str, tuple[str, tuple[type, ...]]] = {
    "str": ("a string", (str,)),
    "int": ("an int", (int,)),
    "float": ("a number", (int, float)),
    "bool": ("a boolean", (bool,)),
}
_LISTS = (("tuple[", ", ...]"), ("Sequence[", "]"))
"""How a list of a result is annotated: ``tuple[X, ...]``, or ``Sequence[X]`` (a tuple, or
read from disk as it is used: what a file is read into is a tuple)."""


class _Mistyped(Exception):
    pass


def mistyped(value: Any) -> str | None:
    """``where: value is not what`` for the first field of ``value`` (a result dataclass,
    checked through its nested dataclasses, lists and mappings) whose value is not of its
    annotated type; None when every field is."""
    try:
        _check_fields(value, "")
    except _Mistyped as exc:
        return str(exc)
    return None


def _check_fields(value: Any, where: str) -> None:
    for f in dataclasses.fields(value):
        _check(getattr(value, f.name), str(f.type), f"{where}.{f.name}" if where else f.name)


def _check(value: Any, kind: str, where: str) -> None:
    if kind.endswith(" | None"):
        if value is None:
            return
        kind = kind.removesuffix(" | None")
    item = next((kind[len(a) : -len(b)] for a, b in _LISTS if _is(kind, a, b)), None)
    if kind in _SCALARS:
        noun, types = _SCALARS[kind]
        if not isinstance(value, types) or (kind != "bool" and isinstance(value, bool)):
            raise _Mistyped(f"{where}: {value!r:.60} is not {noun}")
    elif item is not None:
        if not isinstance(value, tuple):
            raise _Mistyped(f"{where}: {value!r:.60} is not a list")
        for i, each in enumerate(value):
            _check(each, item, f"{where}[{i}]")
    elif kind.startswith("Mapping[str, "):
        if not isinstance(value, Mapping):
            raise _Mistyped(f"{where}: {value!r:.60} is not an object")
        for key, each in value.items():
            _check(key, "str", f"{where} key")
            _check(each, kind[len("Mapping[str, ") : -1], f"{where}.{key}")
    elif dataclasses.is_dataclass(value):
        _check_fields(value, where)


def _is(kind: str, head: str, tail: str) -> bool:
    return kind.startswith(head) and kind.endswith(tail)
