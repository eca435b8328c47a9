"""The judge of ``llm_judge`` invariants (SPEC §3): an OpenAI-compatible chat completions
endpoint, or ``mock`` (a deterministic stand-in, :mod:`flakestorm.checks.judge.mock`), and the
examples that calibrate it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from flakestorm.config.base import Model
from flakestorm.config.vocabulary import JudgeVerdict

MOCK_JUDGE: Literal["mock"] = "mock"
"""``judge: mock``: the built-in deterministic judge."""


class JudgeEndpoint(Model):
    """A judge model behind an OpenAI-compatible ``POST {base_url}/chat/completions``."""

    base_url: str | None = Field(default=None, min_length=1)
    """The API root, like ``https://api.openai.com/v1``; called directly, never through the
    chaos proxy. Default: the proxy's ``llm_upstream`` (a URL) with ``/v1``."""
    model: str = Field(min_length=1)
    api_key: str | None = None
    timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = 60.0
    """How long one judge answer may take; a slower one counts as unusable (asked again)."""


Judge = JudgeEndpoint | Literal["mock"]
"""Where an ``llm_judge`` invariant's verdicts come from."""


class JudgeExample(Model):
    """An output and the verdict the judge must give it (checked before the run)."""

    output: str = Field(min_length=1)
    verdict: JudgeVerdict
