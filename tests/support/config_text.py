"""Loading config text in tests: the config or the loader's problems as printed; and a config
whose environment values no message may quote."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flakestorm.errors import ConfigError
from flakestorm.loader import LoadedConfig, load_config_text

AGENT = "agent:\n  endpoint: http://localhost:8000/invoke\n"
"""The smallest valid config."""


LONG_SECRET = "tok_" + "s3cr3t" * 15
"""Longer than the 60 characters a message quotes."""

LEAKY_CONFIG = """\
agent:
  endpoint: "${AGENT_URL}"
  timeout: "${TIMEOUT}"
  method: "Bearer ${TOKEN}"
golden_prompts: [hi]
contract:
  name: c
  invariants:
    - {id: a, type: contains, value: x, severity: "${SEVERITY}"}
  chaos_matrix: [{name: s}]
"""
"""A config whose every ``${VAR}`` (from :data:`LEAKY_ENV`) lands in a field that refuses it:
no message about it may quote the value."""

LEAKY_ENV = {
    "AGENT_URL": "agent-host-no-scheme:8000",
    "TIMEOUT": "timeout-secret-1234",
    "TOKEN": LONG_SECRET,
    "SEVERITY": "quote'and\\backslash-secret",
}
"""Values no message may quote: a URL without a scheme, a bad number, a long token, and
quotes and backslashes (which ``repr`` escapes)."""


def load(text: str, env: dict[str, str] | None = None) -> LoadedConfig:
    """``text`` (dedented) loaded with ``env`` only (never the real environment)."""
    return load_config_text(textwrap.dedent(text), env=env or {}, base_dir=Path("."))


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    """What the loader refuses ``text`` with, one string per problem."""
    with pytest.raises(ConfigError) as info:
        load(text, env)
    return [str(p) for p in info.value.problems]
