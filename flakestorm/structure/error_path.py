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
    step = ErrorPath()
    node: Any = data
    ann: Any = root
    elems = list(loc)
    last = len(elems) - 1
    i = 0
    while i < len(elems):
        part = elems[i]
        members = _members(ann)
        model = next((m for m in members if is_model(m)), None)
        if isinstance(part, str) and part == "[key]":
            step.on_key = True
            i += 1
            continue
        # union member tags
        if isinstance(part, str) and len(members) > 1:
            picked = [m for m in members if getattr(m, "__name__", None) == part]
            if picked or part in UNION_TYPE_TAGS or "[" in part:
                step.tags.append((len(step.ypath), part))
                ann = picked[0] if picked else ann
                i += 1
                continue
        if isinstance(part, str) and part.startswith("function-"):
            i += 1
            continue
        if is_model(ann) or model is not None:
            cls = ann if is_model(ann) else model
            assert cls is not None
            step.model = cls
            if isinstance(part, str):
                if (
                    part == "weights"
                    and step.ypath == ["scoring"]
                    and isinstance(node, dict)
                    and "weights" not in node
                ):
                    ann = _field(cls, part)
                    i += 1
                    continue
                step.ypath.append("schema" if part == "json_schema" else part)
                step.models.append(cls)
                ann = _field(cls, part)
                node = node.get(part) if isinstance(node, dict) else None
                i += 1
                continue
        origin = typing.get_origin(_unwrap(ann))
        args = typing.get_args(_unwrap(ann))
        if origin is list:
            ann = args[0] if args else Any
            if isinstance(part, int):
                if isinstance(node, dict):
                    keys = list(node)
                    if 0 <= part < len(keys):
                        step.ypath.append(keys[part])
                        node = node[keys[part]]
                        step.models.append(None)
                        if i < last and elems[i + 1] == "type":
                            step.on_key = True
                            i += 2
                            ann = _unwrap(ann)
                            step.model = ann if is_model(ann) else None
                            continue
                        if i < last and elems[i + 1] == "_":
                            step.model = ContextAttack
                            step.ypath.append("_")
                            return step
                    i += 1
                    continue
                step.ypath.append(part)
                step.models.append(None)
                node = node[part] if isinstance(node, list) and part < len(node) else None
            i += 1
            continue
        if origin is dict:
            ann = args[1] if len(args) > 1 else Any
            step.ypath.append(part)
            step.models.append(None)
            node = node.get(part) if isinstance(node, dict) else None
            i += 1
            continue
        # Any or scalar: keep going by data
        step.ypath.append(part)
        step.models.append(None)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
        ann = Any
        i += 1
    if etype in ("missing", "extra_forbidden") and step.models:
        step.model = step.models[-1]
    return step


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
