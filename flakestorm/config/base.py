"""The base of every config model: unknown keys are errors, values are frozen, and a boolean is
not a number nor a number a boolean."""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, PydanticKnownError


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values are immutable, and a
    boolean is not a number nor a number a boolean (:func:`strict_scalar`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, data: Any) -> Any:
        # one check per model, not a validator per field: per-field validators are most of
        # what pydantic spends building the config models, which every CLI command does
        refused = _refused_scalars(cls, data)
        if not refused:
            return data
        keys = {detail["loc"][0] for detail in refused}
        others: list[InitErrorDetails] = []
        try:  # the model's other errors are reported with these, as a field's would be
            cls.model_validate({k: v for k, v in data.items() if k not in keys})
        except ValidationError as exc:
            others = [_details(e) for e in exc.errors() if not (e["loc"] and e["loc"][0] in keys)]
        order = {key: i for i, key in enumerate(_field_keys(cls))}
        ordered = sorted(refused + others, key=lambda d: order.get(_head(d), len(order)))
        raise ValidationError.from_exception_data(cls.__name__, ordered)


@functools.cache
def _field_keys(model: type[BaseModel]) -> dict[str, Any]:
    """A model's input keys (field names and aliases) with their fields' annotations."""
    keys = {}
    for name, field in model.model_fields.items():
        keys[name] = field.annotation
        if field.alias:
            keys[field.alias] = field.annotation
    return keys


def _refused_scalars(model: type[BaseModel], data: Any) -> list[InitErrorDetails]:
    if not isinstance(data, dict):
        return []
    keys = _field_keys(model)
    refused: list[InitErrorDetails] = []
    for key, value in data.items():
        if key in keys and isinstance(value, (bool, int, float, list, dict)):
            try:
                strict_scalar(keys[key], value)
            except PydanticCustomError as error:
                refused.append(InitErrorDetails(type=error, loc=(key,), input=value))
    return refused


def _head(detail: InitErrorDetails) -> Any:
    loc = detail["loc"]
    return loc[0] if loc else None


def _details(error: Any) -> InitErrorDetails:
    """A reported error (``ValidationError.errors()``) as it is raised again, its message
    unchanged."""
    ctx = error.get("ctx")
    kind: str | PydanticCustomError = error["type"]
    try:
        same = PydanticKnownError(error["type"], ctx).message() == error["msg"]
    except (KeyError, TypeError, ValueError):
        same = False
    if not same:
        kind = PydanticCustomError(error["type"], error["msg"])  # no context: taken as is
    detail = InitErrorDetails(type=kind, loc=error["loc"], input=error["input"])
    if same and ctx is not None:
        detail["ctx"] = ctx
    return detail


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
