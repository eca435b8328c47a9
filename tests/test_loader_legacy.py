"""Earlier config formats: 1.0 configs and the flat scoring form warn; upstream-only keys refuse;
each message names `flakestorm migrate`. A 2.0.0 session's `source` is accepted as is."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.config_text import AGENT, load, problems

from flakestorm.config import Session
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config, load_config_text
from flakestorm.loader.legacy import LEGACY_HINTS, UNMIGRATED, UPSTREAM_KEYS, UPSTREAM_VALUES

MIGRATE = "`flakestorm migrate` rewrites it"


def test_version_1_warns() -> None:
    loaded = load('version: "1.0"\n' + AGENT)
    assert len(loaded.warnings) == 1
    assert str(loaded.warnings[0]).startswith("flakestorm.yaml:1:10: version: version 1.0")
    assert str(loaded.warnings[0]).endswith(f'(write version: "2.0"); {MIGRATE}')


def test_flat_scoring_warns_and_maps_to_weights() -> None:
    text = AGENT + "scoring:\n  mutation: 0.1\n  chaos: 0.4\n  contract: 0.4\n  replay: 0.1\n"
    loaded = load(text)
    assert loaded.config.scoring.weights.as_dict() == {
        "mutation": 0.1,
        "chaos": 0.4,
        "contract": 0.4,
        "replay": 0.1,
    }
    assert [str(w) for w in loaded.warnings] == [
        "flakestorm.yaml:4:3: scoring: the flat scoring form is deprecated; write scoring: "
        "weights: {mutation: 0.1, chaos: 0.4, contract: 0.4, replay: 0.1}; "
        f"{MIGRATE}"
    ]


def test_flat_scoring_value_errors_point_at_the_flat_key() -> None:
    text = AGENT + "scoring:\n  mutation: lots\n"
    assert problems(text) == [
        "flakestorm.yaml:4:13: scoring.mutation: expected a number, got a string 'lots'"
    ]


def test_legacy_form_is_not_a_user_key() -> None:
    found = problems(AGENT + "scoring:\n  legacy_form: true\n")
    assert len(found) == 1 and "unknown key 'legacy_form'" in found[0]


def test_upstream_key_says_what_to_write_instead() -> None:
    assert problems(AGENT + "  query_params: {a: b}\n") == [
        "flakestorm.yaml:3:3: agent.query_params: unknown key 'query_params': "
        f"put query parameters in agent.endpoint itself; {MIGRATE}"
    ]


def test_both_scoring_forms_name_migrate() -> None:
    found = problems(AGENT + "scoring:\n  mutation: 0.5\n  weights: {}\n")
    assert found == [
        "flakestorm.yaml:4:3: scoring.mutation: both the flat form (mutation) and 'weights' "
        f"are set; keep only 'weights:' (mutation, chaos, contract, replay); {MIGRATE}"
    ]


def test_every_upstream_key_and_value_names_migrate() -> None:
    assert set(LEGACY_HINTS.keys) == set(UPSTREAM_KEYS)
    assert all(hint.endswith(MIGRATE) for hint in LEGACY_HINTS.keys.values())
    for key, message in LEGACY_HINTS.values.items():
        assert message.startswith(UPSTREAM_VALUES[key])
        says = "not this" if key in UNMIGRATED else MIGRATE
        assert "`flakestorm migrate`" in message and message.endswith(says)


def test_a_value_migrate_cannot_rewrite_says_so() -> None:
    assert problems("agent:\n  type: langchain\n  endpoint: app:chain\n") == [
        "flakestorm.yaml:2:9: agent.type: 'langchain' is not supported: use type: python with "
        "endpoint 'module:attr' of a function that invokes the chain; `flakestorm migrate` "
        "rewrites the rest of a 1.x / 2.0.0 config, not this"
    ]


SESSIONS = (
    AGENT
    + """\
golden_prompts: [hi]
contract:
  name: c
  invariants: [{id: a, type: completes}]
  chaos_matrix: [{name: calm}]
replays:
  sessions:
    - id: inline
      input: hi
      source: manual
"""
)


def test_a_sessions_source_is_accepted_as_is(tmp_path: Path) -> None:
    loaded = load(SESSIONS)
    assert not loaded.warnings
    session = loaded.config.replays.sessions[0] if loaded.config.replays else None
    assert isinstance(session, Session) and session.source == "manual"
    (tmp_path / "s.yaml").write_text(
        "id: from-file\ninput: hi\nsource: manual\ncontract: c\n", encoding="utf-8"
    )
    config = tmp_path / "flakestorm.yaml"
    config.write_text(SESSIONS + "    - file: s.yaml\n", encoding="utf-8")
    assert load_config(config, env={}).config.replays is not None


def test_a_sessions_source_must_be_text() -> None:
    found = problems(SESSIONS.replace("source: manual", "source: [manual]"))
    assert found == [
        "flakestorm.yaml:12:15: replays.sessions[0].source: expected a string, got a list"
    ]


def test_a_sessions_captured_at_names_migrate() -> None:
    found = problems(SESSIONS + "      captured_at: '2025-06-01'\n")
    assert found == [
        "flakestorm.yaml:13:7: replays.sessions[0].captured_at: unknown key 'captured_at': "
        f"remove 'captured_at' (when the session was recorded is not read); {MIGRATE}"
    ]


def test_text_validates_without_the_real_environment() -> None:
    assert load_config_text(AGENT, env={}).config.agent.endpoint.startswith("http")


MATRIX = (
    AGENT + "golden_prompts: [hi]\ncontract:\n  name: c\n  invariants: [{id: a, type: completes}]\n"
)


def test_a_top_level_chaos_matrix_names_migrate() -> None:
    found = problems(MATRIX + "  chaos_matrix: [{name: calm}]\nchaos_matrix: [{name: x}]\n")
    assert found == [
        "flakestorm.yaml:8:1: chaos_matrix: unknown key 'chaos_matrix': the chaos matrix is the "
        f"contract's: write its scenarios under contract.chaos_matrix; {MIGRATE}"
    ]


def test_a_top_level_chaos_matrix_is_the_contracts_missing_one_said_once() -> None:
    # 2.0.0's shape: the contract without a matrix, its scenarios at the top
    found = problems(MATRIX + "chaos_matrix: [{name: x}]\n")
    assert found == [
        "flakestorm.yaml:7:1: chaos_matrix: unknown key 'chaos_matrix': the chaos matrix is the "
        f"contract's: write its scenarios under contract.chaos_matrix; {MIGRATE}"
    ]
    # without it, the contract's missing matrix is said
    assert problems(MATRIX) == [
        "flakestorm.yaml:5:3: contract: missing required field 'chaos_matrix'"
    ]


def test_upstream_fault_keys_name_migrate() -> None:
    text = (
        MATRIX
        + "  chaos_matrix:\n    - name: drift\n      llm_faults:\n"
        + "        - {mode: response_drift, drift_type: verbosity_shift, severity: subtle,"
        + " direction: expand, factor: 2}\n"
        + "      context_attacks:\n        memory_poisoning: {payload: p, inject_at: step}\n"
    )
    found = problems(text)
    where = "flakestorm.yaml:{}: contract.chaos_matrix[0].{}"
    assert [f.split(": unknown key ")[0] for f in found] == [
        where.format("10:63", "llm_faults[0].severity"),
        where.format("10:81", "llm_faults[0].direction"),
        where.format("10:100", "llm_faults[0].factor"),
        where.format("12:40", "context_attacks.memory_poisoning.inject_at"),
    ]
    assert all(f.endswith(MIGRATE) for f in found)
    assert "'severity': how far a response_drift changes a reply is not set" in found[0]
    assert "'inject_at': where an attack acts follows from its type" in found[3]


def test_a_tool_response_status_of_0_names_migrate_once() -> None:
    text = SESSIONS + "      tool_responses:\n        - {tool: kb, status: 0}\n"
    text += "        - {tool: kb, status: 42}\n"
    assert problems(text) == [
        "flakestorm.yaml:14:30: replays.sessions[0].tool_responses[0].status: 0 is how "
        "flakestorm 2.0.0 recorded a tool call that errored: write status: 500 (a status "
        f"outside 2xx is served as an error); {MIGRATE}",
        "flakestorm.yaml:15:30: replays.sessions[0].tool_responses[1].status: must be at least "
        "100, got 42",
    ]


def session_file_problems(tmp_path: Path, session: str) -> list[str]:
    """``FILE:LINE: path: message`` of each problem of a config whose one replay session is
    the file ``incident.yaml`` holding ``session``."""
    (tmp_path / "incident.yaml").write_text(session, encoding="utf-8")
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        SESSIONS.split("replays:")[0] + "replays:\n  sessions:\n    - file: incident.yaml\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    return [f"{Path(p.file).name}:{p.line}: {p.path}: {p.message}" for p in caught.value.problems]


def test_a_session_files_legacy_keys_name_migrate_as_the_configs_do(tmp_path: Path) -> None:
    """A session file written for flakestorm 2.0.0 (`replays.sessions: [{file: ...}]`) is
    worded like the config: each legacy key's error names `flakestorm migrate`."""
    shown = session_file_problems(
        tmp_path,
        "id: incident\ninput: hi\ncaptured_at: '2025-06-01'\n"
        "tool_responses:\n  - {tool: kb, status: 0}\n",
    )
    assert shown == [
        "incident.yaml:3: captured_at: unknown key 'captured_at': remove 'captured_at' (when "
        f"the session was recorded is not read); {MIGRATE}",
        "incident.yaml:5: tool_responses[0].status: 0 is how flakestorm 2.0.0 recorded a tool "
        f"call that errored: write status: 500 (a status outside 2xx is served as an error); "
        f"{MIGRATE}",
    ]


def test_a_null_written_by_an_earlier_format_names_migrate(tmp_path: Path) -> None:
    """2.0.0 recorded `status: null` / `latency_ms: null` in sessions and 1.x wrote
    `seed: null`: the loader says what that null meant and that migrate removes it, in a
    session file as in the config."""
    shown = session_file_problems(
        tmp_path,
        "id: incident\ninput: hi\ntool_responses:\n"
        "  - {tool: kb, response: ok, status: null, latency_ms: null}\n",
    )
    assert shown == [
        "incident.yaml:4: tool_responses[0].status: null is not read here: remove the key "
        f"(2.0.0 wrote null when it recorded no status; 200 is served); {MIGRATE}",
        "incident.yaml:4: tool_responses[0].latency_ms: null is not read here: remove the "
        "key (2.0.0 wrote null when it recorded no latency; the response is served at once); "
        f"{MIGRATE}",
    ]
    assert problems(AGENT + "advanced: {seed: null}\n") == [
        "flakestorm.yaml:3:18: advanced.seed: null is not read here: remove the key (runs use "
        f"a fixed default seed; 1.x drew a new one for each run); {MIGRATE}"
    ]
    # a null where no earlier format wrote one is worded as before
    assert problems(AGENT + "advanced: {concurrency: null}\n") == [
        "flakestorm.yaml:3:25: advanced.concurrency: expected an integer, got nothing (null)"
    ]
