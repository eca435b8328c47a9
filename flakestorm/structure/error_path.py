"""Resolve the ``loc`` of a pydantic error against the data and the model it was validated as.

A pydantic ``loc`` mixes the document's keys with the validator's own steps: union member tags
(``str``, ``ToolFault``, ``list[...]``), ``function-...`` validators, ``[key]`` for a dict's
key, and the model's field names where the document is shorter (dict-form context attacks,
the flat scoring form, ``json_schema`` for ``schema``). :func:`resolve` walks it and returns
the path of the node in the document, the models passed on the way and the union tags seen,
which is what the message needs.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel

from flakestorm.config import ContextAttack

UNION_TYPE_TAGS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "none": "nothing",
}
"""pydantic's tags of scalar union members -> what a value of that member is."""


class ErrorPath:
    """One pydantic error's ``loc``, resolved against the data and the model."""

    def __init__(self) -> None:
        self.ypath: list[str | int] = []
        """The path of the node in the document."""
        self.models: list[type[BaseModel] | None] = []
        """The model of each step of ``ypath`` (None: a list item or a dict value)."""
        self.tags: list[tuple[int, str]] = []
        """(index in ypath, union member tag) for each union member the error is about."""
        self.on_key = False
        """The error is about a key (a dict's key, or the key that is a context attack type)."""
        self.model: type[BaseModel] | None = None
        """The model whose field (or whose unknown key) the error is about."""


def resolve(root: type[BaseModel], data: Any, loc: tuple[str | int, ...], etype: str) -> ErrorPath:
    """Walk ``loc`` (of an error of type ``etype``) from ``root`` and ``data``."""
    walk = _Walk(root, data, loc)
    i = 0
    while i < len(walk.loc):
        took = walk.take(i)
        if took is None:  # a context attack's own field: the path ends there
            return walk.step
        i += took
    step = walk.step
    if etype in ("missing", "extra_forbidden") and step.models:
        step.model = step.models[-1]
    return step


class _Walk:
    """Where a walk down a ``loc`` is: the path so far (``step``), the data node and the
    annotation it has reached."""

    def __init__(self, root: type[BaseModel], data: Any, loc: tuple[str | int, ...]) -> None:
        self.step = ErrorPath()
        self.node: Any = data
        self.ann: Any = root
        self.loc = loc

    def take(self, i: int) -> int | None:
        """Read ``loc[i]``: how many parts of ``loc`` that took, or None when the walk ends."""
        part = self.loc[i]
        members = _members(self.ann)
        if part == "[key]":
            self.step.on_key = True
            return 1
        if isinstance(part, str) and len(members) > 1 and self._union_tag(part, members):
            return 1
        if isinstance(part, str) and part.startswith("function-"):  # a validator's own step
            return 1
        model = self.ann if is_model(self.ann) else next(filter(is_model, members), None)
        if model is not None:
            self.step.model = model
            if isinstance(part, str):
                self._model_field(model, part)
                return 1
        origin = typing.get_origin(_unwrap(self.ann))
        args = typing.get_args(_unwrap(self.ann))
        if origin is list:
            self.ann = args[0] if args else Any
            return self._list_item(i) if isinstance(part, int) else 1
        if origin is dict:
            self.ann = args[1] if len(args) > 1 else Any
            self._append(part)
            self.node = self.node.get(part) if isinstance(self.node, dict) else None
            return 1
        self._by_data(part)  # Any or a scalar: keep going by the data
        return 1

    def _append(self, part: str | int, model: type[BaseModel] | None = None) -> None:
        self.step.ypath.append(part)
        self.step.models.append(model)

    def _union_tag(self, part: str, members: list[Any]) -> bool:
        """Whether ``part`` is the tag of a union member (kept, and the walk goes on in it)."""
        picked = [m for m in members if getattr(m, "__name__", None) == part]
        if not (picked or part in UNION_TYPE_TAGS or "[" in part):
            return False
        self.step.tags.append((len(self.step.ypath), part))
        self.ann = picked[0] if picked else self.ann
        return True

    def _model_field(self, model: type[BaseModel], part: str) -> None:
        """The field ``part`` of ``model``, written as its key (``schema`` for ``json_schema``);
        the flat scoring form writes no ``weights`` key (its weights are the section's keys)."""
        self.ann = _field(model, part)
        node = self.node
        flat = isinstance(node, dict) and "weights" not in node
        if part == "weights" and self.step.ypath == ["scoring"] and flat:
            return
        self._append("schema" if part == "json_schema" else part, model)
        self.node = node.get(part) if isinstance(node, dict) else None

    def _list_item(self, i: int) -> int | None:
        """Item ``loc[i]`` of a list; of a dict in the document, the dict-form context attacks,
        its ``loc[i]``-th key (the attack's type)."""
        part = self.loc[i]
        assert isinstance(part, int)
        if not isinstance(self.node, dict):
            self._append(part)
            node = self.node
            self.node = node[part] if isinstance(node, list) and part < len(node) else None
            return 1
        keys = list(self.node)
        if not 0 <= part < len(keys):
            return 1
        self._append(keys[part])
        self.node = self.node[keys[part]]
        following = self.loc[i + 1] if i + 1 < len(self.loc) else None
        if following == "type":  # the error is about the key, which is the attack's type
            self.step.on_key = True
            self.ann = _unwrap(self.ann)
            self.step.model = self.ann if is_model(self.ann) else None
            return 2
        if following == "_":
            self.step.model = ContextAttack
            self._append("_")
            return None
        return 1

    def _by_data(self, part: str | int) -> None:
        self._append(part)
        node = self.node
        if isinstance(node, dict):
            self.node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            self.node = node[part]
        else:
            self.node = None
        self.ann = Any


def is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def field_names(model: type[BaseModel]) -> list[str]:
    """The YAML keys of ``model``: its own fields first, then inherited ones."""
    own = inspect.get_annotations(model)
    fields = sorted(model.model_fields.items(), key=lambda item: item[0] not in own)
    return [info.alias or name for name, info in fields if name != "legacy_form"]


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> list[Any]:
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [_unwrap(a) for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _field(model: type[BaseModel], name: str) -> Any:
    for fname, info in model.model_fields.items():
        if name in (fname, info.alias):
            return info.annotation
    return None
