"""``${VAR}`` expansion: defaults, escapes, problems, and the secrets it collects."""

from __future__ import annotations

import pytest
from support.config_text import AGENT, LEAKY_CONFIG, LEAKY_ENV, LONG_SECRET, load, problems

from flakestorm.errors import Problem
from flakestorm.loader import load_config_text
from flakestorm.loader.env import Expansion, expand, redacted


def test_env_default_used_when_unset_or_empty() -> None:
    text = AGENT + "  headers:\n    X-A: '${A:-alpha}'\n    X-B: 'pre-${B:-}-post'\n"
    assert load(text).config.agent.headers == {"X-A": "alpha", "X-B": "pre--post"}
    loaded = load(text, {"A": "", "B": "beta"})
    assert loaded.config.agent.headers == {"X-A": "alpha", "X-B": "pre-beta-post"}
    assert loaded.secrets == frozenset({"beta"})


def test_env_inside_longer_strings_and_secrets_collected() -> None:
    text = AGENT + "  headers:\n    Authorization: 'Bearer ${TOKEN}'\n    X-Id: '${ID}/${ID}'\n"
    loaded = load(text, {"TOKEN": "t0k3n", "ID": "42"})
    assert loaded.config.agent.headers == {"Authorization": "Bearer t0k3n", "X-Id": "42/42"}
    assert loaded.secrets == frozenset({"t0k3n", "42"})


def test_the_loaded_config_gives_the_redactor_of_its_secrets() -> None:
    """One redactor per loaded config, made once: what every line printed of it goes through
    (``42`` is shorter than a secret is masked at)."""
    text = AGENT + "  headers:\n    Authorization: 'Bearer ${TOKEN}'\n    X-Id: '${ID}'\n"
    loaded = load(text, {"TOKEN": "t0k3n", "ID": "42"})
    assert loaded.redactor("sent Bearer t0k3n as 42") == "sent Bearer *** as 42"
    assert loaded.redactor is loaded.redactor


def test_env_escape_writes_a_literal() -> None:
    text = AGENT + "  headers:\n    X-T: '$${NOT_A_VAR} and $$ and $x'\n"
    loaded = load(text)
    assert loaded.config.agent.headers["X-T"] == "${NOT_A_VAR} and $$ and $x"
    assert loaded.secrets == frozenset()


def test_env_keys_are_not_expanded() -> None:
    text = AGENT + "  headers:\n    ${NAME}: v\n"
    assert load(text).config.agent.headers == {"${NAME}": "v"}


def test_env_missing_names_variable_and_field() -> None:
    text = AGENT + "  headers:\n    Authorization: 'Bearer ${OPENAI_API_KEY}'\n"
    assert problems(text) == [
        "flakestorm.yaml:4:20: agent.headers.Authorization: environment variable "
        "OPENAI_API_KEY is not set (set it, or write ${OPENAI_API_KEY:-default})"
    ]


def test_env_missing_in_required_field_reported_once() -> None:
    assert problems("agent:\n  endpoint: '${URL}'\n") == [
        "flakestorm.yaml:2:13: agent.endpoint: environment variable URL is not set "
        "(set it, or write ${URL:-default})"
    ]


def test_env_numbers_are_converted_by_the_model() -> None:
    text = AGENT + "  timeout: ${TIMEOUT_MS:-2500}\n"
    assert load(text).config.agent.timeout == 2500
    assert load(text, {"TIMEOUT_MS": "900"}).config.agent.timeout == 900


@pytest.mark.parametrize("bad", ["${", "${X", "${1X}", "${X:default}", "${}"])
def test_env_malformed(bad: str) -> None:
    found = problems(AGENT + f"  headers:\n    X: '{bad}'\n")
    assert len(found) == 1
    assert found[0].startswith("flakestorm.yaml:4:8: agent.headers.X: ")
    assert "'${'" in found[0]


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAKESTORM_LOADER_TEST", "from-os")
    text = AGENT + "  headers:\n    X: ${FLAKESTORM_LOADER_TEST}\n"
    loaded = load_config_text(text)
    assert loaded.config.agent.headers == {"X": "from-os"}
    assert "from-os" in loaded.secrets


def test_expand_reports_what_the_environment_contributed() -> None:
    assert expand("a ${X} b ${Y:-dflt} ${Z:-}", {"X": "xval"}) == Expansion(
        "a xval b dflt ", secrets=frozenset({"xval"}), from_env=True
    )
    assert expand("$${X} and $x", {"X": "xval"}) == Expansion("${X} and $x")


def test_expand_unset_variable_is_a_problem_and_expands_to_nothing() -> None:
    got = expand("${A}-${B}-${C}", {"B": "bee"})
    assert got.text == "-bee-"
    assert got.problems == (
        "environment variable A is not set (set it, or write ${A:-default})",
        "environment variable C is not set (set it, or write ${C:-default})",
    )
    assert got.secrets == frozenset({"bee"}) and got.from_env


def test_expand_stops_at_a_malformed_reference_and_keeps_the_text() -> None:
    got = expand("${A} ${not valid}", {"A": "alpha"})
    assert got.text == "${A} ${not valid}"
    assert got.problems == (
        "'${not valid}' is not a valid variable reference "
        "(expected ${NAME} or ${NAME:-default}; write '$${' for a literal '${')",
    )
    assert got.secrets == frozenset({"alpha"}) and got.from_env


def test_problems_never_quote_a_secret() -> None:
    secrets = {"s3cret\nline", "abc"}
    problem = Problem("f.yaml", 1, 1, "a", "got 's3cret\\nline'")
    assert redacted([problem], secrets) == [Problem("f.yaml", 1, 1, "a", "got '***'")]
    assert redacted([problem], set()) == [problem]


# --------------------------------------------------------------------------- secrets in messages


def test_config_errors_never_quote_values_from_the_environment() -> None:
    """A config error is printed before any ``::add-mask::`` (the config did not load), and
    the CLI prints it as it is: it must not quote the value of an environment variable."""
    shown = "\n".join(problems(LEAKY_CONFIG, LEAKY_ENV))
    assert "agent.timeout" in shown and "severity" in shown and "agent.method" in shown
    for secret in LEAKY_ENV.values():
        assert secret not in shown
        assert repr(secret)[1:-1] not in shown
    assert LONG_SECRET[:30] not in shown  # not even the part a truncated quote keeps


def test_semantic_config_errors_never_quote_values_from_the_environment() -> None:
    config = LEAKY_CONFIG.replace('"${TIMEOUT}"', "1000").replace('"Bearer ${TOKEN}"', "POST")
    config = config.replace('"${SEVERITY}"', "high")
    shown = "\n".join(problems(config, LEAKY_ENV))
    assert "agent.endpoint" in shown
    assert LEAKY_ENV["AGENT_URL"] not in shown
