"""The ``mutations`` section (SPEC §6)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from flakestorm.config.base import Model
from flakestorm.config.vocabulary import LlmFallback, MutationGenerator, MutationType


class LlmEndpoint(Model):
    """An OpenAI-compatible API (chat completions or embeddings)."""

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key: str | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    """Sampling temperature of the chat completions (the ``llm`` mutation generator)."""


class MutationLlm(LlmEndpoint):
    """The ``llm`` mutation generator's endpoint, and what to do with its unusable answers."""

    fallback: LlmFallback | None = None
    """``templates``: a variant the model would not write (it refused, echoed the prompt or
    left the attack out) takes its template transform, and every report says so; unset: the
    run stops with exit 3 naming the endpoint, the mutation and why."""


MAX_TYPE_WEIGHT = 1000.0
"""The largest weight ``mutations.weights`` accepts: an infinite weight made the mutation
score NaN (``0 × inf / inf``), which passes any ``min_score``."""


class Mutations(Model):
    count: Annotated[int, Field(ge=1, le=50)] = 10
    types: list[MutationType] = Field(default_factory=lambda: list(MutationType), min_length=1)
    weights: dict[MutationType, Annotated[float, Field(ge=0.0, le=MAX_TYPE_WEIGHT)]] = {}
    """Per type, relative to the defaults (0.8–2.0); bounded so the score stays a number."""
    generator: MutationGenerator = MutationGenerator.TEMPLATES
    llm: MutationLlm | None = None
    templates: list[str] | None = Field(default=None, min_length=1)
    """Templates for the ``custom`` type; each holds ``{prompt}``."""
    cache_dir: str = ".flakestorm-cache"
    """Where the ``llm`` generator keeps its answers (relative to the config file)."""

    def weight(self, kind: MutationType) -> float:
        """``kind``'s weight in the mutation score: ``weights``, else its default."""
        return self.weights.get(kind, kind.default_weight)
