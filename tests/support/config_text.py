"""Loading config text in tests: the config or the loader's problems as printed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flakestorm.errors import ConfigError
from flakestorm.loader import LoadedConfig, load_config_text

AGENT = "agent:\n  endpoint: http://localhost:8000/invoke\n"
"""The smallest valid config."""


def load(text: str, env: dict[str, str] | None = None) -> LoadedConfig:
    """``text`` (dedented) loaded with ``env`` only (never the real environment)."""
    return load_config_text(textwrap.dedent(text), env=env or {}, base_dir=Path("."))


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    """What the loader refuses ``text`` with, one string per problem."""
    with pytest.raises(ConfigError) as info:
        load(text, env)
    return [str(p) for p in info.value.problems]
