"""The loader end to end: fixture configs (expected output beside them), locations, order."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from support.config_text import AGENT, load, problems

from flakestorm.config import ContextAttackType, Severity
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config

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
        # a problem in a file the config refers to (a replay session) is located in that file
        line = line.removeprefix("warning: ")
        other = line.split(":", 1)[0]
        assert line.startswith(f"{config.name}:") or (Path(other).parent.name == "replays")
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
    loaded = load(text)
    assert loaded.locations[("agent", "endpoint")] == (3, 13)
    assert loaded.locations[("contract", "invariants", 1)] == (10, 7)
    assert loaded.line_of(("contract", "invariants", 1, "pattern")) == 12
    assert loaded.line_of(("contract", "invariants", 1, "nothing", 3)) == 10
    assert loaded.line_of(()) == 1


def test_digest_is_sha256_of_text() -> None:
    import hashlib

    loaded = load(AGENT)
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
    contract = load(text).config.contract
    assert contract is not None
    assert [(i.id, i.severity) for i in contract.invariants] == [
        ("a", Severity.HIGH),
        ("b", Severity.HIGH),
    ]


def test_recursive_alias_is_an_error() -> None:
    found = problems("agent: &a\n  endpoint: http://x.example\n  start: *a\n")
    assert found and all(p.startswith("flakestorm.yaml:") for p in found)


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


# --------------------------------------------------------------------------- warnings and order


def test_version_as_yaml_float() -> None:
    assert load("version: 2.0\n" + AGENT).config.version == "2.0"


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
    loaded = load(text)
    assert [str(w) for w in loaded.warnings] == [
        "flakestorm.yaml:9:13: contract.invariants[0].when: 'llm_faults_active' applies to "
        "no scenario of the contract, so this invariant is never checked"
    ]


def test_problems_are_in_file_order() -> None:
    text = "agent:\n  endpoint: 5\n  timeout: x\ngolden_prompts: 3\nbogus: 1\n"
    found = problems(text)
    lines = [int(p.split(":")[1]) for p in found]
    assert lines == sorted(lines) and len(found) == 4
