"""The JSON Schema of flakestorm.yaml: committed up to date, strict, and accepting real files.

jsonschema is not a dependency, so the few documents below are checked with a tiny validator
covering the keywords the schema uses; everything else is checked as structure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from flakestorm.authoring.reference import SCHEMA_URL
from flakestorm.authoring.schema import build_schema, render_schema
from flakestorm.authoring.starter import STARTER_CONFIG
from flakestorm.cli import main
from flakestorm.config import InvariantType, MutationType, Severity, When

COMMITTED = Path(__file__).resolve().parent.parent / "schema" / "flakestorm.schema.json"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return build_schema()


def test_committed_schema_is_current() -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    assert result.stdout == render_schema()
    assert COMMITTED.read_text(encoding="utf-8") == result.stdout, (
        "schema/flakestorm.schema.json is stale; regenerate it with "
        "`flakestorm schema > schema/flakestorm.schema.json`"
    )


def test_header(schema: dict[str, Any]) -> None:
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_URL
    assert schema["title"] == "flakestorm.yaml"
    assert schema["description"]
    assert schema["required"] == ["agent"]


def objects(node: Any, where: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if "properties" in node:
            yield where, node
        for key, value in node.items():
            yield from objects(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from objects(item, f"{where}/{i}")


def test_every_object_is_closed_and_described(schema: dict[str, Any]) -> None:
    found = list(objects(schema))
    assert len(found) > 20
    for where, node in found:
        if where.endswith("/if") or where.endswith("/then"):
            continue  # the per-type rules only constrain
        assert node.get("additionalProperties") is False, where
        for name, prop in node["properties"].items():
            assert prop.get("description"), f"{where}/properties/{name}"


def test_enums(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    assert defs["InvariantType"]["enum"] == [t.value for t in InvariantType]
    assert defs["MutationType"]["enum"] == [t.value for t in MutationType]
    assert defs["Severity"]["enum"] == [s.value for s in Severity]
    assert defs["When"]["enum"] == [w.value for w in When]
    for name, definition in defs.items():
        if "enum" in definition and name != "LangsmithSource":
            described = definition["enumDescriptions"]
            assert len(described) == len(definition["enum"]) and all(described), name


def test_internal_and_generated_noise_removed(schema: dict[str, Any]) -> None:
    text = json.dumps(schema)
    assert "legacy_form" not in text
    assert '"title": "Min Pass"' not in text


def test_legacy_scoring_keys_are_deprecated(schema: dict[str, Any]) -> None:
    scoring = schema["$defs"]["Scoring"]
    for key in ("mutation", "chaos", "contract", "replay"):
        assert scoring["properties"][key]["deprecated"] is True
        assert scoring["dependentSchemas"][key] == {"not": {"required": ["weights"]}}


# --------------------------------------------------------------------------- documents


def check(instance: Any, node: Any, root: dict[str, Any], where: str = "") -> list[str]:
    """Errors of ``instance`` against ``node``: the keywords this schema uses, nothing more."""
    if node is True or node == {}:
        return []
    if node is False:
        return [f"{where}: not allowed"]
    errors: list[str] = []
    if "$ref" in node:
        target = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        errors += check(instance, target, root, where)
    kind = node.get("type")
    if kind is not None:
        types = {
            "object": dict,
            "array": list,
            "string": str,
            "boolean": bool,
            "null": type(None),
            "integer": int,
            "number": (int, float),
        }
        ok = isinstance(instance, types[kind]) and not (
            kind in ("integer", "number") and isinstance(instance, bool)
        )
        if not ok:
            return [*errors, f"{where}: not {kind}"]
    if "enum" in node and instance not in node["enum"]:
        errors.append(f"{where}: {instance!r} not in enum")
    if "const" in node and instance != node["const"]:
        errors.append(f"{where}: not {node['const']!r}")
    if "anyOf" in node:
        failures = [check(instance, b, root, where) for b in node["anyOf"]]
        if all(failures):
            errors.append(f"{where}: matches no anyOf branch: {failures}")
    for branch in node.get("allOf", []):
        errors += check(instance, branch, root, where)
    if "not" in node and not check(instance, node["not"], root, where):
        errors.append(f"{where}: matches `not`")
    if "if" in node and not check(instance, node["if"], root, where):
        errors += check(instance, node.get("then", True), root, where)
    if isinstance(instance, str) and "pattern" in node and not re.search(node["pattern"], instance):
        errors.append(f"{where}: does not match {node['pattern']}")
    if isinstance(instance, (int, float)):
        if "minimum" in node and instance < node["minimum"]:
            errors.append(f"{where}: below minimum")
        if "maximum" in node and instance > node["maximum"]:
            errors.append(f"{where}: above maximum")
    if isinstance(instance, list):
        errors += [f"{where}: too short" for _ in [0] if len(instance) < node.get("minItems", 0)]
        for i, item in enumerate(instance):
            errors += check(item, node.get("items", True), root, f"{where}[{i}]")
    if isinstance(instance, dict):
        props = node.get("properties", {})
        for name in node.get("required", []):
            if name not in instance:
                errors.append(f"{where}: missing {name}")
        for name, value in instance.items():
            if name in props:
                errors += check(value, props[name], root, f"{where}.{name}")
            elif "additionalProperties" in node:
                errors += check(value, node["additionalProperties"], root, f"{where}.{name}")
        for name, dependent in node.get("dependentSchemas", {}).items():
            if name in instance:
                errors += check(instance, dependent, root, where)
    return errors


FULL = """
version: 2.0
agent:
  type: http
  endpoint: http://localhost:8000/invoke
  headers: {Authorization: Bearer x}
  start: {command: python app.py, env: {PORT: "8000"}}
golden_prompts: [hi]
invariants:
  - type: contains
    value: hello
    case_sensitive: true
contract:
  name: c
  invariants:
    - {id: a, type: regex, pattern: "\\\\d+", severity: critical, when: no_chaos}
    - {id: b, type: excludes_pii, kinds: [email, iban]}
    - {id: c, type: behavior_unchanged, baseline: auto, similarity_threshold: 0.8}
    - {id: d, type: valid_json, schema: {type: object}}
  chaos_matrix:
    - name: calm
    - name: storm
      tool_faults:
        - {tool: search, mode: error, error_code: 500, probability: 0.5, after_calls: 1}
      llm_faults:
        - {mode: response_drift, drift_type: tone_shift}
      context_attacks:
        memory_poisoning: {payload: x, strategy: append}
        conflicting_context:
    - name: listed
      context_attacks:
        - {type: overflow, inject_tokens: 1000}
chaos:
  llm_faults: [{mode: rate_limit}]
proxy: {url: "http://flakestorm-proxy:8080", tools: {search: "http://search"}}
mutations: {count: 5, types: [paraphrase, noise], weights: {noise: 2}}
replays:
  sessions:
    - {id: s1, input: hi, tool_responses: [{tool: search, status: 503}]}
    - {file: sessions/s2.yaml}
scoring: {weights: {mutation: 0.25, chaos: 0.25, contract: 0.25, replay: 0.25}, min_score: 70}
output: {formats: [junit, json]}
advanced: {seed: 1, repeat: 3, min_pass: 2, similarity: lexical}
"""


@pytest.mark.parametrize(
    "text",
    [
        STARTER_CONFIG,
        FULL,
        "agent: {endpoint: x}\nscoring: {mutation: 0.25, chaos: 0.25, contract: 0.25, "
        "replay: 0.25}\n",
    ],
    ids=["starter", "full", "legacy-scoring"],
)
def test_valid_documents(schema: dict[str, Any], text: str) -> None:
    assert check(yaml.safe_load(text), schema, schema) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("agent: {endpoint: x, tiemout: 1}", "tiemout"),
        ("agent: {endpoint: x, type: grpc}", "agent.type"),
        ("golden_prompts: [hi]", "missing agent"),
        (
            "agent: {endpoint: x}\ncontract: {name: c, chaos_matrix: [{name: s}], invariants: "
            "[{id: a, type: regex}]}",
            "missing pattern",
        ),
        (
            "agent: {endpoint: x}\ncontract: {name: c, chaos_matrix: [{name: s}], invariants: "
            "[{id: a, type: latency, max_ms: 5, pattern: x}]}",
            "pattern: not allowed",
        ),
        (
            "agent: {endpoint: x}\nchaos: {context_attacks: {memory_poison: {payload: x}}}",
            "context_attacks",
        ),
        (
            "agent: {endpoint: x}\nchaos: {context_attacks: {overflow: {payload: x}}}",
            "context_attacks",
        ),
        ("agent: {endpoint: x}\nscoring: {weights: {chaos: 1}, chaos: 1}", "scoring"),
        ("agent: {endpoint: x}\nmutations: {types: [paraphrase, telepathy]}", "telepathy"),
    ],
)
def test_invalid_documents(schema: dict[str, Any], text: str, expected: str) -> None:
    errors = check(yaml.safe_load(text), schema, schema)
    assert errors
    assert any(expected in e for e in errors), errors
