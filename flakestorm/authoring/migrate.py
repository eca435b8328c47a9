"""``flakestorm migrate``: a config written for flakestorm 1.x or 2.0.0 in today's form (SPEC §2),
and the replay session files it names.

Files are edited line by line (:mod:`flakestorm.authoring.yaml_text`), never re-dumped: only
the lines of a key that changes are touched, so comments, quoting and order survive.

:data:`RULES` is the one registry, by (model, key) wherever the model is
(:data:`CONFIG_PLACES`): every key and value :mod:`flakestorm.loader.legacy` refuses or warns
about (its hints word the notes), and a few 1.x values today's loader refuses (a ``$.``
response path, ``seed: null``, ``threshold`` on a type without one). A rule returns a
:class:`Fix` — its line edits and what was done — or None when the key is fine. Fixes whose
lines overlap wait for the next round, which reads the file again; a key inside a flow
collection has the collection written in block style first. A key can move to another
section (2.0.0's top-level ``chaos_matrix`` under ``contract``): the places inside it come
first in :data:`CONFIG_PLACES`, so their fixes are made where they are, and it moves a round
later. Once the rules are done, a section they emptied (it held something; an empty section
is refused) is removed too, with the comments just above it. Each :class:`Change` gives the
line of the file as it was. What the rules leave (``agent.type: langchain``: it needs the
user's code) is left for the loader to report; :mod:`flakestorm.authoring.migrate_check` says
whether the result has a problem migrate made.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from pydantic import BaseModel

from flakestorm.authoring.yaml_text import (
    Edit,
    FlowCollection,
    YamlText,
    flow,
    line_before,
    short,
)
from flakestorm.config import (
    INVARIANT_FIELDS,
    LEGACY_WEIGHT_KEYS,
    Advanced,
    AgentConfig,
    Config,
    ContextAttack,
    ContractInvariant,
    Invariant,
    InvariantType,
    LangsmithSource,
    LlmFault,
    Mutations,
    Output,
    OutputFormat,
    Scoring,
    Session,
    ToolResponse,
)
from flakestorm.errors import ConfigError, Problem
from flakestorm.loader.legacy import (
    ERRORED_STATUS,
    NULL_LATENCY,
    NULL_SEED,
    NULL_STATUS,
    UPSTREAM_ERROR_STATUS,
    UPSTREAM_KEYS,
)
from flakestorm.loader.sessions import SESSION_FILE, session_paths, shown
from flakestorm.structure.paths import ConfigPath, format_path


@dataclass(frozen=True)
class Change:
    """One thing migrate did, at a line of the file as it was."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


@dataclass(frozen=True)
class Migrated:
    """A file before and after: ``after == before`` when nothing needed a change."""

    path: Path
    before: str
    after: str
    changes: tuple[Change, ...]

    @property
    def changed(self) -> bool:
        return self.after != self.before


@dataclass(frozen=True)
class Fix:
    edits: tuple[Edit, ...]
    note: str
    at: ConfigPath | None = None
    """Where the change is listed (default: the key the rule is for)."""


# --------------------------------------------------------------------------- the rules

Rule = Callable[[YamlText, ConfigPath], Fix | None]


def _remove(src: YamlText, path: ConfigPath, why: str) -> Fix:
    return Fix((src.remove(path),), f"{short(src.value(path))} removed: {why}")


def _removed(why: str) -> Rule:
    return lambda src, path: _remove(src, path, why)


def _renamed(new: str) -> Rule:
    def rule(src: YamlText, path: ConfigPath) -> Fix:
        value, there = short(src.value(path)), format_path((*path[:-1], new))
        if new in src.value(path[:-1]):
            return Fix((src.remove(path),), f"{value} removed: {there} is set")
        return Fix((src.rename(path, new),), f"{value} -> {there}: {value}")

    return rule


def _version(src: YamlText, path: ConfigPath) -> Fix | None:
    if src.value(path) not in ("1.0", 1.0):
        return None
    return Fix((src.put(path, "version", "2.0"),), f'{flow(src.value(path))} -> "2.0"')


def _formats(src: YamlText, path: ConfigPath) -> Fix:
    value = src.value(path)
    if "formats" in src.value(path[:-1]):
        return Fix((src.remove(path),), f"{short(value)} removed: output.formats is set")
    known = [f.value for f in OutputFormat]
    wanted = [str(v) for v in (value if isinstance(value, list) else [value])]
    kept = [v for v in wanted if v in known]
    note = f"{short(value)} -> output.formats: {flow(kept)}"
    if dropped := [v for v in wanted if v not in known]:
        note += f" ({', '.join(dropped)} dropped: the formats are {', '.join(known)}; "
        note += "results.json is always written, the terminal summary always printed)"
    return Fix((src.put(path, "formats", kept),), note)


def _query_params(src: YamlText, path: ConfigPath) -> Fix:
    params, endpoint = src.value(path), src.value(path[:-1]).get("endpoint")
    if not params or not isinstance(params, dict) or not isinstance(endpoint, str):
        return _remove(src, path, UPSTREAM_KEYS[(AgentConfig, "query_params")])
    query = urlencode({str(k): v if isinstance(v, str) else flow(v) for k, v in params.items()},
                      safe="${}:/")  # fmt: skip
    url = endpoint + ("&" if "?" in endpoint else "?") + query
    edits = (src.put((*path[:-1], "endpoint"), "endpoint", url), src.remove(path))
    return Fix(edits, f"{short(params)} -> agent.endpoint: {flow(url)}")


def _jsonpath(src: YamlText, path: ConfigPath) -> Fix | None:
    value = src.value(path)
    if not isinstance(value, str) or not value.startswith("$"):
        return None
    dotted = re.sub(r"\[(\d+)\]", r".\1", value.lstrip("$").lstrip("."))
    dotted = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", dotted).lstrip(".")
    note = f"{flow(value)} -> {flow(dotted)} (a dotted path: JSONPath is not read)"
    return Fix((src.put(path, "response_path", dotted),), note)


def _null_seed(src: YamlText, path: ConfigPath) -> Fix | None:
    if src.value(path) is not None:
        return None
    return _remove(src, path, NULL_SEED)


def _templates(src: YamlText, path: ConfigPath) -> Fix:
    value, mutations = src.value(path), src.value(path[:-1])
    if "templates" in mutations or not isinstance(value, dict) or not value:
        why = "mutations.templates is set" if "templates" in mutations else "no templates in it"
        return _remove(src, path, why)
    templates = [str(t) for t in value.values()]
    edits = [src.put(path, "templates", templates)]
    note = f"{short(value)} -> mutations.templates: {short(templates)}"
    types = mutations.get("types")
    if isinstance(types, list) and "custom" not in types:
        edits.append(src.append((*path[:-1], "types"), "custom"))
        note += ", and 'custom' added to mutations.types"
    return Fix(tuple(edits), note)


def _dangerous_prompts(src: YamlText, path: ConfigPath) -> Fix:
    value, invariant = src.value(path), src.value(path[:-1])
    kind = invariant.get("type")
    if kind == "refusal_check" and value is True and "expect" not in invariant:
        return Fix((src.put(path, "expect", "refuse"),), "true -> expect: refuse")
    if kind == "refusal_check":
        why = "a refusal_check invariant says what it expects with 'expect' (refuse, or comply)"
    else:
        why = f"a {kind} invariant has no such field (1.x wrote it on every one, read it on none)"
    return _remove(src, path, why)


def _threshold(src: YamlText, path: ConfigPath) -> Fix | None:
    invariant = src.value(path[:-1])
    kind = invariant.get("type")
    if kind == "similarity" or kind not in {t.value for t in InvariantType}:
        return None
    if kind == "behavior_unchanged" and "similarity_threshold" not in invariant:
        return _renamed("similarity_threshold")(src, path)
    why = f"a {kind} invariant has no threshold (1.x wrote its default on every invariant)"
    return _remove(src, path, why)


UPSTREAM_SIMILARITY = 0.75
"""The ``similarity_threshold`` 2.0.0 wrote on every invariant (its default, and today's)."""


def _similarity_threshold(src: YamlText, path: ConfigPath) -> Fix | None:
    """2.0.0's default on an invariant whose type does not read it; another value is the
    user's, left for the loader to report."""
    value, kind = src.value(path), src.value(path[:-1]).get("type")
    known = {t.value: t for t in InvariantType}
    if kind not in known or "similarity_threshold" in INVARIANT_FIELDS[known[kind]][1]:
        return None
    if type(value) not in (int, float) or value != UPSTREAM_SIMILARITY:
        return None
    why = (
        f"a {kind} invariant has no similarity_threshold (2.0.0 wrote its default, "
        f"{UPSTREAM_SIMILARITY:g}, on every invariant)"
    )
    return _remove(src, path, why)


def _langsmith_run(src: YamlText, path: ConfigPath) -> Fix | None:
    if src.value(path) != "langsmith_run":
        return None
    need = "" if "run_id" in src.value(path[:-1]) else " (give it run_id: <the run id>)"
    return Fix((src.put(path, "type", "langsmith"),), f"langsmith_run -> langsmith{need}")


def _error_status(src: YamlText, path: ConfigPath) -> Fix | None:
    value = src.value(path)
    if value is None:
        return _remove(src, path, NULL_STATUS)
    if type(value) is not int or value != UPSTREAM_ERROR_STATUS:
        return None
    why = "2.0.0's 0 meant the tool errored; a status outside 2xx is served as an error"
    return Fix((src.put(path, "status", ERRORED_STATUS),), f"0 -> {ERRORED_STATUS} ({why})")


def _null_latency(src: YamlText, path: ConfigPath) -> Fix | None:
    if src.value(path) is not None:
        return None
    return _remove(src, path, NULL_LATENCY)


MOVES: dict[str, tuple[str, str]] = {"chaos_matrix": ("contract", "chaos_matrix")}
"""A top-level key migrate moves -> where it goes (:func:`_chaos_matrix`)."""


def _chaos_matrix(src: YamlText, path: ConfigPath) -> Fix:
    """2.0.0's top-level matrix, which its docs let stand in for the contract's."""
    value, contract = src.value(path), src.value(()).get("contract")
    if not value:
        return _remove(src, path, "no scenarios in it")
    if not isinstance(contract, dict) or not contract:
        why = "scenarios check a contract's invariants and there is no contract (2.0.0 ran none)"
        return _remove(src, path, why)
    if contract.get("chaos_matrix"):
        return _remove(src, path, "contract.chaos_matrix is set (2.0.0 ran that one)")
    items = value if isinstance(value, list) else []
    names = ", ".join(str(s.get("name")) for s in items if isinstance(s, dict))
    note = "-> contract.chaos_matrix" + (f" (scenarios: {names})" if names else "")
    return Fix(src.move(path, MOVES["chaos_matrix"]), note)


def _flat_scoring(src: YamlText, path: ConfigPath) -> Fix | None:
    scoring = src.value(path)
    flat = [k for k in LEGACY_WEIGHT_KEYS if k in scoring]
    if not flat:
        return None
    at = (*path, flat[0])
    if "weights" in scoring:
        edits = tuple(src.remove((*path, k)) for k in flat)
        return Fix(edits, f"{', '.join(flat)} removed: scoring.weights is set", at)
    weights = {k: scoring[k] for k in flat}
    note = f"{', '.join(flat)} -> scoring.weights: {flow(weights)}"
    return Fix((src.nest(path, flat, "weights"),), note, at)


PROVIDERS = {
    "ollama": "http://localhost:11434",
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "google": "https://generativelanguage.googleapis.com/v1beta/openai",
}
"""The 2.0.0 ``model.provider`` values -> their OpenAI-compatible API (Ollama's: ``/v1`` of
its server; 2.0.0 read ``base_url`` only for ollama and openai)."""

MODEL_KEYS = ("provider", "name", "base_url", "api_key", "temperature")
UPSTREAM_MODEL = "qwen3:8b"
"""The model 1.x and 2.0.0 used when ``model.name`` was not given."""


def _mutation_llm(section: Any) -> tuple[dict[str, Any] | None, str]:
    """``mutations.llm`` for a 2.0.0 ``model`` section and what to say about it, or None and
    why not."""
    hint = UPSTREAM_KEYS[(Config, "model")]
    if not isinstance(section, dict):
        return None, hint
    provider = str(section.get("provider") or "ollama").strip().lower()
    own = section.get("base_url") if provider in ("ollama", "openai") else None
    base = own or PROVIDERS.get(provider) or section.get("base_url")
    if not base:
        return None, f"provider {provider!r} has no OpenAI-compatible API migrate knows; {hint}"
    if provider == "ollama" and not str(base).rstrip("/").endswith("/v1"):
        base = str(base).rstrip("/") + "/v1"
    llm = {"base_url": base, "model": section.get("name") or UPSTREAM_MODEL}
    llm |= {k: section[k] for k in ("api_key", "temperature") if section.get(k) is not None}
    key = llm.get("api_key")
    said = llm | {"api_key": "***"} if key is not None and "${" not in str(key) else llm
    note = f"-> mutations.generator: llm, mutations.llm: {flow(said)} (provider {provider})"
    dropped = [str(k) for k in section if k not in MODEL_KEYS]
    if dropped:
        note += f"; {', '.join(dropped)} dropped (mutations.llm has no such field)"
    return llm, note


def _model(src: YamlText, path: ConfigPath) -> Fix:
    llm, note = _mutation_llm(src.value(path))
    if llm is None:
        return Fix((src.remove(path),), f"removed: {note}")
    root = src.value(())
    mutations = root.get("mutations")
    where = ("mutations",)
    if not isinstance(mutations, dict) or not mutations:
        section = {"generator": "llm", "llm": llm}
        if "mutations" in root:
            return Fix((src.remove(path), src.put(where, "mutations", section)), note)
        note += " (a new mutations section: the mutation phase runs, as it did in 1.x)"
        return Fix((src.put(path, "mutations", section),), note)
    if "llm" in mutations:
        return Fix((src.remove(path),), "removed: mutations.llm is set")
    edits = [src.remove(path)]
    entries: dict[str, Any] = {"llm": llm}
    if "generator" not in mutations:
        entries = {"generator": "llm", **entries}
    elif mutations["generator"] != "llm":
        edits.append(src.put((*where, "generator"), "generator", "llm"))
    return Fix((*edits, src.insert(where, entries)), note)


RULES: dict[tuple[type[BaseModel], str], Rule] = {
    (Config, "version"): _version,
    (Config, "model"): _model,
    (Config, "chaos_matrix"): _chaos_matrix,
    (AgentConfig, "query_params"): _query_params,
    (AgentConfig, "parse_structured_input"): _removed(
        UPSTREAM_KEYS[(AgentConfig, "parse_structured_input")]
    ),
    (AgentConfig, "response_path"): _jsonpath,
    (Mutations, "custom_templates"): _templates,
    (Invariant, "dangerous_prompts"): _dangerous_prompts,
    (Invariant, "threshold"): _threshold,
    (ContractInvariant, "dangerous_prompts"): _dangerous_prompts,
    (ContractInvariant, "threshold"): _threshold,
    (Invariant, "similarity_threshold"): _similarity_threshold,
    (ContractInvariant, "similarity_threshold"): _similarity_threshold,
    (Output, "format"): _formats,
    (Output, "path"): _renamed("dir"),
    (Output, "filename_template"): _removed("report file names are fixed"),
    (Advanced, "retries"): _removed(UPSTREAM_KEYS[(Advanced, "retries")]),
    (Advanced, "seed"): _null_seed,
    (LlmFault, "severity"): _removed(UPSTREAM_KEYS[(LlmFault, "severity")]),
    (LlmFault, "direction"): _removed(UPSTREAM_KEYS[(LlmFault, "direction")]),
    (LlmFault, "factor"): _removed(UPSTREAM_KEYS[(LlmFault, "factor")]),
    (ContextAttack, "inject_at"): _removed(UPSTREAM_KEYS[(ContextAttack, "inject_at")]),
    (Session, "captured_at"): _removed("when the session was recorded is not read"),
    (LangsmithSource, "type"): _langsmith_run,
    (LangsmithSource, "filter"): _removed(UPSTREAM_KEYS[(LangsmithSource, "filter")]),
    (LangsmithSource, "auto_import"): _removed("LangSmith sources are imported on every run"),
    (ToolResponse, "status"): _error_status,
    (ToolResponse, "latency_ms"): _null_latency,
}
"""(model, key) -> the rule for that key wherever the model is (:data:`CONFIG_PLACES`)."""

SECTION_RULES: dict[type[BaseModel], Rule] = {Scoring: _flat_scoring}
"""Rules for a whole section (called with the section's path)."""

ANY = -1
"""In a place: every item of a list."""
EACH = -2
"""In a place: every item of a list, or every value of a mapping (``context_attacks``' dict
form)."""

Place = tuple[tuple[str | int, ...], type[BaseModel]]
"""Where a model's mappings are in a file (:data:`ANY`, :data:`EACH`), and the model."""


def _fault_places(*scenario: str | int) -> tuple[Place, ...]:
    """Where the faults of a scenario (or of the chaos section) at ``scenario`` are."""
    return (
        ((*scenario, "llm_faults", ANY), LlmFault),
        ((*scenario, "context_attacks", EACH), ContextAttack),
    )


CONFIG_PLACES: tuple[Place, ...] = (
    # first: the faults of 2.0.0's top-level matrix are fixed where they are before it moves
    *_fault_places("chaos_matrix", ANY),
    ((), Config),
    (("agent",), AgentConfig),
    (("mutations",), Mutations),
    (("invariants", ANY), Invariant),
    (("contract", "invariants", ANY), ContractInvariant),
    *_fault_places("chaos"),
    *_fault_places("contract", "chaos_matrix", ANY),
    (("replays", "sessions", ANY), Session),
    (("replays", "sessions", ANY, "tool_responses", ANY), ToolResponse),
    (("replays", "sources", ANY), LangsmithSource),
    (("scoring",), Scoring),
    (("output",), Output),
    (("advanced",), Advanced),
)
"""Where in a config each model's mappings are."""

SESSION_PLACES: tuple[Place, ...] = (
    ((), Session),
    (("tool_responses", ANY), ToolResponse),
    (("sessions", ANY), Session),
    (("sessions", ANY, "tool_responses", ANY), ToolResponse),
)
"""Where a session file's sessions are (one at the top, or a ``sessions:`` list)."""


@dataclass(frozen=True)
class FileKind:
    places: tuple[Place, ...]
    expected: str
    """What the top of such a file is (for the error when it is not)."""


CONFIG = FileKind(CONFIG_PLACES, "a mapping of sections (agent:, contract:, ...)")
SESSIONS = FileKind(SESSION_PLACES, SESSION_FILE)


def _mappings(data: Any, place: tuple[str | int, ...], at: ConfigPath = ()) -> Iterator[ConfigPath]:
    if not place:
        if isinstance(data, dict):
            yield at
        return
    head, rest = place[0], place[1:]
    if head in (ANY, EACH) and isinstance(data, list):
        for i, item in enumerate(data):
            yield from _mappings(item, rest, (*at, i))
    elif head == EACH and isinstance(data, dict):
        for key, value in data.items():
            yield from _mappings(value, rest, (*at, key))
    elif isinstance(data, dict) and head in data:
        yield from _mappings(data[head], rest, (*at, head))


def _fixes(src: YamlText, places: tuple[Place, ...]) -> Iterator[tuple[ConfigPath, Fix]]:
    for place, model in places:
        for mapping in _mappings(src.doc.data, place):
            for key in list(src.value(mapping)):
                rule = RULES.get((model, key)) if isinstance(key, str) else None
                fix = rule(src, (*mapping, key)) if rule is not None else None
                if fix is not None:
                    yield (*mapping, key), fix
            section = SECTION_RULES.get(model)
            fix = section(src, mapping) if section is not None else None
            if fix is not None:
                yield mapping, fix


# --------------------------------------------------------------------------- files


MAX_ROUNDS = 50

EMPTIED = "removed: nothing is left in it once what it held is removed"


def _emptied(before: Any, after: Any, at: ConfigPath = ()) -> Iterator[ConfigPath]:
    """The mappings under a key of ``after`` that hold nothing, where ``before`` (the file as
    it was) held something: the rules removed all it held, and an empty section is refused.
    One the file had empty is the user's, left as it is."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return
    for key, value in after.items():
        was = before.get(key)
        if isinstance(was, dict) and was and (value is None or value == {}):
            yield (*at, key)
        else:
            yield from _emptied(was, value, (*at, key))


def migrate_text(text: str, name: str, kind: FileKind = CONFIG) -> tuple[str, list[Change]]:
    """``text`` in today's form and the changes, in file order (their lines are those of
    ``text``); ConfigError when ``text`` is not a YAML mapping."""
    rounds: list[list[Edit]] = []
    changes: list[Change] = []
    original: Any = None
    for _ in range(MAX_ROUNDS):
        src = YamlText(text, name, kind.expected)
        original = src.doc.data if original is None else original
        try:
            found = list(_fixes(src, kind.places))
        except FlowCollection as inside:
            if not inside.path:  # JSON, or a whole document in flow style: left as it is
                changes.append(Change(name, 1, "not rewritten: the file is in flow style (JSON)"))
                break
            found = [(inside.path, Fix((src.blockify(inside.path),), "written in block style"))]
        if not found:  # the rules are done: a section they emptied goes too
            emptied = _emptied(original, src.doc.data)
            found = [(path, Fix((src.remove(path, comments=True),), EMPTIED)) for path in emptied]
        accepted: list[Edit] = []
        for path, fix in found:
            if any(e.clashes(a) for e in fix.edits for a in accepted):
                continue  # lines another fix changes: it is found again in the next round
            accepted += fix.edits
            line = line_before(src.key_at(fix.at or path)[0], rounds) + 1
            changes.append(Change(name, line, f"{format_path(path)}: {fix.note}"))
        if not accepted:
            break
        text = src.text(accepted)
        rounds.append(accepted)
    else:
        raise AssertionError(f"{name}: the rules did not settle in {MAX_ROUNDS} rounds")
    return text, sorted(changes, key=lambda c: c.line)


def read_text(path: Path) -> str:
    """The text of ``path``, or ConfigError saying why it cannot be read."""
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            [Problem(shown(path), 1, 1, "", f"cannot read the file ({reason})")]
        ) from None
    except UnicodeDecodeError:
        raise ConfigError([Problem(shown(path), 1, 1, "", "the file is not UTF-8 text")]) from None


def migrate_file(path: Path, kind: FileKind = CONFIG) -> Migrated:
    before = read_text(path)
    bom = "\ufeff" if before.startswith("\ufeff") else ""
    after, changes = migrate_text(before.removeprefix(bom), shown(path), kind)
    return Migrated(path, before, bom + after, tuple(changes))


def migrate_project(config: Path) -> list[Migrated]:
    """The config at ``config`` and the replay session files it names (relative to it),
    migrated, not written. A session file that is not YAML is left for the loader to report."""
    out = [migrate_file(config)]
    seen = {config.resolve()}
    for pattern in _session_files(YamlText(out[0].after, "", CONFIG.expected).doc.data):
        for path in session_paths(pattern, config.parent):
            if path.resolve() not in seen:
                seen.add(path.resolve())
                try:
                    out.append(migrate_file(path, SESSIONS))
                except ConfigError:
                    continue
    return out


def _session_files(data: Any) -> list[str]:
    replays = data.get("replays") if isinstance(data, dict) else None
    sessions = replays.get("sessions") if isinstance(replays, dict) else None
    if not isinstance(sessions, list):
        return []
    return [s["file"] for s in sessions if isinstance(s, dict) and isinstance(s.get("file"), str)]
