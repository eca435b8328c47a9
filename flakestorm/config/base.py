"""The base of every config model: unknown keys are errors, values are frozen, and a boolean is
not a number nor a number a boolean."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values are immutable, and a
    boolean is not a number nor a number a boolean (:func:`strict_scalar`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("*", mode="before", check_fields=False)
    @classmethod
    def _strict_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        return value if field is None else strict_scalar(field.annotation, value)


def strict_scalar(annotation: Any, value: Any) -> Any:
    """``value`` for a field of type ``annotation``, refused when it is a boolean where only
    numbers are valid (``timeout: true``, ``repeat: yes``) or a number where only booleans are
    (``case_sensitive: 1``); also inside lists and mappings. Pydantic's lax mode would take
    ``true`` as 1 and ``1`` as true. A YAML integer stays valid for a float field, and text
    (``${VAR}``) is left to the field's own parsing."""
    kinds = _kinds(annotation)
    if isinstance(value, bool):
        if bool not in kinds and kinds & {int, float}:
            kind = "int_type" if int in kinds else "float_type"
            raise PydanticCustomError(kind, "a boolean is not a number")
    elif isinstance(value, (int, float)):
        if bool in kinds and not kinds & {int, float, str}:
            raise PydanticCustomError("bool_type", "a number is not a boolean")
    elif isinstance(value, list):
        item = _item_type(annotation, list)
        if item is not None:
            for element in value:
                strict_scalar(item, element)
    elif isinstance(value, dict):
        item = _item_type(annotation, dict)
        if item is not None:
            for element in value.values():
                strict_scalar(item, element)
    return value


def _unwrap(annotation: Any) -> list[Any]:
    """The plain types ``annotation`` may be: Annotated and unions (Optional) unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg)]
    return [annotation]


def _kinds(annotation: Any) -> set[Any]:
    return {t for t in _unwrap(annotation) if t in (bool, int, float, str)}


def _item_type(annotation: Any, container: type) -> Any:
    """The element type of a ``list[T]`` (or the value type of a ``dict[K, V]``) in
    ``annotation``, if it has one."""
    for option in _unwrap(annotation):
        if typing.get_origin(option) is container:
            args = typing.get_args(option)
            return args[-1] if args else None
    return None
