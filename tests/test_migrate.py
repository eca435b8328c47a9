"""``flakestorm migrate``: 1.x / 2.0.0 configs (tests/configs/legacy) rewritten in today's
form, comments kept, each change listed with its line; what is already current left byte for
byte; bad input refused without a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flakestorm.authoring.migrate import (
    CONFIG_PLACES,
    RULES,
    SESSIONS,
    Fix,
    migrate_file,
    migrate_text,
)
from flakestorm.authoring.yaml_text import YamlText
from flakestorm.cli import main
from flakestorm.config import Advanced
from flakestorm.loader import load_config_text
from flakestorm.loader.legacy import (
    UNMIGRATED,
    UPSTREAM_KEYS,
    UPSTREAM_NUMBERS,
    UPSTREAM_VALUES,
)

MIGRATES = "; `flakestorm migrate` rewrites it"
LEGACY = Path(__file__).parent / "configs" / "legacy"
UPSTREAM = Path(__file__).parent / "configs" / "upstream"
RELEASED = Path(__file__).parent / "configs" / "v2_0_0"
"""flakestorm 2.0.0's own files: its `init` output and its example configs (README there)."""
ENV = {"OPENAI_API_KEY": "sk-test", "FLAKESTORM_TEST_TOKEN": "t0ken"}


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    return CliRunner()


def project(tmp_path: Path, name: str, source: Path = LEGACY) -> Path:
    """``name`` copied (with its replays/) to ``tmp_path`` as flakestorm.yaml."""
    shutil.copy(source / name, tmp_path / "flakestorm.yaml")
    if (source / "replays").is_dir():
        shutil.copytree(source / "replays", tmp_path / "replays")
    return tmp_path / "flakestorm.yaml"


def migrate(runner: CliRunner, config: Path, *args: str) -> Result:
    return runner.invoke(main, ["migrate", "-c", str(config), *args])


def validate(runner: CliRunner, config: Path) -> Result:
    return runner.invoke(main, ["validate", "-c", str(config)])


# --------------------------------------------------------------------------- the fixtures


def test_the_2_0_0_example_migrates_and_validates(runner: CliRunner, tmp_path: Path) -> None:
    config = project(tmp_path, "v2_research_agent.yaml")
    before = validate(runner, config)
    assert before.exit_code == 2
    assert (
        f"{config}:128:3: advanced.retries: unknown key 'retries': invocations are not retried; "
        "for a flaky agent use advanced.repeat and advanced.min_pass; `flakestorm migrate` "
        "rewrites it"
    ) in before.stderr.splitlines()
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    name = str(config)
    for line in (
        f"{name}:21: model: -> mutations.generator: llm, mutations.llm: "
        '{base_url: "http://localhost:11434/v1", model: "gemma3:1b"} (provider ollama)',
        f"{name}:114: scoring: mutation, chaos, contract, replay -> scoring.weights: "
        "{mutation: 0.2, chaos: 0.35, contract: 0.35, replay: 0.1}",
        f"{name}:123: output.format: html -> output.formats: [html]",
        f"{name}:124: output.path: ./reports -> output.dir: ./reports",
        f"{name}:128: advanced.retries: 2 removed: invocations are not retried; for a flaky "
        "agent use advanced.repeat and advanced.min_pass",
        f"rewrote {name} (5 changes)",
        f"{tmp_path / 'replays' / 'incident_001.yaml'}: nothing to change",
        f"ok: {name} is valid",
    ):
        assert line in result.stdout.splitlines()
    text = config.read_text(encoding="utf-8")
    assert "# The model that writes the mutations\n" in text  # comments survive
    assert "  count: 5\n  types:\n    - paraphrase\n" in text
    assert "  generator: llm\n  llm:\n    base_url: " in text
    assert "  retries: 2   # retry a failed request twice" not in text
    assert validate(runner, config).exit_code == 0
    # the session's `source: manual` is accepted as is
    session = tmp_path / "replays" / "incident_001.yaml"
    assert session.read_bytes() == (LEGACY / "replays" / "incident_001.yaml").read_bytes()


def test_the_1_0_root_config_migrates_and_validates(runner: CliRunner, tmp_path: Path) -> None:
    config = project(tmp_path, "v1_root.yaml")
    before = validate(runner, config)
    assert before.exit_code == 2 and "error: 8 problems" in before.stderr
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    listed = [line.removeprefix(f"{config}:") for line in result.stdout.splitlines()]
    assert listed == [
        '2: version: "1.0" -> "2.0"',
        "8: model: -> mutations.generator: llm, mutations.llm: {base_url: "
        '"http://localhost:11434/v1", model: "qwen3:8b", temperature: 0.8} (provider ollama)',
        "32: invariants[0].threshold: 0.8 removed: a latency invariant has no threshold (1.x "
        "wrote its default on every invariant)",
        "33: invariants[0].dangerous_prompts: true removed: a latency invariant has no such "
        "field (1.x wrote it on every one, read it on none)",
        "35: invariants[1].threshold: 0.8 removed: a valid_json invariant has no threshold "
        "(1.x wrote its default on every invariant)",
        "36: invariants[1].dangerous_prompts: true removed: a valid_json invariant has no such "
        "field (1.x wrote it on every one, read it on none)",
        "38: output.format: html -> output.formats: [html]",
        "39: output.path: ./reports -> output.dir: ./reports",
        "42: advanced.retries: 2 removed: invocations are not retried; for a flaky agent use "
        "advanced.repeat and advanced.min_pass",
        f"rewrote {config} (9 changes)",
        f"ok: {config} is valid",
    ]
    text = config.read_text(encoding="utf-8")
    assert "# the prompts every mutation starts from\n" in text
    assert text.startswith("# flakestorm 1.0 - the project's own config")
    assert "- type: latency\n  max_ms: 2000\n- type: valid_json\noutput:" in text
    assert "    noise: 0.8\n    tone_shift: 0.9\n    prompt_injection: 1.5\n  generator: llm\n" in (
        text
    )
    assert validate(runner, config).exit_code == 0
    loaded = load_config_text(text, base_dir=tmp_path)
    assert loaded.config.version == "2.0" and not loaded.warnings
    llm = loaded.config.mutations.llm if loaded.config.mutations else None
    assert llm is not None and llm.temperature == 0.8 and llm.model == "qwen3:8b"


DRIFT = (
    "how far a response_drift changes a reply is not set ('drift_type' says how); "
    "severity is an invariant's field"
)
INJECT_AT = (
    "where an attack acts follows from its type: memory_poisoning changes the agent's input "
    "('strategy': prepend, append or replace), the others tool results or LLM requests"
)
ERRORED = "0 -> 500 (2.0.0's 0 meant the tool errored; a status outside 2xx is served as an error)"


def test_the_2_0_0_root_matrix_config_migrates_and_validates(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = project(tmp_path, "v2_root_matrix.yaml")
    before = validate(runner, config)
    assert before.exit_code == 2
    refused = [line.removeprefix(f"{config}:") for line in before.stderr.splitlines()]
    for where in (
        "27:7: chaos.llm_faults[0].severity: unknown key 'severity'",
        "28:7: chaos.llm_faults[0].direction: unknown key 'direction'",
        "29:7: chaos.llm_faults[0].factor: unknown key 'factor'",
        "35:7: chaos.context_attacks.memory_poisoning.inject_at: unknown key 'inject_at'",
        "52:1: chaos_matrix: unknown key 'chaos_matrix'",
        "78:19: replays.sessions[1].tool_responses[0].status: 0 is how flakestorm 2.0.0",
    ):
        assert any(r.startswith(where) and r.endswith(MIGRATES) for r in refused), where
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    session = tmp_path / "replays" / "incident_002.yaml"
    listed = [line.removeprefix(f"{config}:") for line in result.stdout.splitlines()]
    assert listed == [
        f"27: chaos.llm_faults[0].severity: moderate removed: {DRIFT}",
        "28: chaos.llm_faults[0].direction: compress removed: verbosity_shift makes a reply "
        "much shorter or much longer, drawn with the run's seed",
        "29: chaos.llm_faults[0].factor: 3.0 removed: how much verbosity_shift changes a reply "
        "is not set (much shorter or much longer, drawn with the run's seed)",
        "35: chaos.context_attacks.memory_poisoning.inject_at: retrieval_step removed: "
        + INJECT_AT,
        "52: chaos_matrix: -> contract.chaos_matrix (scenarios: calm, drifting-model, "
        "poisoned-memory)",
        f"58: chaos_matrix[1].llm_faults[0].severity: significant removed: {DRIFT}",
        "62: chaos_matrix[2].context_attacks[0].inject_at: before_final_response removed: "
        + INJECT_AT,
        f"78: replays.sessions[1].tool_responses[0].status: {ERRORED}",
        f"{session}:13: tool_responses[1].status: {ERRORED}",
        f"rewrote {config} (8 changes)",
        f"rewrote {session} (1 change)",
        f"ok: {config} is valid",
    ]
    text = config.read_text(encoding="utf-8")
    assert (
        "      severity: critical\n"
        "  # The scenarios the contract runs under\n"
        "  chaos_matrix:\n"
        '    - name: "calm"\n'
        '    - name: "drifting-model"\n'
        "      llm_faults:\n"
        "        - mode: response_drift\n"
        "          drift_type: tone_shift\n"
        '    - name: "poisoned-memory"\n'
    ) in text
    assert "\n\n# ------" in text and "\n\n\n" not in text  # no blank line left doubled
    assert "      strategy: prepend\n\n# ----" in text
    assert "          status: 500   # the tool errored\n" in text
    assert "    status: 500   # the connection was refused\n" in session.read_text(encoding="utf-8")
    assert validate(runner, config).exit_code == 0
    loaded = load_config_text(text, base_dir=tmp_path)
    contract = loaded.config.contract
    assert contract is not None and len(contract.chaos_matrix) == 3


@pytest.mark.parametrize("config", sorted(UPSTREAM.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_documented_upstream_example_validates_once_migrated(
    runner: CliRunner, tmp_path: Path, config: Path
) -> None:
    migrated = project(tmp_path, config.name, UPSTREAM)
    result = migrate(runner, migrated)
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.stderr  # not even the 1.0 or flat-scoring warnings


# --------------------------------------------------------------------------- 2.0.0's own files

UNGENERATED = (
    "encoding_attacks", "context_manipulation", "length_extremes", "custom", "multi_turn_attack",
    "advanced_jailbreak", "semantic_similarity_attack", "format_poisoning", "language_mixing",
    "token_manipulation", "temporal_attack", "http_header_injection", "payload_size_attack",
    "content_type_confusion", "query_parameter_poisoning", "request_method_attack",
    "protocol_level_attack", "resource_exhaustion", "concurrent_request_pattern",
    "timeout_manipulation",
)  # fmt: skip
"""The 20 types 2.0.0's init gives a weight (lines 23-42 of init.yaml) without generating
them (its types: paraphrase, noise, tone_shift, prompt_injection)."""


def test_2_0_0_init_output_migrates_to_a_config_validate_accepts(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = project(tmp_path, "init.yaml", RELEASED)
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    listed = [line.removeprefix(f"{config}:") for line in result.stdout.splitlines()]
    latency, valid_json = ("a latency invariant", "a valid_json invariant")
    default = "(2.0.0 wrote its default, 0.75, on every invariant)"
    assert listed == [
        '4: version: "1.0" -> "2.0"',
        "9: agent.query_params: {} removed: put query parameters in agent.endpoint itself",
        "10: agent.parse_structured_input: true removed: structured golden prompts are not "
        "parsed; request_template substitutes {prompt} only",
        "13: model: -> mutations.generator: llm, mutations.llm: {base_url: "
        '"http://localhost:11434/v1", model: "qwen3:8b", temperature: 0.8} (provider ollama)',
        "50: mutations.custom_templates: {} removed: no templates in it",
        f"58: invariants[0].threshold: 0.8 removed: {latency} has no threshold (1.x wrote its "
        "default on every invariant)",
        f"59: invariants[0].dangerous_prompts: true removed: {latency} has no such field (1.x "
        "wrote it on every one, read it on none)",
        f"60: invariants[0].similarity_threshold: 0.75 removed: {latency} has no "
        f"similarity_threshold {default}",
        f"63: invariants[1].threshold: 0.8 removed: {valid_json} has no threshold (1.x wrote "
        "its default on every invariant)",
        f"64: invariants[1].dangerous_prompts: true removed: {valid_json} has no such field "
        "(1.x wrote it on every one, read it on none)",
        f"65: invariants[1].similarity_threshold: 0.75 removed: {valid_json} has no "
        f"similarity_threshold {default}",
        "67: output.format: html -> output.formats: [html]",
        "68: output.path: ./reports -> output.dir: ./reports",
        "71: advanced.retries: 2 removed: invocations are not retried; for a flaky agent use "
        "advanced.repeat and advanced.min_pass",
        f"rewrote {config} (14 changes)",
        f"ok: {config} is valid",
    ]
    text = config.read_text(encoding="utf-8")
    assert "similarity_threshold" not in text
    assert text.endswith(
        "invariants:\n- type: latency\n  negate: false\n  max_ms: 2000\n"
        "- type: valid_json\n  negate: false\n"
        "output:\n  formats: [html]\n  dir: ./reports\nadvanced:\n  concurrency: 10\n"
    )
    checked = validate(runner, config)
    assert checked.exit_code == 0, checked.output
    # what is left to say is 2.0.0's own doing: a weight for every type, 20 not generated
    weights = list(range(23, 43))
    assert checked.stderr.splitlines() == [
        f"warning: {config}:{line}:5: mutations.weights.{kind}: '{kind}' has a weight but is "
        "not generated (not in mutations.types)"
        for line, kind in zip(weights, UNGENERATED, strict=True)
    ]


@pytest.mark.parametrize(
    "name",
    [
        "root",
        "example",
        "broken_agent",
        "keywords_extractor_agent",
        "v2_research_agent",
    ],
)
def test_2_0_0_example_configs_migrate_to_configs_validate_accepts(
    runner: CliRunner, tmp_path: Path, name: str
) -> None:
    config = project(tmp_path, f"{name}.yaml", RELEASED)
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert f"rewrote {config} (" in result.stdout
    checked = validate(runner, config)
    assert checked.exit_code == 0, checked.output
    assert checked.stderr == ""  # not a warning


def test_2_0_0_langchain_example_is_left_with_only_what_needs_its_code(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = project(tmp_path, "langchain_agent.yaml", RELEASED)
    result = migrate(runner, config)
    assert result.exit_code == 2
    assert f"rewrote {config} (7 changes)" in result.stdout  # written: the rest is migrated
    checked = validate(runner, config)
    assert checked.exit_code == 2
    assert checked.stderr.splitlines() == [
        f"{config}:17:9: agent.type: 'langchain' is not supported: use type: python with "
        "endpoint 'module:attr' of a function that invokes the chain; `flakestorm migrate` "
        "rewrites the rest of a 1.x / 2.0.0 config, not this",
        f"error: 1 problem in {config}",
    ]


# --------------------------------------------------------------------------- what migrate makes


def test_a_section_migrate_empties_goes_with_what_it_held(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        "agent:\n  endpoint: http://localhost:8000/invoke\ngolden_prompts: [hi]\n"
        "# how the runner behaves\nadvanced:\n  retries: 2   # twice\n"
        "output:\n  filename_template: x.html\n",
        encoding="utf-8",
    )
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    assert config.read_text(encoding="utf-8") == (
        "agent:\n  endpoint: http://localhost:8000/invoke\ngolden_prompts: [hi]\n"
    )
    listed = [line.removeprefix(f"{config}:") for line in result.stdout.splitlines()]
    assert listed == [
        "5: advanced: removed: nothing is left in it once what it held is removed",
        "6: advanced.retries: 2 removed: invocations are not retried; for a flaky agent use "
        "advanced.repeat and advanced.min_pass",
        "7: output: removed: nothing is left in it once what it held is removed",
        "8: output.filename_template: x.html removed: report file names are fixed",
        f"rewrote {config} (4 changes)",
        f"ok: {config} is valid",
    ]
    assert validate(runner, config).exit_code == 0


def test_a_section_the_file_had_empty_is_left_as_it_is() -> None:
    text = "agent:\n  endpoint: http://h/x\nadvanced: {}\noutput:\n  path: out\n"
    after, _ = migrate_text(text, "f.yaml")
    assert after == "agent:\n  endpoint: http://h/x\nadvanced: {}\noutput:\n  dir: out\n"


def test_a_similarity_threshold_of_its_own_is_the_users(runner: CliRunner, tmp_path: Path) -> None:
    """Only 2.0.0's default on a type that reads none is migrate's to remove; another value
    was written by someone, and the loader says what to do with it."""
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        "agent:\n  endpoint: http://localhost:8000/invoke\ngolden_prompts: [hi]\n"
        "invariants:\n"
        "  - {type: latency, max_ms: 100, similarity_threshold: 0.9}\n"
        "  - {type: behavior_unchanged, similarity_threshold: 0.75}\n"
        "  - {type: similarity, expected: hi, similarity_threshold: 0.75}\n"
        "output:\n  path: out\n",
        encoding="utf-8",
    )
    result = migrate(runner, config)
    assert result.exit_code == 2
    text = config.read_text(encoding="utf-8")  # written: the problem left is not migrate's
    assert text == (
        "agent:\n  endpoint: http://localhost:8000/invoke\ngolden_prompts: [hi]\n"
        "invariants:\n"
        "  - {type: latency, max_ms: 100, similarity_threshold: 0.9}\n"
        "  - {type: behavior_unchanged, similarity_threshold: 0.75}\n"
        "  - type: similarity\n    expected: hi\n"
        "output:\n  dir: out\n"
    )
    assert (
        f"{config}:7: invariants[2].similarity_threshold: 0.75 removed: a similarity invariant "
        "has no similarity_threshold (2.0.0 wrote its default, 0.75, on every invariant)"
    ) in result.stdout.splitlines()
    assert (
        "invariants[0].similarity_threshold: 'similarity_threshold' does not apply to a "
        "'latency' invariant (its fields: max_ms)"
    ) in result.stderr


def test_what_migrate_would_make_invalid_is_not_written(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result is validated before anything is written: a rule that writes something the
    loader refuses (here one made to) writes no file at all."""

    def zero(src: YamlText, path: tuple[str | int, ...]) -> Fix:
        return Fix((src.put(path, "concurrency", 0),), "-> concurrency: 0")

    monkeypatch.setitem(RULES, (Advanced, "retries"), zero)
    config = tmp_path / "flakestorm.yaml"
    original = (
        "agent:\n  endpoint: http://localhost:8000/invoke\ngolden_prompts: [hi]\n"
        "advanced:\n  retries: 2\noutput:\n  path: out\n"
    )
    config.write_text(original, encoding="utf-8")
    for args in ([], ["-o", str(tmp_path / "new.yaml")], ["-o", "-"]):
        result = migrate(runner, config, *args)
        assert result.exit_code == 3
        assert config.read_text(encoding="utf-8") == original
        assert not (tmp_path / "new.yaml").exists()
        assert "rewrote" not in result.output and "ok:" not in result.output
        assert "endpoint:" not in result.output  # -o -: no config printed
        assert result.stderr.splitlines()[-2:] == [
            f"error: {config}: nothing written: what migrate would write is refused for a "
            "change migrate made (this is a bug in flakestorm, please report it at "
            "https://github.com/flakestorm/flakestorm/issues):",
            "  advanced.concurrency: must be at least 1, got 0",
        ]


def test_a_problem_of_the_users_own_is_not_blamed_on_migrate(
    runner: CliRunner, tmp_path: Path
) -> None:
    """What the loader could not read before migrate (an invariant with 1.x keys, a
    top-level matrix) may hold the user's own mistakes; migrate writes the file and they are
    reported as validate reports them."""
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        "agent:\n  endpoint: http://localhost:8000/invoke\ngolden_prompts: [hi]\n"
        "contract:\n  name: c\n  invariants:\n"
        "    - {id: a, type: regex, pattern: '(', threshold: 0.8}\n"
        "chaos_matrix:\n  - name: down\n    tool_faults:\n      - {tool: t, mode: explode}\n",
        encoding="utf-8",
    )
    result = migrate(runner, config)
    assert result.exit_code == 2, result.output
    assert f"rewrote {config} (3 changes)" in result.stdout
    assert "contract.invariants[0].pattern" in result.stderr
    assert "contract.chaos_matrix[0].tool_faults[0].mode" in result.stderr
    assert "nothing written" not in result.stderr


# --------------------------------------------------------------------------- unchanged, -o


def test_a_current_config_is_left_byte_for_byte(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "flakestorm.yaml"
    data = (
        b"# today's form\r\nversion: '2.0'\r\nagent:\r\n  endpoint: http://localhost:8000/x  "
        b"# the agent\r\ngolden_prompts: [hi]\r\noutput: {formats: [json], dir: out}\r\n"
    )
    config.write_bytes(data)
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{config}: nothing to change\nok: {config} is valid\n"
    assert config.read_bytes() == data


def test_output_file_leaves_the_original_alone(runner: CliRunner, tmp_path: Path) -> None:
    config = project(tmp_path, "v2_research_agent.yaml")
    original = config.read_bytes()
    out = tmp_path / "migrated.yaml"
    result = migrate(runner, config, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert config.read_bytes() == original
    assert f"wrote {out}" in result.stdout and f"ok: {out} is valid" in result.stdout
    assert "formats: [html]" in out.read_text(encoding="utf-8")


def test_output_dash_prints_the_config_and_says_the_rest_on_stderr(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = project(tmp_path, "v1_root.yaml")
    result = migrate(runner, config, "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# flakestorm 1.0 - the project's own config, as")
    assert '\nversion: "2.0"\nagent:\n' in result.stdout
    assert "ok: <stdout> is valid" in result.stderr
    assert 'version: "1.0" -> "2.0"' in result.stderr


# --------------------------------------------------------------------------- session files


SESSION = """\
# recorded by hand
id: s-1
input: "What is 2 + 2?"
source: manual
captured_at: "2025-06-01T10:00:00Z"   # when it happened
contract: c
"""

SESSION_CONFIG = """\
agent:
  endpoint: http://localhost:8000/invoke
golden_prompts: [hi]
contract:
  name: c
  invariants: [{id: a, type: completes}]
  chaos_matrix: [{name: calm}]
replays:
  sessions:
    - file: "sessions/*.yaml"
    - id: inline
      input: hi
      source: manual
      captured_at: "2025-06-02"
"""


def test_session_files_are_rewritten_in_place(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text(SESSION_CONFIG, encoding="utf-8")
    (tmp_path / "sessions").mkdir()
    session = tmp_path / "sessions" / "one.yaml"
    session.write_text(SESSION, encoding="utf-8")
    result = migrate(runner, config)
    assert result.exit_code == 0, result.output
    assert f'{config}:14: replays.sessions[1].captured_at: "2025-06-02" removed' in result.stdout
    assert f'{session}:5: captured_at: "2025-06-01T10:00:00Z" removed' in result.stdout
    assert session.read_text(encoding="utf-8") == SESSION.replace(
        'captured_at: "2025-06-01T10:00:00Z"   # when it happened\n', ""
    )
    assert "source: manual" in config.read_text(encoding="utf-8")


def test_with_output_session_files_are_listed_not_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text(SESSION_CONFIG, encoding="utf-8")
    (tmp_path / "sessions").mkdir()
    session = tmp_path / "sessions" / "one.yaml"
    session.write_text(SESSION, encoding="utf-8")
    result = migrate(runner, config, "-o", str(tmp_path / "new.yaml"))
    assert result.exit_code == 2
    assert f"{session}: not rewritten (1 change; -o writes only the config)" in result.stdout
    assert session.read_text(encoding="utf-8") == SESSION
    assert "problems remain that migrate cannot fix" in result.stderr
    assert "captured_at" in result.stderr and "Traceback" not in result.output


# --------------------------------------------------------------------------- bad input


def test_a_missing_file_is_a_located_error(runner: CliRunner, tmp_path: Path) -> None:
    result = migrate(runner, tmp_path / "nope.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{tmp_path / 'nope.yaml'}:1:1: cannot read the file")
    assert "Traceback" not in result.output


def test_yaml_that_does_not_parse_is_a_located_error(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text("agent:\n  endpoint: [x\nmodel: {}\n", encoding="utf-8")
    result = migrate(runner, config)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{config}:3:6: invalid YAML: expected ',' or ']'")
    assert "Traceback" not in result.output
    assert config.read_text(encoding="utf-8") == "agent:\n  endpoint: [x\nmodel: {}\n"


def test_what_migrate_cannot_fix_is_reported_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        "agent:\n  type: langchain\n  endpoint: app.chain:chain\noutput:\n  path: out\n",
        encoding="utf-8",
    )
    result = migrate(runner, config)
    assert result.exit_code == 2
    assert f"{config}:5: output.path: out -> output.dir: out" in result.stdout
    assert "'langchain' is not supported" in result.stderr
    assert "dir: out" in config.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the rules


def test_every_legacy_key_and_value_has_a_rule() -> None:
    placed = {model for _, model in CONFIG_PLACES}
    for model, key in UPSTREAM_KEYS:
        assert (model, key) in RULES, f"{model.__name__}.{key}: no rule"
        assert model in placed
    for model, key, value in UPSTREAM_VALUES:
        assert (model, key) in RULES or (model, key, value) in UNMIGRATED
    for model, key, _ in UPSTREAM_NUMBERS:
        assert (model, key) in RULES and model in placed


def test_flow_style_sections_are_written_in_block_style_first() -> None:
    text = (
        "agent: {endpoint: http://localhost:8000/x}\n"
        "scoring: {mutation: 0.25, chaos: 0.25, contract: 0.25, replay: 0.25}  # even\n"
        "output: {format: terminal, path: out}\n"
        "invariants:\n"
        "  - {type: refusal_check, dangerous_prompts: true}\n"
    )
    after, changes = migrate_text(text, "f.yaml")
    assert after == (
        "agent: {endpoint: http://localhost:8000/x}\n"
        "scoring:  # even\n"
        "  weights:\n"
        "    mutation: 0.25\n    chaos: 0.25\n    contract: 0.25\n    replay: 0.25\n"
        "output:\n  formats: []\n  dir: out\n"
        "invariants:\n"
        "  - type: refusal_check\n    expect: refuse\n"
    )
    assert [c.line for c in changes] == [2, 2, 3, 3, 3, 5, 5]
    assert "terminal dropped" in str(changes[3])
    load_config_text(after)


def test_the_first_key_of_a_list_item_hands_its_dash_on() -> None:
    text = (
        "agent:\n  endpoint: http://h/x\ninvariants:\n- threshold: 0.8  # old\n  # note\n"
        "  type: completes\n"
    )
    after, changes = migrate_text(text, "f.yaml")
    assert after == "agent:\n  endpoint: http://h/x\ninvariants:\n  # note\n- type: completes\n"
    assert [c.line for c in changes] == [4]


def test_model_without_a_mutations_section_starts_one() -> None:
    text = (
        "agent:\n  endpoint: http://h/x\nmodel:   # the generator\n  provider: openai\n"
        "  name: gpt-4o-mini\n  api_key: sk-literal\n  max_tokens: 5\ngolden_prompts: [hi]\n"
    )
    after, changes = migrate_text(text, "f.yaml")
    assert after == (
        "agent:\n  endpoint: http://h/x\nmutations:   # the generator\n  generator: llm\n  llm:\n"
        '    base_url: "https://api.openai.com/v1"\n    model: gpt-4o-mini\n'
        "    api_key: sk-literal\ngolden_prompts: [hi]\n"
    )
    said = str(changes[0])
    assert "sk-literal" not in said and 'api_key: "***"' in said
    assert "max_tokens dropped" in said and "a new mutations section" in said
    load_config_text(after)


def test_a_model_migrate_cannot_map_is_removed_with_why() -> None:
    text = "agent:\n  endpoint: http://h/x\nmodel:\n  provider: cohere\n  name: x\n"
    after, changes = migrate_text(text, "f.yaml")
    assert after == "agent:\n  endpoint: http://h/x\n"
    assert "provider 'cohere' has no OpenAI-compatible API migrate knows" in str(changes[0])


def test_1_x_agent_and_mutation_keys() -> None:
    text = (
        "agent:\n  endpoint: http://h/x?a=1\n  query_params: {b: two words}\n"
        "  response_path: \"$.data['answer']\"\n"
        "mutations:\n  types:\n  - noise\n  custom_templates:\n    one: 'Say {prompt}'\n"
        "  count: 2\n"
    )
    after, _ = migrate_text(text, "f.yaml")
    assert after == (
        'agent:\n  endpoint: "http://h/x?a=1&b=two+words"\n  response_path: data.answer\n'
        'mutations:\n  types:\n  - noise\n  - custom\n  templates: ["Say {prompt}"]\n'
        "  count: 2\n"
    )


def test_crlf_bom_and_quoted_hashes_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "flakestorm.yaml"
    path.write_bytes(
        b'\xef\xbb\xbfagent:\r\n  endpoint: "http://h/#x"  # keep\r\nadvanced:\r\n'
        b"  retries: 1\r\n  seed: 7\r\n"
    )
    migrated = migrate_file(path)
    assert (
        migrated.after
        == '\ufeffagent:\r\n  endpoint: "http://h/#x"  # keep\r\nadvanced:\r\n  seed: 7\r\n'
    )


def test_a_session_file_in_json_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"id": "s", "input": "x", "captured_at": "now"}\n', encoding="utf-8")
    migrated = migrate_file(path, SESSIONS)
    assert not migrated.changed
    assert "not rewritten: the file is in flow style (JSON)" in str(migrated.changes[0])


ROOT_MATRIX = """\
agent:
  endpoint: http://h/x
golden_prompts: [hi]
contract: {name: c, invariants: [{id: a, type: completes}]}
chaos_matrix:   # the scenarios
  - name: calm
"""


def test_a_top_level_matrix_moves_into_a_flow_style_contract() -> None:
    after, changes = migrate_text(ROOT_MATRIX, "f.yaml")
    assert after == (
        "agent:\n  endpoint: http://h/x\ngolden_prompts: [hi]\ncontract:\n  name: c\n"
        "  invariants:\n    - id: a\n      type: completes\n"
        "  chaos_matrix:   # the scenarios\n    - name: calm\n"
    )
    assert [str(c) for c in changes] == [
        "f.yaml:4: contract: written in block style",
        "f.yaml:5: chaos_matrix: -> contract.chaos_matrix (scenarios: calm)",
    ]
    load_config_text(after)


@pytest.mark.parametrize(
    ("contract", "why"),
    [
        ("contract:\n  name: c\n  invariants: [{id: a, type: completes}]\n"
         "  chaos_matrix: [{name: own}]\n",
         "contract.chaos_matrix is set (2.0.0 ran that one)"),
        ("", "scenarios check a contract's invariants and there is no contract (2.0.0 ran none)"),
    ],
    ids=["the-contract-has-one", "no-contract"],
)  # fmt: skip
def test_a_top_level_matrix_is_removed_when_it_cannot_move(contract: str, why: str) -> None:
    text = "agent:\n  endpoint: http://h/x\ngolden_prompts: [hi]\n" + contract
    after, changes = migrate_text(text + "chaos_matrix:\n  - name: calm\n", "f.yaml")
    assert after == text
    assert [c.text for c in changes] == [f"chaos_matrix: [{{name: calm}}] removed: {why}"]
    load_config_text(after)


def test_a_matrix_in_place_of_an_empty_one_and_faults_in_dict_form() -> None:
    text = (
        "agent:\n  endpoint: http://h/x\ngolden_prompts: [hi]\n"
        "contract:\n  name: c\n  invariants: [{id: a, type: completes}]\n  chaos_matrix: []\n"
        "  description: d\n"
        "chaos_matrix:\n- name: poisoned\n  context_attacks:\n    memory_poisoning:\n"
        "      payload: p\n      inject_at: retrieval_step\n"
    )
    after, changes = migrate_text(text, "f.yaml")
    assert after == (
        "agent:\n  endpoint: http://h/x\ngolden_prompts: [hi]\n"
        "contract:\n  name: c\n  invariants: [{id: a, type: completes}]\n  chaos_matrix:\n"
        "  - name: poisoned\n    context_attacks:\n      memory_poisoning:\n"
        "        payload: p\n  description: d\n"
    )
    assert [c.line for c in changes] == [9, 14]
    load_config_text(after)


def test_only_a_status_of_0_is_rewritten() -> None:
    session = (
        "id: s\ninput: hi\ntool_responses:\n  - {tool: a, status: 0}\n"
        "  - tool: b\n    status: false\n  - tool: c\n    status: 503\n"
    )
    after, changes = migrate_text(session, "s.yaml", SESSIONS)
    assert after == (
        "id: s\ninput: hi\ntool_responses:\n  - tool: a\n    status: 500\n"
        "  - tool: b\n    status: false\n  - tool: c\n    status: 503\n"
    )
    assert [str(c) for c in changes] == [
        "s.yaml:4: tool_responses[0]: written in block style",
        f"s.yaml:4: tool_responses[0].status: {ERRORED}",
    ]


def test_a_null_status_or_latency_of_2_0_0_is_removed() -> None:
    session = (
        "id: s\ninput: hi\ntool_responses:\n"
        "  - tool: a\n    status: null\n    latency_ms: null\n    response: ok\n"
        "  - tool: b\n    status: 503\n    latency_ms: 12\n"
    )
    after, changes = migrate_text(session, "s.yaml", SESSIONS)
    assert after == (
        "id: s\ninput: hi\ntool_responses:\n"
        "  - tool: a\n    response: ok\n"
        "  - tool: b\n    status: 503\n    latency_ms: 12\n"
    )
    assert [str(c) for c in changes] == [
        "s.yaml:5: tool_responses[0].status: null removed: 2.0.0 wrote null when it recorded "
        "no status; 200 is served",
        "s.yaml:6: tool_responses[0].latency_ms: null removed: 2.0.0 wrote null when it "
        "recorded no latency; the response is served at once",
    ]
