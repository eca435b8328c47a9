from __future__ import annotations

from typing import Any

import pytest

from flakestorm.checks.json_schema import type_name, unsupported_keywords, validate


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer"}, 3),
        ({"type": "integer"}, 3.0),
        ({"type": "number"}, 3),
        ({"type": ["string", "null"]}, None),
        ({"enum": [1, "a"]}, 1.0),
        ({"const": {"a": [1, 2]}}, {"a": [1, 2.0]}),
        ({"minimum": 1, "maximum": 3}, 3),
        ({"exclusiveMinimum": 1, "exclusiveMaximum": 3}, 2),
        ({"multipleOf": 0.01}, 12.34),
        ({"minLength": 2, "maxLength": 3, "pattern": "^a"}, "abc"),
        ({"items": {"type": "integer"}, "minItems": 1, "maxItems": 2, "uniqueItems": True}, [1, 2]),
        ({"required": ["a"], "properties": {"a": {"type": "string"}}}, {"a": "x", "b": 1}),
        (
            {"additionalProperties": {"type": "integer"}, "properties": {"a": {}}},
            {"a": "x", "b": 1},
        ),
        ({"minProperties": 1, "maxProperties": 1}, {"a": 1}),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "x"),
        ({"allOf": [{"type": "integer"}, {"minimum": 0}]}, 1),
        ({"not": {"type": "string"}}, 1),
        (True, {"anything": 1}),
        ({"title": "t", "description": "d", "format": "email", "$schema": "x"}, "not an email"),
        ({}, 1),
    ],
)
def test_valid_instances(schema: Any, instance: Any) -> None:
    assert unsupported_keywords(schema) == []
    assert validate(instance, schema) == []


@pytest.mark.parametrize(
    ("schema", "instance", "error"),
    [
        ({"type": "integer"}, 3.5, "$: expected integer, got number"),
        ({"type": "integer"}, True, "$: expected integer, got boolean"),
        ({"type": "number"}, "3", "$: expected number, got string"),
        ({"type": ["string", "null"]}, 1, "$: expected string or null, got integer"),
        ({"enum": [1, "a"]}, True, '$: true is not one of [1, "a"]'),
        ({"const": 0}, False, "$: expected 0, got false"),
        ({"minimum": 1}, 0, "$: 0 < minimum 1"),
        ({"maximum": 1}, 2, "$: 2 > maximum 1"),
        ({"exclusiveMinimum": 1}, 1, "$: 1 ≤ exclusiveMinimum 1"),
        ({"exclusiveMaximum": 1}, 1, "$: 1 ≥ exclusiveMaximum 1"),
        ({"multipleOf": 0.01}, 12.345, "$: 12.345 is not a multiple of 0.01"),
        ({"minLength": 2}, "a", "$: shorter than minLength 2 (1)"),
        ({"maxLength": 2}, "abc", "$: longer than maxLength 2 (3)"),
        ({"pattern": "^a"}, "ba", '$: "ba" does not match pattern ^a'),
        ({"minItems": 1}, [], "$: fewer than minItems 1 (0)"),
        ({"maxItems": 1}, [1, 2], "$: more than maxItems 1 (2)"),
        ({"uniqueItems": True}, [1, 1.0], "$[1]: duplicate item (uniqueItems)"),
        ({"items": {"type": "string"}}, ["a", 2], "$[1]: expected string, got integer"),
        ({"required": ["id"]}, {}, "$: missing required property `id`"),
        (
            {"properties": {"a": {"properties": {"b c": {"type": "string"}}}}},
            {"a": {"b c": 1}},
            '$.a["b c"]: expected string, got integer',
        ),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "b": 2},
            "$: unexpected property `b` (additionalProperties false)",
        ),
        (
            {"additionalProperties": {"type": "string"}},
            {"b": 2},
            "$.b: expected string, got integer",
        ),
        ({"minProperties": 1}, {}, "$: fewer than minProperties 1"),
        ({"maxProperties": 0}, {"a": 1}, "$: more than maxProperties 0"),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            None,
            "$: matches none of the 2 `anyOf` schemas",
        ),
        (
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            1,
            "$: matches 2 of the 2 `oneOf` schemas (expected 1)",
        ),
        ({"allOf": [{"type": "integer"}, {"minimum": 5}]}, 1, "$: 1 < minimum 5"),
        ({"not": {"type": "string"}}, "x", "$: matches the `not` schema"),
        (False, 1, "$: no value is allowed here (schema `false`)"),
    ],
)
def test_invalid_instances(schema: Any, instance: Any, error: str) -> None:
    assert unsupported_keywords(schema) == []
    assert [str(e) for e in validate(instance, schema)] == [error]


def test_every_error_is_reported() -> None:
    schema = {"type": "object", "required": ["a", "b"], "properties": {"c": {"type": "string"}}}
    errors = [str(e) for e in validate({"c": 1}, schema)]
    assert errors == [
        "$: missing required property `a`",
        "$: missing required property `b`",
        "$.c: expected string, got integer",
    ]


def test_unsupported_keywords_are_listed_with_their_place() -> None:
    schema = {
        "type": "object",
        "$defs": {},
        "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"items": [{"type": "string"}]}},
        "anyOf": [{"if": {}}],
        "not": {"patternProperties": {}},
        "additionalProperties": {"dependentRequired": {}},
    }
    assert unsupported_keywords(schema) == [
        "`$defs` at #",
        "`$ref` at #/properties/a",
        "`items` as a list (tuple validation) at #/properties/b",
        "`if` at #/anyOf/0",
        "`patternProperties` at #/not",
        "`dependentRequired` at #/additionalProperties",
    ]
    assert unsupported_keywords([]) == ["a schema that is not an object at #"]


def test_type_names() -> None:
    assert [type_name(v) for v in (None, True, 1, 1.5, "s", [], {})] == [
        "null",
        "boolean",
        "integer",
        "number",
        "string",
        "array",
        "object",
    ]
