"""A small JSON Schema validator for the ``valid_json`` invariant's ``schema`` (SPEC §3).

It covers the subset contracts use, with draft 2020-12 meaning, and no dependency:

* any value: ``type`` (a name or a list), ``enum``, ``const``, ``allOf``, ``anyOf``, ``oneOf``,
  ``not``; boolean schemas (``true`` / ``false``);
* numbers: ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers),
  ``multipleOf``;
* strings: ``minLength``, ``maxLength``, ``pattern`` (``re.search``);
* arrays: ``items`` (one schema for every item), ``minItems``, ``maxItems``, ``uniqueItems``;
* objects: ``properties``, ``required``, ``additionalProperties`` (``false`` or a schema),
  ``minProperties``, ``maxProperties``.

Annotation keywords (:data:`ANNOTATIONS`: ``title``, ``description``, ``format``, ...) assert
nothing, as in the standard. Any other keyword (``$ref``, ``if``, ``patternProperties``, ...)
is *unsupported*: :func:`unsupported_keywords` lists them so the caller can say so rather than
pretend the schema was checked.

Equality (``enum``, ``const``, ``uniqueItems``) is JSON equality: ``1 == 1.0`` but
``true != 1``.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeGuard

from flakestorm.redaction import active
from flakestorm.structure.wording import json_type

ASSERTIONS = frozenset(
    {
        "type", "enum", "const", "allOf", "anyOf", "oneOf", "not",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "pattern",
        "items", "minItems", "maxItems", "uniqueItems",
        "properties", "required", "additionalProperties", "minProperties", "maxProperties",
    }
)  # fmt: skip
"""Keywords this validator checks."""

ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$comment", "$anchor", "title", "description", "default",
        "examples", "format", "deprecated", "readOnly", "writeOnly",
        "contentMediaType", "contentEncoding",
    }
)  # fmt: skip
"""Keywords that describe and assert nothing; ignored, as the standard allows."""

_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SUBSCHEMAS = ("not", "items", "additionalProperties")


@dataclass(frozen=True)
class SchemaError:
    """One way an instance fails a schema: where in the instance, and what is wrong."""

    path: str
    """Where in the instance, like ``$.items[0].price``."""
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def unsupported_keywords(schema: Any, where: str = "#") -> list[str]:
    """Every keyword of ``schema`` this validator does not check, as ``keyword at #/path``."""
    found: list[str] = []
    if isinstance(schema, bool):
        return found
    if not isinstance(schema, dict):
        return [f"a schema that is not an object at {where}"]
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in ASSERTIONS:
            found.append(f"`{key}` at {where}")
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                found.extend(unsupported_keywords(sub, f"{where}/{key}/{i}"))
        elif key in _SUBSCHEMAS:
            if key == "items" and isinstance(value, list):
                found.append(f"`items` as a list (tuple validation) at {where}")
            else:
                found.extend(unsupported_keywords(value, f"{where}/{key}"))
        elif key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                found.extend(unsupported_keywords(sub, f"{where}/properties/{name}"))
    return found


def validate(instance: Any, schema: Any) -> list[SchemaError]:
    """Every error of ``instance`` against ``schema`` (empty when it validates).

    Call :func:`unsupported_keywords` first: keywords it lists are skipped here.
    """
    return list(_errors(instance, schema, "$"))


_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


def type_name(value: Any) -> str:
    """The JSON type of a parsed value: ``null``, ``boolean``, ``integer``, ``number``, ..."""
    return json_type(value) or type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    actual = type_name(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == name


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _show(value: Any, limit: int = 40) -> str:
    text = active()(json.dumps(value, ensure_ascii=False, default=str))  # redact, then cut
    return text if len(text) <= limit else text[: limit - 1] + "…"


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _errors(value: Any, schema: Any, path: str) -> Iterator[SchemaError]:
    if schema is True:
        return
    if schema is False:
        yield SchemaError(path, "no value is allowed here (schema `false`)")
        return
    if not isinstance(schema, dict):
        return
    yield from _generic(value, schema, path)
    if _is_number(value):
        yield from _numeric(value, schema, path)
    elif isinstance(value, str):
        yield from _string(value, schema, path)
    elif isinstance(value, list):
        yield from _array(value, schema, path)
    elif isinstance(value, dict):
        yield from _object(value, schema, path)


def _generic(value: Any, schema: dict[str, Any], path: str) -> Iterator[SchemaError]:
    if "type" in schema:
        wanted = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in wanted):
            yield SchemaError(
                path, f"expected {' or '.join(map(str, wanted))}, got {type_name(value)}"
            )
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_json_equal(value, option) for option in enum):
        yield SchemaError(path, f"{_show(value)} is not one of {_show(schema['enum'])}")
    if "const" in schema and not _json_equal(value, schema["const"]):
        yield SchemaError(path, f"expected {_show(schema['const'])}, got {_show(value)}")
    for sub in schema.get("allOf", ()):
        yield from _errors(value, sub, path)
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not any(not list(_errors(value, sub, path)) for sub in branches):
            yield SchemaError(path, f"matches none of the {len(branches)} `anyOf` schemas")
    if "oneOf" in schema:
        branches = schema["oneOf"]
        matching = sum(1 for sub in branches if not list(_errors(value, sub, path)))
        if matching != 1:
            yield SchemaError(
                path, f"matches {matching} of the {len(branches)} `oneOf` schemas (expected 1)"
            )
    if "not" in schema and not list(_errors(value, schema["not"], path)):
        yield SchemaError(path, "matches the `not` schema")


def _numeric(value: float, schema: dict[str, Any], path: str) -> Iterator[SchemaError]:
    bounds = (
        ("minimum", operator.ge, "<"),
        ("maximum", operator.le, ">"),
        ("exclusiveMinimum", operator.gt, "≤"),
        ("exclusiveMaximum", operator.lt, "≥"),
    )
    for keyword, holds, opposite in bounds:
        bound = schema.get(keyword)
        if _is_number(bound) and not holds(value, bound):
            yield SchemaError(path, f"{_show(value)} {opposite} {keyword} {_show(bound)}")
    step = schema.get("multipleOf")
    if _is_number(step) and step > 0:
        quotient = value / step
        if not (math.isfinite(quotient) and math.isclose(quotient, round(quotient))):
            yield SchemaError(path, f"{_show(value)} is not a multiple of {_show(step)}")


def _string(value: str, schema: dict[str, Any], path: str) -> Iterator[SchemaError]:
    if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
        yield SchemaError(path, f"shorter than minLength {schema['minLength']} ({len(value)})")
    if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        yield SchemaError(path, f"longer than maxLength {schema['maxLength']} ({len(value)})")
    if isinstance(schema.get("pattern"), str):
        try:
            matches = _pattern(schema["pattern"]).search(value) is not None
        except re.error as exc:
            yield SchemaError(path, f"the schema's pattern does not compile: {exc}")
            return
        if not matches:
            yield SchemaError(path, f"{_show(value)} does not match pattern {schema['pattern']}")


def _array(value: list[Any], schema: dict[str, Any], path: str) -> Iterator[SchemaError]:
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        yield SchemaError(path, f"fewer than minItems {schema['minItems']} ({len(value)})")
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        yield SchemaError(path, f"more than maxItems {schema['maxItems']} ({len(value)})")
    if schema.get("uniqueItems") is True:
        for i, item in enumerate(value):
            if any(_json_equal(item, other) for other in value[:i]):
                yield SchemaError(f"{path}[{i}]", "duplicate item (uniqueItems)")
                break
    items = schema.get("items")
    if isinstance(items, (dict, bool)):
        for i, item in enumerate(value):
            yield from _errors(item, items, f"{path}[{i}]")


def _object(value: dict[str, Any], schema: dict[str, Any], path: str) -> Iterator[SchemaError]:
    for name in schema.get("required", ()):
        if name not in value:
            yield SchemaError(path, f"missing required property `{name}`")
    if isinstance(schema.get("minProperties"), int) and len(value) < schema["minProperties"]:
        yield SchemaError(path, f"fewer than minProperties {schema['minProperties']}")
    if isinstance(schema.get("maxProperties"), int) and len(value) > schema["maxProperties"]:
        yield SchemaError(path, f"more than maxProperties {schema['maxProperties']}")
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for name, sub in properties.items():
        if name in value:
            yield from _errors(value[name], sub, _child(path, name))
    extra = schema.get("additionalProperties")
    if extra is None or extra is True:
        return
    for name in value:
        if name in properties:
            continue
        if extra is False:
            yield SchemaError(path, f"unexpected property `{name}` (additionalProperties false)")
        else:
            yield from _errors(value[name], extra, _child(path, name))


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if re.fullmatch(r"[A-Za-z_]\w*", name) else f"{path}[{_show(name)}]"
