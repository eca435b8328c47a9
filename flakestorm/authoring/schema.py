"""The JSON Schema of flakestorm.yaml, built from the pydantic model.

``Config.model_json_schema()`` gives the structure; this module makes it what an editor needs:

- draft 2020-12 ``$schema``, an ``$id`` (the published URL), a title and a description;
- a description on every field and enum value, from :mod:`flakestorm.authoring.reference`
  (``enumDescriptions`` is the VS Code keyword editors show in completion lists);
- the dict form of ``context_attacks`` (an object keyed by attack type) next to the list form;
- the flat legacy ``scoring`` keys, marked ``deprecated``, and not together with ``weights``;
- per-type rules for invariants and context attacks (``regex`` needs ``pattern``, no field of
  another type), mirroring what the loader checks;
- ``version: 2.0`` written as a YAML number, which the loader accepts too.

The committed ``schema/flakestorm.schema.json`` is the output of ``flakestorm schema``; a test
keeps them equal. Regenerate with ``flakestorm schema > schema/flakestorm.schema.json``.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from flakestorm.authoring.descriptions import (
    FIELD_DESCRIPTIONS,
    SECTION_NOTES,
    SECTIONS,
)
from flakestorm.authoring.reference import (
    SCHEMA_URL,
    field_path,
    model_schema,
    object_models,
)
from flakestorm.authoring.value_descriptions import ENUM_DESCRIPTIONS
from flakestorm.config import (
    CONTEXT_ATTACK_FIELDS,
    INVARIANT_FIELDS,
    LEGACY_WEIGHT_KEYS,
)

DRAFT = "https://json-schema.org/draft/2020-12/schema"
REFERENCE_URL = "https://github.com/flakestorm/flakestorm/blob/main/docs/config-reference.md"

_LINK = re.compile(r"\[([^\]]+)\]\(#[^)]*\)")


def _plain(text: str) -> str:
    """A description without the reference page's in-page links."""
    return _LINK.sub(r"\1", text)


def _strip_titles(node: Any) -> None:
    """Drop pydantic's generated titles ("Min Pass"): the descriptions say more."""
    if isinstance(node, dict):
        if isinstance(node.get("title"), str):
            del node["title"]
        for value in node.values():
            _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)


def _describe(schema: dict[str, Any]) -> None:
    for model in object_models(schema):
        if model not in SECTIONS:
            continue
        definition = schema if model == "Config" else schema["$defs"][model]
        note = SECTION_NOTES.get(SECTIONS[model])
        if note and model != "Config":
            definition["description"] = _plain(note)
        for field, node in definition["properties"].items():
            text = FIELD_DESCRIPTIONS.get(field_path(model, field))
            if text:
                node["description"] = _plain(text)
    for name, definition in schema["$defs"].items():
        described = ENUM_DESCRIPTIONS.get(name)
        if "enum" in definition and described:
            definition["enumDescriptions"] = [
                _plain(described.get(str(v), "")) for v in definition["enum"]
            ]


def _type_rules(
    definition: dict[str, Any], fields: dict[Any, tuple[tuple[str, ...], tuple[str, ...]]]
) -> None:
    """``if type == T then`` T's required fields are required and other types' fields absent."""
    every = {f for req, opt in fields.values() for f in (*req, *opt)}
    rules = []
    for kind, (required, optional) in fields.items():
        foreign = sorted(every - set(required) - set(optional))
        then: dict[str, Any] = {}
        if required:
            then["required"] = list(required)
        if foreign:
            then["properties"] = {f: False for f in foreign}
        if then:
            rules.append(
                {
                    "if": {"properties": {"type": {"const": kind.value}}, "required": ["type"]},
                    "then": then,
                }
            )
    definition["allOf"] = rules


def _context_attack_map(schema: dict[str, Any]) -> dict[str, Any]:
    """The dict form: ``{memory_poisoning: {payload: ...}, overflow: {...}}``."""
    attack = schema["$defs"]["ContextAttack"]["properties"]
    described = ENUM_DESCRIPTIONS["ContextAttackType"]
    properties: dict[str, Any] = {}
    for kind, (required, optional) in CONTEXT_ATTACK_FIELDS.items():
        params: dict[str, Any] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {f: copy.deepcopy(attack[f]) for f in (*required, *optional)},
        }
        if required:
            params["required"] = list(required)
        branch: dict[str, Any] = params if required else {"anyOf": [params, {"type": "null"}]}
        properties[kind.value] = {"description": _plain(described[kind.value]), **branch}
    return {
        "type": "object",
        "description": "Context attacks keyed by attack type (the dict form of the list).",
        "additionalProperties": False,
        "properties": properties,
    }


def _context_attacks_forms(schema: dict[str, Any]) -> None:
    schema["$defs"]["ContextAttackMap"] = _context_attack_map(schema)
    for definition in schema["$defs"].values():
        node = definition.get("properties", {}).get("context_attacks")
        if node is None:
            continue
        listed = {k: v for k, v in node.items() if k not in ("default", "description")}
        replaced: dict[str, Any] = {
            "anyOf": [listed, {"$ref": "#/$defs/ContextAttackMap"}],
            "default": node.get("default", []),
        }
        if "description" in node:
            replaced["description"] = node["description"]
        definition["properties"]["context_attacks"] = replaced


def _legacy_scoring(schema: dict[str, Any]) -> None:
    scoring = schema["$defs"]["Scoring"]
    weight = schema["$defs"]["Weights"]["properties"]
    for key in LEGACY_WEIGHT_KEYS:
        node = {k: v for k, v in weight[key].items() if k != "default"}
        node["deprecated"] = True
        node["description"] = f"Deprecated: use scoring.weights.{key}."
        scoring["properties"][key] = node
    scoring["dependentSchemas"] = {
        key: {"not": {"required": ["weights"]}} for key in LEGACY_WEIGHT_KEYS
    }


def _version(schema: dict[str, Any]) -> None:
    node = schema["properties"]["version"]
    as_text = {"type": "string", "enum": node.pop("enum")}
    node.pop("type", None)
    node["anyOf"] = [as_text, {"type": "number", "enum": [2.0, 1.0]}]


def build_schema() -> dict[str, Any]:
    """The JSON Schema of ``flakestorm.yaml``."""
    schema = model_schema()
    _strip_titles(schema)
    _describe(schema)
    _version(schema)
    _legacy_scoring(schema)
    for name in ("Invariant", "ContractInvariant"):
        _type_rules(schema["$defs"][name], dict(INVARIANT_FIELDS))
    _type_rules(schema["$defs"]["ContextAttack"], dict(CONTEXT_ATTACK_FIELDS))
    _context_attacks_forms(schema)
    header = {
        "$schema": DRAFT,
        "$id": SCHEMA_URL,
        "title": "flakestorm.yaml",
        "description": "Configuration of flakestorm: chaos engineering and behavioural "
        f"contracts for AI agents. Reference: {REFERENCE_URL}",
    }
    return {**header, **schema}


def render_schema() -> str:
    """The schema as the text of ``schema/flakestorm.schema.json``."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"
