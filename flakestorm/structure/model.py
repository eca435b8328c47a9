"""Validation with the config models, worded for people: the one home of pydantic's errors.

:func:`validate_model` validates data (from YAML or JSON) as a model and, when it does not fit,
raises :class:`InvalidData` whose :class:`FieldProblem`\\ s say which node of the document is
wrong (its path in the document, not in the model), what is wrong and what would be valid,
with "did you mean" for misspelt keys and values. No pydantic wording (``Input should be``,
``Field required``, ``errors.pydantic.dev``) gets through, and values that came from the
environment are never quoted.
"""

from __future__ import annotations

import copy
import enum
import functools
import re
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from flakestorm.config import (
    CONTEXT_ATTACK_FIELDS,
    INVARIANT_FIELDS,
    ContextAttack,
    ContextAttackType,
    Invariant,
    InvariantType,
)
from flakestorm.redaction import redact
from flakestorm.structure.error_path import UNION_TYPE_TAGS, ErrorPath, field_names, resolve
from flakestorm.structure.paths import ConfigPath, format_path
from flakestorm.structure.wording import describe, did_you_mean, kind, show, unknown_key_message

M = typing.TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class FieldProblem:
    """What is wrong with the node at ``path`` of the document (with ``key``: with its key)."""

    path: ConfigPath
    message: str
    key: bool = False

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}" if self.path else self.message


class InvalidData(Exception):
    """The data does not validate as the model; ``problems`` lists why, in pydantic's order."""

    def __init__(self, problems: Sequence[FieldProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(dict.fromkeys(str(p) for p in self.problems)))


@dataclass(frozen=True)
class Hints:
    """What to say instead of the usual message, for keys and values a document may hold
    because it was written for another format (flakestorm 1.x, the public 2.0.0)."""

    keys: Mapping[tuple[type[BaseModel], str], str] = field(default_factory=dict)
    """(model, key) -> what to do instead of that unknown key."""
    values: Mapping[tuple[type[BaseModel], str, str], str] = field(default_factory=dict)
    """(model, field, value) -> the message for that invalid value."""
    nulls: Mapping[tuple[type[BaseModel], str], str] = field(default_factory=dict)
    """(model, field) -> the message for a null there, which this format does not take."""


def validate_model(
    model: type[M],
    data: Any,
    secrets: Collection[str] = (),
    scalars: Mapping[ConfigPath, str] | None = None,
    hints: Hints = Hints(),
) -> M:
    """``data`` validated as ``model``, or :class:`InvalidData` naming every bad node.

    ``secrets`` are values that came from the environment: messages never quote them.
    ``scalars`` is the source text of the document's scalars by path (YAML), so that a value
    YAML read as a number or a boolean where text was expected can be shown quoted. ``hints``
    word keys and values of other formats.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        translator = _Translator(model, data, secrets, scalars or {}, hints)
        raise InvalidData(translator.translate(exc.errors())) from None


@dataclass(frozen=True)
class Valid:
    """A value that validated (see :func:`validate_alone`)."""

    value: Any


def validate_alone(kind: Any, data: Any) -> Valid | None:
    """``data`` validated as ``kind`` (a model, or a type with its constraints, hashable), or
    None when it does not fit. No message: this is for validating one part of a document whose
    problems :func:`validate_model` words as a whole (the loader's meaning checks run on every
    part that fits).

    A part whose only problems are unknown keys is read as its author meant it: each unknown
    key under the name "did you mean" suggests for it (unless that key is set too), or left out
    when nothing is close — so a misspelt key does not hide the meaning of the rest."""
    adapter = _adapter(kind)
    try:
        return Valid(adapter.validate_python(data))
    except ValidationError as exc:
        errors = exc.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if not unknown or any(e["type"] not in ("extra_forbidden", "missing") for e in errors):
        return None  # (a missing field may be what a misspelt key meant)
    if len(unknown) > MAX_MISSPELT:
        return None  # not a typo: a part this unlike its model is not read as anything
    meant = _as_meant(kind, data, unknown)
    if meant is None:
        return None
    try:
        return Valid(adapter.validate_python(meant))
    except ValidationError:
        return None


MAX_MISSPELT = 20
"""The most unknown keys a part may have and still be read as meant (each costs a guess)."""


def _as_meant(kind: Any, data: Any, errors: Sequence[Any]) -> Any:
    """A copy of ``data`` with the unknown keys of ``errors`` renamed as "did you mean" says,
    or dropped; None when an error's key cannot be found in the data."""
    meant = copy.deepcopy(data)
    names = _Translator(kind, data, (), {}, Hints())
    for err in errors:
        step = resolve(kind, data, tuple(err["loc"]), err["type"])
        if not step.ypath:
            return None
        where, key = tuple(step.ypath[:-1]), step.ypath[-1]
        parent = _node(meant, where)
        if not isinstance(parent, dict) or key not in parent:
            return None
        guess = did_you_mean(str(key), names.valid_keys(step.model, where))
        items = list(parent.items())
        parent.clear()
        for name, value in items:
            if name != key:
                parent[name] = value
            elif guess is not None and guess not in dict(items):
                parent[guess] = value
    return meant


def _node(data: Any, path: Sequence[str | int]) -> Any:
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


_INVARIANT_TYPE_FIELDS = frozenset(
    f for req, opt in INVARIANT_FIELDS.values() for f in (*req, *opt)
)

_E = typing.TypeVar("_E", bound=enum.Enum)


def _enum_value(kind: type[_E], value: Any) -> _E | None:
    try:
        return kind(value)
    except (ValueError, TypeError):
        return None


def _expected_choices(expected: str) -> list[str]:
    """The quoted choices of a pydantic ``expected`` (``'a', 'b' or 'c'``)."""
    return re.findall(r"'([^']*)'", expected)


MAX_GUESSES = 200
"""How many "did you mean" guesses one document gets (the rest of its problems go without)."""


class _Translator:
    """Turns pydantic error dicts into FieldProblems about the document's nodes."""

    def __init__(
        self,
        root: type[BaseModel],
        data: Any,
        secrets: Collection[str],
        scalars: Mapping[ConfigPath, str],
        hints: Hints,
    ) -> None:
        self.root = root
        self.data = data
        self.secrets = secrets
        self.scalars = scalars
        self.hints = hints
        self._guesses: dict[tuple[str, tuple[str, ...]], str | None] = {}
        self._valid_keys: dict[tuple[type[BaseModel] | None, ConfigPath], list[str]] = {}

    def guess(self, word: str, choices: Sequence[str]) -> str | None:
        """:func:`did_you_mean`, for the first :data:`MAX_GUESSES` words of a document only (a
        guess costs ~0.1 ms: 10,000 unknown keys must not take seconds)."""
        key = (word, tuple(choices))
        if key not in self._guesses:
            if len(self._guesses) >= MAX_GUESSES:
                return None
            self._guesses[key] = did_you_mean(word, choices)
        return self._guesses[key]

    def translate(self, errors: Sequence[Any]) -> list[FieldProblem]:
        walked = [(e, resolve(self.root, self.data, tuple(e["loc"]), e["type"])) for e in errors]
        # group union errors by the node the union is on
        groups: dict[ConfigPath, list[tuple[Any, ErrorPath]]] = {}
        plain: list[tuple[Any, ErrorPath]] = []
        for err, step in walked:
            if step.tags:
                groups.setdefault(tuple(step.ypath[: step.tags[0][0]]), []).append((err, step))
            else:
                plain.append((err, step))
        for node_path, members in groups.items():
            plain.extend(self.collapse(node_path, members))
        guessed = self.misspelt(plain)
        return [
            self.problem(err, step)
            for err, step in plain
            if not (err["type"] == "missing" and tuple(step.ypath) in guessed)
        ]

    def misspelt(self, errors: list[tuple[Any, ErrorPath]]) -> set[ConfigPath]:
        """Paths of missing fields that an unknown key beside them is a misspelling of."""
        out = set()
        for err, step in errors:
            if err["type"] == "extra_forbidden" and step.ypath:
                parent = tuple(step.ypath[:-1])
                guess = self.guess(str(step.ypath[-1]), self.valid_keys(step.model, parent))
                if guess is not None:
                    out.add((*parent, guess))
        return out

    def collapse(
        self, node_path: ConfigPath, members: list[tuple[Any, ErrorPath]]
    ) -> list[tuple[Any, ErrorPath]]:
        by_tag: dict[str, list[tuple[Any, ErrorPath]]] = {}
        for err, step in members:
            by_tag.setdefault(step.tags[0][1], []).append((err, step))
        model_tags = [t for t in by_tag if t not in UNION_TYPE_TAGS and "[" not in t]
        value = self.value_at(node_path)
        if isinstance(value, dict) and model_tags:
            best = min(model_tags, key=lambda t: len(by_tag[t]))
            return [(e, self.untag(s)) for e, s in by_tag[best]]
        # a value of none of the union's types
        kinds = []
        for tag in by_tag:
            if tag in UNION_TYPE_TAGS:
                kinds.append(UNION_TYPE_TAGS[tag])
            elif tag.startswith("dict[") or tag in model_tags:
                kinds.append("a mapping")
            elif tag.startswith("list["):
                kinds.append("a list")
            elif tag.startswith("literal["):  # literal['mock'] -> `mock`
                kinds.append(" or ".join(f"`{v.strip(chr(39))}`" for v in tag[8:-1].split(",")))
        kinds = list(dict.fromkeys(kinds))
        expected = ", ".join(kinds[:-1]) + " or " + kinds[-1] if len(kinds) > 1 else kinds[0]
        err, step = members[0]
        step = self.untag(step)
        step.ypath = list(node_path)
        fake = {"type": "_union", "msg": f"expected {expected}, got {kind(value)}"}
        return [(fake, step)]

    @staticmethod
    def untag(step: ErrorPath) -> ErrorPath:
        step.tags = []
        return step

    def value_at(self, ypath: Sequence[str | int]) -> Any:
        return _node(self.data, ypath)

    def problem(self, err: Any, step: ErrorPath) -> FieldProblem:
        etype: str = err["type"]
        ypath = tuple(step.ypath)
        ctx = err.get("ctx") or {}
        if etype == "_union":
            return FieldProblem(ypath, err["msg"])
        if etype == "missing":
            parent = ypath[:-1]
            name = ypath[-1] if ypath else ""
            return FieldProblem(parent, f"missing required field {name!r}")
        if etype == "extra_forbidden":
            return self.unknown_key(step, ypath)
        value = self.value_at(ypath)
        if isinstance(value, str):  # quoted below: never the value of an environment variable
            value = redact(value, self.secrets)
        if step.on_key:
            return self.on_key(err, step, ypath)
        return FieldProblem(ypath, self.message(etype, err, ctx, value, step, ypath))

    def unknown_key(self, step: ErrorPath, ypath: ConfigPath) -> FieldProblem:
        key = ypath[-1] if ypath else ""
        parent = ypath[:-1]
        model = step.model
        if model is not None and (model, str(key)) in self.hints.keys:
            text = f"unknown key {key!r}: {self.hints.keys[(model, str(key))]}"
            return FieldProblem(ypath, text, key=True)
        if model is ContextAttack and key == "_":
            value = self.value_at(parent)
            attack = parent[-1] if parent else "the attack"
            return FieldProblem(
                parent, f"expected a mapping of {attack}'s fields, got {kind(value)}"
            )
        valid = self.valid_keys(model, parent)
        guess = self.guess(str(key), valid)
        return FieldProblem(ypath, unknown_key_message(str(key), valid, guess), key=True)

    def valid_keys(self, model: type[BaseModel] | None, parent: ConfigPath) -> list[str]:
        key = (model, parent)
        if key not in self._valid_keys:
            self._valid_keys[key] = self._valid_keys_of(model, parent)
        return self._valid_keys[key]

    def _valid_keys_of(self, model: type[BaseModel] | None, parent: ConfigPath) -> list[str]:
        if model is None:
            return []
        names = field_names(model)
        data = self.value_at(parent)
        if issubclass(model, Invariant) and isinstance(data, dict):
            itype = _enum_value(InvariantType, data.get("type"))
            if itype is not None:
                req, opt = INVARIANT_FIELDS[itype]
                common = [n for n in names if n not in _INVARIANT_TYPE_FIELDS]
                names = [*common, *req, *opt]
        if issubclass(model, ContextAttack):
            attack = None
            head = ["type"]
            if isinstance(data, dict):
                attack = _enum_value(ContextAttackType, data.get("type"))
            if attack is None and parent:
                attack = _enum_value(ContextAttackType, parent[-1])
                head = []
            if attack is not None:
                req, opt = CONTEXT_ATTACK_FIELDS[attack]
                names = [*head, *req, *opt]
        return names

    def on_key(self, err: Any, step: ErrorPath, ypath: ConfigPath) -> FieldProblem:
        key = ypath[-1] if ypath else ""
        ctx = err.get("ctx") or {}
        choices = _expected_choices(ctx.get("expected", ""))
        guess = self.guess(str(key), choices)
        hint = f"; did you mean {guess!r}?" if guess else ""
        what = "context attack" if step.model is ContextAttack else "key"
        text = f"{what} {show(key)} is not valid (expected one of: {', '.join(choices)}{hint})"
        return FieldProblem(ypath, text, key=True)

    def message(
        self,
        etype: str,
        err: Any,
        ctx: Mapping[str, Any],
        value: Any,
        step: ErrorPath,
        ypath: ConfigPath,
    ) -> str:
        name = str(ypath[-1]) if ypath else ""
        if value is None and step.model is not None and (step.model, name) in self.hints.nulls:
            return self.hints.nulls[(step.model, name)]
        quote = self.quote_hint(ypath, value)
        if etype in ("enum", "literal_error"):
            special = (
                self.hints.values.get((step.model, name, value))
                if step.model is not None and isinstance(value, str)
                else None
            )
            if special:
                return special
            choices = _expected_choices(str(ctx.get("expected", "")))
            guess = self.guess(value, choices) if isinstance(value, str) else None
            hint = f"; did you mean {guess!r}?" if guess else ""
            return f"{show(value)} is not valid (expected one of: {', '.join(choices)}{hint})"
        if etype == "string_type":
            return f"expected a string, got {kind(value)}{quote}"
        if etype in ("int_type", "int_parsing", "int_from_float"):
            return f"expected an integer, got {describe(value)}"
        if etype in ("float_type", "float_parsing", "finite_number"):
            return f"expected a number, got {describe(value)}"
        if etype in ("bool_type", "bool_parsing"):
            return f"expected true or false, got {describe(value)}"
        if etype in ("list_type", "tuple_type", "set_type"):
            return f"expected a list, got {kind(value)}"
        if etype in ("dict_type", "model_type", "model_attributes_type", "mapping_type"):
            return f"expected a mapping, got {kind(value)}"
        if etype == "too_short":
            if isinstance(value, (list, dict)):
                n = ctx.get("min_length", 1)
                return f"expected at least {n} item{'s' if n != 1 else ''}, got none"
            return "must not be empty"
        if etype == "string_too_short":
            return "must not be empty"
        if etype in ("too_long", "string_too_long"):
            return f"too long (at most {ctx.get('max_length')})"
        bounds = {
            "greater_than": ("greater than", "gt"),
            "greater_than_equal": ("at least", "ge"),
            "less_than": ("less than", "lt"),
            "less_than_equal": ("at most", "le"),
        }
        if etype in bounds:
            words, key = bounds[etype]
            return f"must be {words} {ctx.get(key)}, got {show(value)}"
        if etype == "string_pattern_mismatch":
            return (
                f"{show(value)} is not a python reference "
                "(expected module:attr, e.g. myagent.tools:search)"
            )
        if etype == "value_error":
            return str(err.get("msg", "")).removeprefix("Value error, ")
        msg = str(err.get("msg", "invalid value"))
        return msg.replace("Input should be", "expected").replace("Input", "value")

    def quote_hint(self, ypath: ConfigPath, value: Any) -> str:
        text = self.scalars.get(ypath)
        if text is None or isinstance(value, (str, list, dict)) or value is None:
            return ""
        return f" (write '{text}' in quotes if you mean the text)"
