"""The config reference: a description of every field, and the generator of its markdown page.

The structure (fields, types, defaults, allowed values) comes from the pydantic model in
:mod:`flakestorm.config`; the words come from the tables in
:mod:`flakestorm.authoring.descriptions`,
keyed by the dotted path a user writes in ``flakestorm.yaml`` (``agent.timeout``). A model
shared by several places (an invariant, a fault) is described once, under its first path.
:mod:`flakestorm.authoring.schema` takes its descriptions from the same tables, so editors show
them too.

Regenerate the page with ``python -m flakestorm.authoring.reference > docs/config-reference.md``; a
test
fails when the page is stale, when a model field has no description, or when a description
names a field that no longer exists.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

from flakestorm.authoring.descriptions import (
    DEFAULT_NOTES,
    FIELD_DESCRIPTIONS,
    INTERNAL_FIELDS,
    SECTION_NOTES,
    SECTIONS,
)
from flakestorm.authoring.value_descriptions import ENUM_DESCRIPTIONS
from flakestorm.config import (
    CONTEXT_ATTACK_FIELDS,
    INVARIANT_FIELDS,
    LEGACY_WEIGHT_KEYS,
    Config,
    MutationType,
)
from flakestorm.loader.document import BYTES_VAR, DEPTH_VAR, MAX_BYTES, MAX_DEPTH

SCHEMA_URL = (
    "https://raw.githubusercontent.com/flakestorm/flakestorm/main/schema/flakestorm.schema.json"
)
"""Where the published JSON Schema lives (the ``$id`` of the schema)."""

EDITOR_HEADER = f"# yaml-language-server: $schema={SCHEMA_URL}"
"""First line of a ``flakestorm.yaml``: editors with the YAML language server validate and
complete the file against the schema."""


# --------------------------------------------------------------------------- model walk


def model_schema() -> dict[str, Any]:
    """The pydantic JSON Schema of :class:`Config`, without the internal fields."""
    schema = Config.model_json_schema(by_alias=True)
    for qualified in INTERNAL_FIELDS:
        model, field = qualified.split(".")
        definition = schema["$defs"].get(model, {})
        definition.get("properties", {}).pop(field, None)
        if field in definition.get("required", []):
            definition["required"].remove(field)
    return schema


def _refs(node: Any) -> Iterator[str]:
    """The ``$defs`` names referenced anywhere inside ``node``, in document order."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _definition(schema: dict[str, Any], name: str) -> dict[str, Any]:
    if name == "Config":
        return schema
    result: dict[str, Any] = schema["$defs"][name]
    return result


def object_models(schema: dict[str, Any]) -> list[str]:
    """Names of the object models reachable from the root, depth first in field order."""
    seen: list[str] = []

    def visit(name: str) -> None:
        if name in seen:
            return
        definition = _definition(schema, name)
        if "properties" not in definition:
            return
        seen.append(name)
        for prop in definition["properties"].values():
            for ref in _refs(prop):
                visit(ref)

    visit("Config")
    return seen


def enum_models(schema: dict[str, Any]) -> list[str]:
    """Names of the enum definitions in the schema."""
    return sorted(name for name, d in schema["$defs"].items() if "enum" in d)


def field_path(model: str, field: str) -> str:
    """The dotted path a field is described under (``AgentConfig``, ``timeout`` ->
    ``agent.timeout``)."""
    section = SECTIONS.get(model)
    if section is None:
        raise KeyError(f"model {model} has no entry in flakestorm.authoring.reference.SECTIONS")
    return f"{section}.{field}" if section else field


def description_problems() -> list[str]:
    """Everything out of step between the tables above and the model; empty when in step."""
    schema = model_schema()
    problems: list[str] = []
    documented: set[str] = set()
    for model in object_models(schema):
        if model not in SECTIONS:
            problems.append(f"model {model} has no section in SECTIONS")
            continue
        for field in _definition(schema, model)["properties"]:
            path = field_path(model, field)
            documented.add(path)
            if path not in FIELD_DESCRIPTIONS:
                problems.append(f"{path} ({model}.{field}) has no description")
    for path in sorted(set(FIELD_DESCRIPTIONS) - documented):
        problems.append(f"FIELD_DESCRIPTIONS[{path!r}] names a field that does not exist")
    for path in sorted(set(DEFAULT_NOTES) - documented):
        problems.append(f"DEFAULT_NOTES[{path!r}] names a field that does not exist")
    sections = {SECTIONS[m] for m in object_models(schema) if m in SECTIONS}
    for section in sorted(set(SECTION_NOTES) - sections):
        problems.append(f"SECTION_NOTES[{section!r}] names a section that does not exist")
    for section in sorted(sections - set(SECTION_NOTES)):
        problems.append(f"section {section!r} has no entry in SECTION_NOTES")
    for model in sorted(set(SECTIONS) - set(object_models(schema))):
        problems.append(f"SECTIONS[{model!r}] names a model that is not in the config")
    enums = enum_models(schema)
    for name in enums:
        values = [str(v) for v in schema["$defs"][name]["enum"]]
        described = ENUM_DESCRIPTIONS.get(name, {})
        problems += [f"{name}.{v} has no description" for v in values if v not in described]
        problems += [
            f"ENUM_DESCRIPTIONS[{name!r}][{v!r}] names a value that does not exist"
            for v in described
            if v not in values
        ]
    for name in sorted(set(ENUM_DESCRIPTIONS) - set(enums)):
        problems.append(f"ENUM_DESCRIPTIONS[{name!r}] names an enum that does not exist")
    return problems


# --------------------------------------------------------------------------- rendering

_ENUM_LINKS = {
    "InvariantType": "[invariant type](#invariant-types)",
    "MutationType": "[mutation type](#mutation-types)",
    "ToolFaultMode": "[tool fault mode](#fault-modes)",
    "LlmFaultMode": "[LLM fault mode](#fault-modes)",
    "DriftType": "[drift type](#fault-modes)",
    "ContextAttackType": "[context attack type](#context-attack-types)",
}


def _anchor(heading: str) -> str:
    """The GitHub anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _section_heading(section: str) -> str:
    return f"`{section}`" if section else "Top level"


def _bounds(node: dict[str, Any]) -> str:
    parts = []
    for key, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            value = node[key]
            shown = f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
            parts.append(f"{sign} {shown}")
    if "minItems" in node:
        parts.append(f"at least {node['minItems']}")
    if node.get("minLength") == 1:
        parts.append("non-empty")
    if "pattern" in node:
        parts.append("`module:attr`" if ":" in node["pattern"] else f"`{node['pattern']}`")
    return f" ({', '.join(parts)})" if parts else ""


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    """A short human rendering of a JSON Schema node."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        definition = schema["$defs"][name]
        if "enum" in definition:
            if name in _ENUM_LINKS:
                return _ENUM_LINKS[name]
            return " | ".join(f"`{v}`" for v in definition["enum"])
        section = SECTIONS.get(name, name)
        return f"[object](#{_anchor(_section_heading(section))})"
    if "anyOf" in node:
        shown = [_type(schema, b) for b in node["anyOf"] if b.get("type") != "null"]
        return " or ".join(dict.fromkeys(shown))
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " | ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type")
    if kind == "array":
        items = node.get("items") or {}
        inner = _type(schema, items) if items else "any"
        return f"list of {inner}{_bounds(node)}"
    if kind == "object":
        values = node.get("additionalProperties")
        if isinstance(values, dict):
            keys = _type(schema, node["propertyNames"]) if "propertyNames" in node else "string"
            return f"map of {keys} → {_type(schema, values)}"
        return "object"
    if kind is None:
        return "any"
    names = {"string": "string", "integer": "integer", "number": "number", "boolean": "bool"}
    return f"{names.get(kind, kind)}{_bounds(node)}"


def _default(path: str, node: dict[str, Any], required: bool) -> str:
    if path in DEFAULT_NOTES:
        return DEFAULT_NOTES[path]
    if required:
        return "**required**"
    if "default" not in node or node["default"] is None:
        return "—"
    if "$ref" in node and isinstance(node["default"], dict):
        return "see section"
    return f"`{json.dumps(node['default'], ensure_ascii=False)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _enum_table(values: dict[str, str], extra: dict[str, str] | None = None) -> list[str]:
    if extra is None:
        lines = ["| value | meaning |", "|---|---|"]
        lines += [f"| `{v}` | {_cell(d)} |" for v, d in values.items()]
    else:
        lines = ["| value | fields | meaning |", "|---|---|---|"]
        lines += [f"| `{v}` | {extra[v]} | {_cell(d)} |" for v, d in values.items()]
    return lines


def _fields_text(required: tuple[str, ...], optional: tuple[str, ...]) -> str:
    parts = [f"`{f}`" for f in required] + [f"`{f}` (optional)" for f in optional]
    return ", ".join(parts) or "—"


def render() -> str:
    """The markdown config reference."""
    schema = model_schema()
    sections = _sections(object_models(schema))
    lines = [*_introduction(), "## Sections", ""]
    for section, _ in sections:
        heading = _section_heading(section)
        lines.append(f"- [{heading}](#{_anchor(heading)})")
    lines += [
        "- [Invariant types](#invariant-types)",
        "- [Fault modes](#fault-modes)",
        "- [Context attack types](#context-attack-types)",
        "- [Mutation types](#mutation-types)",
        "",
    ]
    for section, members in sections:
        lines += _section_table(schema, section, members)
    lines += _vocabulary_tables()
    return "\n".join(lines).rstrip("\n") + "\n"


def _introduction() -> list[str]:
    """The page's title and what holds for every field (variables, strictness, limits)."""
    return [
        "# flakestorm.yaml reference",
        "",
        "<!-- Generated by `python -m flakestorm.authoring.reference > docs/config-reference.md`; "
        "do not edit. -->",
        "",
        "Every section and field of `flakestorm.yaml` (config version 2.0). Strings may use "
        "`${VAR}` and `${VAR:-default}` (environment variables; `$${` is a literal `${`); "
        "values that came from the environment are secrets and are never printed. Unknown "
        'keys are errors. Durations are in milliseconds (`_ms`, `timeout`). "—" means no '
        "default (the field is optional).",
        "",
        "**Editor support:** start the file with this line and editors that use the YAML "
        "language server (VS Code with the YAML extension, JetBrains IDEs, Neovim) validate "
        "and complete it; `flakestorm init` writes it for you:",
        "",
        "```yaml",
        EDITOR_HEADER,
        "```",
        "",
        "The schema is also printed by `flakestorm schema`. Check a file with "
        "`flakestorm validate -c flakestorm.yaml`; `--json` prints the run plan (the fault "
        "channel, the agent's sessions, per phase the cells, the invocations its command sends "
        "and how each scenario runs, and why): the same decisions the run makes. On a config "
        'with errors, `--json` prints them on stdout as `{"errors": [{"file", "line", '
        '"column", "path", "message"}]}` (a YAML syntax error where the parser '
        "stopped; a missing file at line 1, column 1) and exits 2; the text form stays on "
        "stderr. A config written for flakestorm 1.x or 2.0.0 is rewritten in today's form "
        "by `flakestorm migrate` (comments kept, each change listed with its line); it "
        "validates the result before writing and writes nothing `validate` would refuse for a "
        "change it made.",
        "",
        "**Types are strict for numbers and booleans:** a boolean is not a number "
        "(`timeout: true`, `repeat: yes` are errors) and a number is not a boolean "
        "(`case_sensitive: 1` is an error); an integer is a valid number (`threshold: 1`).",
        "",
        f"**Limits:** a config may be at most {MAX_BYTES // 1024 // 1024} MiB, with its YAML "
        f"aliases expanded (an alias counts the bytes of its anchor), and nest at most "
        f"{MAX_DEPTH} levels deep. They are checked before anything else, and a file over one is "
        f"refused with the place and the limit. If a legitimate config needs more, raise them "
        f"with the environment variables `{BYTES_VAR}` (bytes) and `{DEPTH_VAR}` (levels).",
        "",
    ]


def _sections(models: list[str]) -> list[tuple[str, list[str]]]:
    """The models grouped by the section they document (:data:`SECTIONS`), in order."""
    sections: list[tuple[str, list[str]]] = []  # (section, models in it)
    for model in models:
        section = SECTIONS.get(model, model)
        for existing, members in sections:
            if existing == section:
                members.append(model)
                break
        else:
            sections.append((section, [model]))
    return sections


def _section_table(schema: dict[str, Any], section: str, members: list[str]) -> list[str]:
    """A section's heading, note and table of fields (each field once, the first model's)."""
    lines = [f"## {_section_heading(section)}", "", SECTION_NOTES.get(section, ""), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    done: set[str] = set()
    for model in members:
        definition = _definition(schema, model)
        # a later model of a merged section is an alternative form: its required
        # fields are only required in that form
        required = set(definition.get("required", [])) if model == members[0] else set()
        for field, node in definition["properties"].items():
            path = field_path(model, field)
            if path in done:
                continue
            done.add(path)
            kind = _type(schema, node)
            default = _default(path, node, field in required)
            text = FIELD_DESCRIPTIONS.get(path, "(undocumented)")
            lines.append(f"| `{field}` | {_cell(kind)} | {_cell(default)} | {_cell(text)} |")
    if section == "scoring":
        lines.append(
            "| `mutation`, `chaos`, `contract`, `replay` | number (≥ 0, ≤ 1) | — | "
            "Deprecated flat form of `scoring.weights`. |"
        )
    lines.append("")
    return lines


def _vocabulary_tables() -> list[str]:
    """The sections on the closed vocabularies: invariant types, fault modes, context attack
    types and mutation types, each with the values of its own fields."""
    return [*_invariant_types(), *_fault_modes(), *_attack_types(), *_mutation_types()]


def _values(title: str, enum: str, extra: dict[str, str] | None = None) -> list[str]:
    """``title`` over the table of the values of ``enum`` (its name in
    :data:`ENUM_DESCRIPTIONS`)."""
    return ["", title, "", *_enum_table(ENUM_DESCRIPTIONS[enum], extra)]


def _invariant_types() -> list[str]:
    lines = [
        "## Invariant types",
        "",
        "Every type honours `negate`. A type field set on an invariant of another type is an "
        "error.",
        "",
        "| type | fields | passes when |",
        "|---|---|---|",
    ]
    for kind, (req, opt) in INVARIANT_FIELDS.items():
        meaning = ENUM_DESCRIPTIONS["InvariantType"].get(kind.value, "")
        lines.append(f"| `{kind.value}` | {_fields_text(req, opt)} | {_cell(meaning)} |")
    lines += _values("Values of `when`:", "When")
    lines += _values("Values of `severity`:", "Severity")
    lines += _values("Values of `kinds` (`excludes_pii`):", "PiiKind")
    return lines


def _fault_modes() -> list[str]:
    return [
        "",
        "## Fault modes",
        "",
        "Faults act on what the agent sees (its tool results and LLM replies), never on its "
        "final answer. Every fault takes `probability` and a schedule: `calls`, `every`, "
        '`window_ms` (`after_calls` is a shorthand for `calls`); see docs/chaos.md, "Retries '
        'and recovery".',
        *_values("Tool faults (`tool_faults[].mode`):", "ToolFaultMode"),
        *_values("LLM faults (`llm_faults[].mode`):", "LlmFaultMode"),
        *_values("Drift types (`llm_faults[].drift_type`, mode `response_drift`):", "DriftType"),
    ]


def _attack_types() -> list[str]:
    fields = {k.value: _fields_text(*v) for k, v in CONTEXT_ATTACK_FIELDS.items()}
    return [
        "",
        "## Context attack types",
        *_values(
            "List form: `context_attacks: [{type: memory_poisoning, payload: ...}]`; dict form: "
            "`context_attacks: {memory_poisoning: {payload: ...}}`.",
            "ContextAttackType",
            fields,
        ),
        *_values("Values of `strategy` (`memory_poisoning`):", "PoisonStrategy"),
    ]


def _mutation_types() -> list[str]:
    lines = [
        "",
        "## Mutation types",
        "",
        "Request-level types change the HTTP request itself (headers, size, content type, "
        "query string, method, concurrency, upload speed), not only the prompt text.",
        "",
        "| type | level | what it does |",
        "|---|---|---|",
    ]
    for mutation in MutationType:
        level = "request" if mutation.request_level else "prompt"
        meaning = ENUM_DESCRIPTIONS["MutationType"].get(mutation.value, "")
        lines.append(f"| `{mutation.value}` | {level} | {_cell(meaning)} |")
    lines.append("")
    return lines


__all__ = [
    "EDITOR_HEADER",
    "ENUM_DESCRIPTIONS",
    "FIELD_DESCRIPTIONS",
    "LEGACY_WEIGHT_KEYS",
    "SCHEMA_URL",
    "description_problems",
    "field_path",
    "model_schema",
    "render",
]


if __name__ == "__main__":
    sys.stdout.write(render())
