"""Earlier config formats: 1.0 configs and the flat scoring form warn; upstream-only keys refuse."""

from __future__ import annotations

from support.config_text import AGENT, load, problems


def test_version_1_warns() -> None:
    loaded = load('version: "1.0"\n' + AGENT)
    assert len(loaded.warnings) == 1
    assert str(loaded.warnings[0]).startswith("flakestorm.yaml:1:10: version: version 1.0")


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
        "weights: {mutation: 0.1, chaos: 0.4, contract: 0.4, replay: 0.1}"
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
        "put query parameters in agent.endpoint itself"
    ]
