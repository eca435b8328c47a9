"""The fields of a result read back from a file, checked against their annotated types: a
hand-edited or truncated ``results.json`` must be refused when it is read
(:func:`flakestorm.results.model.from_document`, and each streamed item of
:mod:`flakestorm.results.stream`), not crash a reporter later. A score that is no number
(:func:`non_finite_score`: NaN, Infinity) is refused there too: no run writes one.

Each annotation is turned into a check once (:func:`_checker`, cached by its text), so checking
the items of a large file one at a time costs a call per field, not a parse of its annotation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flakestorm.results.model import RunResult

_SCALARS: dict[str, tuple[str, tuple[type, ...]]] = {
    "str": ("a string", (str,)),
    "int": ("an int", (int,)),
    "float": ("a number", (int, float)),
    "bool": ("a boolean", (bool,)),
}
_LISTS = (("tuple[", ", ...]"), ("Sequence[", "]"))
"""How a list of a result is annotated: ``tuple[X, ...]``, or ``Sequence[X]`` (a tuple, or
read from disk as it is used: what a file is read into is a tuple)."""

Check = Callable[[Any], None]
"""Raises :class:`_Mistyped` when a value is not of its type."""


class _Mistyped(Exception):
    def __init__(self, problem: str, where: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.where = where

    def within(self, segment: str) -> _Mistyped:
        """The same problem, one level up (``segment``: ``.name``, ``[3]``, `` key``)."""
        return _Mistyped(self.problem, segment + self.where)


def mistyped(value: Any) -> str | None:
    """``where: value is not what`` for the first field of ``value`` (a result dataclass,
    checked through its nested dataclasses, lists and mappings) whose value is not of its
    annotated type; None when every field is."""
    if _fast(value.__class__)(value):  # every field of the exact type: nothing to say
        return None
    try:
        _check_fields(value)
    except _Mistyped as exc:
        return f"{exc.where.removeprefix('.')}: {exc.problem}"
    return None


def _check_fields(value: Any) -> None:
    for name, check in _fields(value.__class__):
        try:
            check(getattr(value, name))
        except _Mistyped as exc:
            raise exc.within(f".{name}") from None


@functools.cache
def _fields(kind: Any) -> tuple[tuple[str, Check], ...]:
    return tuple((f.name, _checker(str(f.type))) for f in dataclasses.fields(kind))


@functools.cache
def _checker(kind: str) -> Check:
    """The check of a value annotated ``kind``."""
    if kind.endswith(" | None"):
        inner = _checker(kind.removesuffix(" | None"))

        def optional(value: Any) -> None:
            if value is not None:
                inner(value)

        return optional
    if kind in _SCALARS:
        return _scalar(kind)
    item = next((kind[len(a) : -len(b)] for a, b in _LISTS if _is(kind, a, b)), None)
    if item is not None:
        return _list(_checker(item))
    if kind.startswith("Mapping[str, "):
        return _mapping(_checker(kind[len("Mapping[str, ") : -1]))
    return _nested


def _scalar(kind: str) -> Check:
    noun, types = _SCALARS[kind]
    exact = frozenset(types)

    def scalar(value: Any) -> None:
        if type(value) in exact:
            return
        if not isinstance(value, types) or (kind != "bool" and isinstance(value, bool)):
            raise _Mistyped(f"{value!r:.60} is not {noun}")

    return scalar


def _list(check: Check) -> Check:
    def checked(value: Any) -> None:
        if not isinstance(value, tuple):
            raise _Mistyped(f"{value!r:.60} is not a list")
        for i, each in enumerate(value):
            try:
                check(each)
            except _Mistyped as exc:
                raise exc.within(f"[{i}]") from None

    return checked


_KEY = _scalar("str")


def _mapping(check: Check) -> Check:
    def checked(value: Any) -> None:
        if not isinstance(value, Mapping):
            raise _Mistyped(f"{value!r:.60} is not an object")
        for key, each in value.items():
            try:
                _KEY(key)
            except _Mistyped as exc:
                raise exc.within(" key") from None
            try:
                check(each)
            except _Mistyped as exc:
                raise exc.within(f".{key}") from None

    return checked


def _nested(value: Any) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _check_fields(value)


@functools.cache
def _fast(kind: Any) -> Callable[[Any], bool]:
    """A check of a dataclass made into one function (fields read once, exact types compared
    inline): True when every field holds exactly its annotated type. False sends the value
    to the checks above, which also accept subclasses and say where a value is wrong."""
    lines = ["def fast(v):"]
    names: dict[str, Any] = {"Mapping": Mapping, "_nested": _fast_nested}
    for n, f in enumerate(dataclasses.fields(kind)):
        lines.append(f"    x{n} = v.{f.name}")
        lines.append(f"    if not ({_expression(str(f.type), f'x{n}', names)}): return False")
    lines.append("    return True")
    exec("\n".join(lines), names)  # made from the dataclass's own annotations, not from input
    fast: Callable[[Any], bool] = names["fast"]
    return fast


_EXACT = {"str": "{x}.__class__ is str", "int": "{x}.__class__ is int",
          "bool": "{x}.__class__ is bool",
          "float": "({x}.__class__ is float or {x}.__class__ is int)"}  # fmt: skip


def _expression(kind: str, x: str, names: dict[str, Any]) -> str:
    """A Python expression true when ``x`` holds exactly a ``kind``."""
    if kind.endswith(" | None"):
        return f"({x} is None or {_expression(kind.removesuffix(' | None'), x, names)})"
    if kind in _EXACT:
        return _EXACT[kind].format(x=x)
    item = next((kind[len(a) : -len(b)] for a, b in _LISTS if _is(kind, a, b)), None)
    depth = x.count("_") + 1
    if item is not None:
        e = f"e{depth}_"
        return f"({x}.__class__ is tuple and all({_expression(item, e, names)} for {e} in {x}))"
    if kind.startswith("Mapping[str, "):
        k, e = f"k{depth}_", f"e{depth}_"
        inner = _expression(kind[len("Mapping[str, ") : -1], e, names)
        return (
            f"(isinstance({x}, Mapping) and all({k}.__class__ is str and {inner} "
            f"for {k}, {e} in {x}.items()))"
        )
    return f"_nested({x})"


def _fast_nested(value: Any) -> bool:
    kind = value.__class__  # a dataclass instance (dataclasses.is_dataclass, inline)
    if _is_dataclass(kind) and not isinstance(value, type):
        return _fast(kind)(value)
    return True


@functools.cache
def _is_dataclass(kind: type) -> bool:
    """Whether ``kind`` is a dataclass: looked up once per class (an enum's class answers
    ``hasattr`` slowly, and a cell's status is one)."""
    return hasattr(kind, "__dataclass_fields__")


def _is(kind: str, head: str, tail: str) -> bool:
    return kind.startswith(head) and kind.endswith(tail)


def non_finite_score(result: RunResult) -> str:
    """What is wrong with a score of ``result`` that is no number (NaN, Infinity), ``""`` when
    none is: a results.json no run writes, read as unreadable, never drawn or compared."""
    scores = [("overall.score", result.overall.score)]
    scores += [(f"phases.{name}.score.score", p.score.score) for name, p in result.phases.items()]
    for where, score in scores:
        if score is not None and not math.isfinite(score):
            return f"{where} is {score!r}, not a finite number"
    return ""
