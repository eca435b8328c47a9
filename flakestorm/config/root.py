"""The ``scoring``, ``output`` and ``advanced`` sections and the root :class:`Config`, with the
defaults a run uses when they are omitted."""

from __future__ import annotations

import datetime
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from flakestorm.config.base import Model
from flakestorm.config.contract import (
    AgentConfig,
    Chaos,
    Contract,
    ContractInvariant,
    Invariant,
    Proxy,
)
from flakestorm.config.judge import Judge
from flakestorm.config.mutations import LlmEndpoint, Mutations
from flakestorm.config.replays import Replays
from flakestorm.config.vocabulary import OutputFormat, SimilarityBackend

DEFAULT_SEED = 20_000_605
"""The seed used when ``advanced.seed`` is not given, so that runs are reproducible by default."""

DEFAULT_WEIGHTS = {"mutation": 0.20, "chaos": 0.35, "contract": 0.35, "replay": 0.10}


class Weights(Model):
    mutation: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["mutation"]
    chaos: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["chaos"]
    contract: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["contract"]
    replay: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["replay"]

    def as_dict(self) -> dict[str, float]:
        return self.model_dump()


LEGACY_WEIGHT_KEYS = ("mutation", "chaos", "contract", "replay")


class Scoring(Model):
    weights: Weights = Weights()
    min_score: Annotated[float, Field(ge=0.0, le=100.0)] = 0.0
    legacy_form: bool = Field(default=False, exclude=True)
    """Set by the loader when the flat ``scoring.mutation: 0.2`` form was used (warned)."""

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        if isinstance(data, dict):
            flat = {k: data[k] for k in LEGACY_WEIGHT_KEYS if k in data}
            if flat and "weights" not in data:
                rest = {k: v for k, v in data.items() if k not in LEGACY_WEIGHT_KEYS}
                return {**rest, "weights": flat, "legacy_form": True}
        return data


class Output(Model):
    dir: str = "flakestorm-reports"
    formats: list[OutputFormat] = Field(default_factory=lambda: list(OutputFormat))


class Advanced(Model):
    seed: int = DEFAULT_SEED
    concurrency: Annotated[int, Field(ge=1, le=256)] = 4
    repeat: Annotated[int, Field(ge=1, le=100)] = 1
    min_pass: Annotated[int, Field(ge=1)] | None = None
    max_invocations: Annotated[int, Field(ge=1)] | None = None
    similarity: SimilarityBackend = SimilarityBackend.LEXICAL
    embeddings: LlmEndpoint | None = None
    judge: Judge | None = None
    """The judge of ``llm_judge`` invariants without a ``judge`` of their own."""

    @property
    def effective_min_pass(self) -> int:
        return self.min_pass if self.min_pass is not None else self.repeat


# --------------------------------------------------------------------------- root


class Conversation(Model):
    """A golden prompt that is a conversation (SPEC §12): its turns, sent in order in one
    session."""

    turns: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)


GoldenPrompt = str | Conversation
"""One golden prompt: one message, or a conversation."""


def turns_of(prompt: GoldenPrompt) -> tuple[str, ...]:
    """The messages a golden prompt sends, in order (one for a one-message prompt)."""
    return (prompt,) if isinstance(prompt, str) else tuple(prompt.turns)


def last_turn(prompt: GoldenPrompt) -> str:
    """What a phase that sends one message per golden prompt sends: its last turn."""
    return turns_of(prompt)[-1]


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
DAY_FORMAT = "a date written YYYY-MM-DD (e.g. 2026-12-31)"


def _day(value: Any) -> Any:
    """``until``: a day as YAML reads ``2026-12-31``, or the string ``"2026-12-31"``; never a
    number (pydantic would read ``4102444800`` as seconds since 1970), a time of day or another
    way of writing a date."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is no day of the calendar: expected {DAY_FORMAT}"
            ) from None
    raise ValueError(f"expected {DAY_FORMAT}, got {_shown(value)}")


def _shown(value: Any) -> str:
    """``value`` as the YAML wrote it, near enough to recognise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return f"{value.isoformat()} (a time, not a day)"
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return repr(value) if isinstance(value, str) else str(value)


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank: say why the failure is accepted")
    return text


class Accepted(Model):
    """An accepted failure (SPEC §14): a failing cell (or the failing mutations of a type) that
    does not fail the gate until ``until``."""

    cell: str | None = None
    """``INVARIANT[SCENARIO]``: a contract cell."""
    mutation: str | None = None
    """A mutation type: every failing mutation of that type."""
    reason: Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
    until: Annotated[datetime.date, BeforeValidator(_day)]
    """A day, ``YYYY-MM-DD``: as YAML reads ``2026-12-31``, or that string."""
    issue: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> Accepted:
        if (self.cell is None) == (self.mutation is None):
            raise ValueError(
                "give exactly one of 'cell' (INVARIANT[SCENARIO]) and 'mutation' (a mutation type)"
            )
        return self

    @property
    def target(self) -> str:
        """What the entry names, as reports show it: ``INV[SCEN]`` or ``mutation: TYPE``."""
        return self.cell if self.cell is not None else f"mutation: {self.mutation}"


class Price(Model):
    """What a model's tokens cost, in USD per million (SPEC §15)."""

    input_per_mtok: Annotated[float, Field(ge=0)]
    output_per_mtok: Annotated[float, Field(ge=0)]
    cached_input_per_mtok: Annotated[float, Field(ge=0)] | None = None
    """Prompt tokens read from a cache (default: ``input_per_mtok``)."""
    cache_write_per_mtok: Annotated[float, Field(ge=0)] | None = None
    """Prompt tokens written to a cache (default: ``input_per_mtok``)."""


class Config(Model):
    version: Literal["2.0", "1.0"] = "2.0"
    agent: AgentConfig
    golden_prompts: list[GoldenPrompt] = []
    invariants: list[Invariant] = []
    contract: Contract | None = None
    chaos: Chaos | None = None
    proxy: Proxy | None = None
    mutations: Mutations | None = None
    replays: Replays | None = None
    scoring: Scoring = Scoring()
    output: Output = Output()
    advanced: Advanced = Advanced()
    accepted: list[Accepted] = []
    prices: dict[str, Price] = {}
    """Prices by model name, as the LLM's replies name it (SPEC §15)."""

    @property
    def conversations(self) -> bool:
        """Whether a golden prompt is a conversation."""
        return any(isinstance(p, Conversation) for p in self.golden_prompts)

    @property
    def longest_conversation(self) -> int:
        """The most turns a golden prompt has (1 without conversations)."""
        return max((len(turns_of(p)) for p in self.golden_prompts), default=1)

    def top_level_invariants(self) -> list[ContractInvariant]:
        """The top-level invariants as the chaos and mutation phases check them, each with an
        id (``regex-3`` for an unnamed one: its type and position); ``completes`` and
        ``output_not_empty`` when there are none."""
        source = self.invariants or [
            ContractInvariant(id="completes", type="completes"),
            ContractInvariant(id="output-not-empty", type="output_not_empty"),
        ]
        out = []
        for i, invariant in enumerate(source):
            fields = invariant.model_dump(exclude={"id"}, exclude_unset=True, by_alias=True)
            fields["type"] = invariant.type
            ident = invariant.id or f"{invariant.type.value}-{i + 1}"
            out.append(ContractInvariant.model_validate({"id": ident, **fields}))
        return out

    @model_validator(mode="before")
    @classmethod
    def _version_as_text(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            return {**data, "version": version_text(data["version"])}
        return data


def version_text(version: Any) -> Any:
    """``version: 2.0`` (a YAML float) means the same as ``version: "2.0"``."""
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        return f"{float(version):.1f}"
    return version
