"""The loader: fixture configs (expected output beside them), env expansion, locations, warnings."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from flakestorm.config import ContextAttackType, Severity
from flakestorm.errors import ConfigError
from flakestorm.loader import LoadedConfig, load_config, load_config_text

CONFIGS = Path(__file__).parent / "configs"


def _regenerate_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_fixtures", CONFIGS / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fixtures = _regenerate_module()


def _cases(kind: str) -> list[Path]:
    return list(fixtures.fixtures(kind))


# --------------------------------------------------------------------------- fixtures


def test_there_are_enough_invalid_fixtures() -> None:
    assert len(_cases("invalid")) >= 30


@pytest.mark.parametrize("config", _cases("invalid"), ids=lambda p: p.stem)
def test_invalid_config(config: Path) -> None:
    expected = config.with_suffix(".expected").read_text(encoding="utf-8")
    got = fixtures.render(config)
    assert got == expected, "regenerate with: python -m tests.configs.regenerate"
    assert got.strip(), "an invalid config must be refused"
    for line in got.splitlines():
        assert line.startswith(f"{config.name}:")
        assert "Input should be" not in line and "errors.pydantic.dev" not in line


@pytest.mark.parametrize("config", _cases("valid"), ids=lambda p: p.stem)
def test_valid_config_loads_without_a_word(config: Path) -> None:
    assert fixtures.render(config) == ""
    assert config.with_suffix(".expected").read_text(encoding="utf-8") == ""


@pytest.mark.parametrize("config", _cases("upstream"), ids=lambda p: p.stem)
def test_upstream_example(config: Path) -> None:
    expected = config.with_suffix(".expected").read_text(encoding="utf-8")
    assert fixtures.render(config) == expected


def test_full_config_uses_every_section() -> None:
    loaded = load_config(CONFIGS / "valid" / "full.yaml", env=fixtures.ENV)
    config = loaded.config
    for section in ("contract", "chaos", "proxy", "mutations", "replays"):
        assert getattr(config, section) is not None
    assert config.contract is not None
    poisoned = config.contract.chaos_matrix[3]
    assert [a.type for a in poisoned.context_attacks] == [
        ContextAttackType.MEMORY_POISONING,
        ContextAttackType.OVERFLOW,
    ]
    assert config.contract.invariants[0].severity is Severity.CRITICAL
    assert loaded.base_dir == CONFIGS / "valid"
    assert loaded.path == CONFIGS / "valid" / "full.yaml"


# --------------------------------------------------------------------------- helpers


def _load(text: str, env: dict[str, str] | None = None) -> LoadedConfig:
    return load_config_text(textwrap.dedent(text), env=env or {}, base_dir=Path("."))


def _problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _load(text, env)
    return [str(p) for p in info.value.problems]


AGENT = "agent:\n  endpoint: http://localhost:8000/invoke\n"


# --------------------------------------------------------------------------- env expansion


def test_env_default_used_when_unset_or_empty() -> None:
    text = AGENT + "  headers:\n    X-A: '${A:-alpha}'\n    X-B: 'pre-${B:-}-post'\n"
    assert _load(text).config.agent.headers == {"X-A": "alpha", "X-B": "pre--post"}
    loaded = _load(text, {"A": "", "B": "beta"})
    assert loaded.config.agent.headers == {"X-A": "alpha", "X-B": "pre-beta-post"}
    assert loaded.secrets == frozenset({"beta"})


def test_env_inside_longer_strings_and_secrets_collected() -> None:
    text = AGENT + "  headers:\n    Authorization: 'Bearer ${TOKEN}'\n    X-Id: '${ID}/${ID}'\n"
    loaded = _load(text, {"TOKEN": "t0k3n", "ID": "42"})
    assert loaded.config.agent.headers == {"Authorization": "Bearer t0k3n", "X-Id": "42/42"}
    assert loaded.secrets == frozenset({"t0k3n", "42"})


def test_env_escape_writes_a_literal() -> None:
    text = AGENT + "  headers:\n    X-T: '$${NOT_A_VAR} and $$ and $x'\n"
    loaded = _load(text)
    assert loaded.config.agent.headers["X-T"] == "${NOT_A_VAR} and $$ and $x"
    assert loaded.secrets == frozenset()


def test_env_keys_are_not_expanded() -> None:
    text = AGENT + "  headers:\n    ${NAME}: v\n"
    assert _load(text).config.agent.headers == {"${NAME}": "v"}


def test_env_missing_names_variable_and_field() -> None:
    text = AGENT + "  headers:\n    Authorization: 'Bearer ${OPENAI_API_KEY}'\n"
    assert _problems(text) == [
        "flakestorm.yaml:4:20: agent.headers.Authorization: environment variable "
        "OPENAI_API_KEY is not set (set it, or write ${OPENAI_API_KEY:-default})"
    ]


def test_env_missing_in_required_field_reported_once() -> None:
    assert _problems("agent:\n  endpoint: '${URL}'\n") == [
        "flakestorm.yaml:2:13: agent.endpoint: environment variable URL is not set "
        "(set it, or write ${URL:-default})"
    ]


def test_env_numbers_are_converted_by_the_model() -> None:
    text = AGENT + "  timeout: ${TIMEOUT_MS:-2500}\n"
    assert _load(text).config.agent.timeout == 2500
    assert _load(text, {"TIMEOUT_MS": "900"}).config.agent.timeout == 900


@pytest.mark.parametrize("bad", ["${", "${X", "${1X}", "${X:default}", "${}"])
def test_env_malformed(bad: str) -> None:
    problems = _problems(AGENT + f"  headers:\n    X: '{bad}'\n")
    assert len(problems) == 1
    assert problems[0].startswith("flakestorm.yaml:4:8: agent.headers.X: ")
    assert "'${'" in problems[0]


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAKESTORM_LOADER_TEST", "from-os")
    text = AGENT + "  headers:\n    X: ${FLAKESTORM_LOADER_TEST}\n"
    loaded = load_config_text(text)
    assert loaded.config.agent.headers == {"X": "from-os"}
    assert "from-os" in loaded.secrets


# --------------------------------------------------------------------------- locations


def test_locations_and_line_of() -> None:
    text = """\
        version: "2.0"
        agent:
          endpoint: http://localhost:8000/invoke
        golden_prompts: [hi]
        contract:
          name: c
          invariants:
            - id: a
              type: completes
            - id: b
              type: regex
              pattern: x
          chaos_matrix:
            - name: s
        """
    loaded = _load(text)
    assert loaded.locations[("agent", "endpoint")] == (3, 13)
    assert loaded.locations[("contract", "invariants", 1)] == (10, 7)
    assert loaded.line_of(("contract", "invariants", 1, "pattern")) == 12
    assert loaded.line_of(("contract", "invariants", 1, "nothing", 3)) == 10
    assert loaded.line_of(()) == 1


def test_digest_is_sha256_of_text() -> None:
    import hashlib

    loaded = _load(AGENT)
    assert loaded.digest == hashlib.sha256(AGENT.encode()).hexdigest()


def test_anchors_and_merge_keys() -> None:
    text = """\
        agent:
          endpoint: http://localhost:8000/invoke
        golden_prompts: [hi]
        contract:
          name: c
          invariants:
            - &base {id: a, type: contains, value: x, severity: high}
            - <<: *base
              id: b
          chaos_matrix:
            - name: s
        """
    contract = _load(text).config.contract
    assert contract is not None
    assert [(i.id, i.severity) for i in contract.invariants] == [
        ("a", Severity.HIGH),
        ("b", Severity.HIGH),
    ]


def test_recursive_alias_is_an_error() -> None:
    problems = _problems("agent: &a\n  endpoint: http://x.example\n  start: *a\n")
    assert problems and all(p.startswith("flakestorm.yaml:") for p in problems)


def test_missing_file_and_bad_encoding(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert "cannot read the file" in str(info.value)
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"agent:\n  endpoint: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert info.value.problems[0].line == 2
    assert "not UTF-8" in info.value.problems[0].message


# --------------------------------------------------------------------------- warnings


def test_version_1_warns() -> None:
    loaded = _load('version: "1.0"\n' + AGENT)
    assert len(loaded.warnings) == 1
    assert str(loaded.warnings[0]).startswith("flakestorm.yaml:1:10: version: version 1.0")


def test_version_as_yaml_float() -> None:
    assert _load("version: 2.0\n" + AGENT).config.version == "2.0"


def test_flat_scoring_warns_and_maps_to_weights() -> None:
    text = AGENT + "scoring:\n  mutation: 0.1\n  chaos: 0.4\n  contract: 0.4\n  replay: 0.1\n"
    loaded = _load(text)
    assert loaded.config.scoring.weights.as_dict() == {
        "mutation": 0.1,
        "chaos": 0.4,
        "contract": 0.4,
        "replay": 0.1,
    }
    assert [str(w) for w in loaded.warnings] == [
        "flakestorm.yaml:4:3: scoring: the flat scoring form is deprecated; write scoring: "
        "weights: {mutation: 0.1, chaos: 0.4, contract: 0.4, replay: 0.1}"
    ]


def test_flat_scoring_value_errors_point_at_the_flat_key() -> None:
    text = AGENT + "scoring:\n  mutation: lots\n"
    assert _problems(text) == [
        "flakestorm.yaml:4:13: scoring.mutation: expected a number, got a string 'lots'"
    ]


def test_when_that_never_applies_warns() -> None:
    text = """\
        agent:
          endpoint: http://localhost:8000/invoke
        golden_prompts: [hi]
        contract:
          name: c
          invariants:
            - id: a
              type: completes
              when: llm_faults_active
            - id: b
              type: completes
              when: tool_faults_active
          chaos_matrix:
            - name: calm
            - name: tools
              tool_faults:
                - tool: search
                  mode: error
        """
    loaded = _load(text)
    assert [str(w) for w in loaded.warnings] == [
        "flakestorm.yaml:9:13: contract.invariants[0].when: 'llm_faults_active' applies to "
        "no scenario of the contract, so this invariant is never checked"
    ]


def test_legacy_form_is_not_a_user_key() -> None:
    problems = _problems(AGENT + "scoring:\n  legacy_form: true\n")
    assert len(problems) == 1 and "unknown key 'legacy_form'" in problems[0]


def test_problems_are_in_file_order() -> None:
    text = "agent:\n  endpoint: 5\n  timeout: x\ngolden_prompts: 3\nbogus: 1\n"
    problems = _problems(text)
    lines = [int(p.split(":")[1]) for p in problems]
    assert lines == sorted(lines) and len(problems) == 4
