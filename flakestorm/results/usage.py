"""What one LLM call billed — tokens as the provider reported them, estimated, or unknown —
and what a set of calls spent (SPEC §15): result values, read back from ``results.json``.

Tokens are kept apart by how they are priced: ``input`` (prompt tokens neither read from nor
written to a prompt cache), ``cache_read``, ``cache_write`` and ``output``. OpenAI's
``prompt_tokens`` includes its cached tokens (``prompt_tokens_details.cached_tokens``), so a
reader subtracts them; Anthropic's ``input_tokens`` already excludes
``cache_read_input_tokens`` and ``cache_creation_input_tokens``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Counted(str, enum.Enum):
    """How a call's tokens are known."""

    REPORTED = "reported"
    """From the provider's own ``usage`` in the reply."""
    ESTIMATED = "estimated"
    """The reply carried no usage: counted by the documented estimator (``docs/spend.md``)."""
    UNKNOWN = "unknown"
    """The reply was cut before its usage (a stream that did not finish): a token or cost
    invariant over it errors its cell, never passes."""


@dataclass(frozen=True)
class Usage:
    """The tokens one LLM call billed, and the model that billed them."""

    input: int = 0
    """Prompt tokens neither read from nor written to a prompt cache."""
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    model: str = ""
    """The model the reply names (else the request's); "" when neither says."""
    counted: Counted = Counted.REPORTED

    @property
    def prompt(self) -> int:
        """Every prompt token: ``input`` + ``cache_read`` + ``cache_write``."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        return self.prompt + self.output

    def to_document(self) -> dict[str, Any]:
        return {**vars(self), "counted": self.counted.value}

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Usage:
        return cls(**{**doc, "counted": Counted(doc["counted"])})


def summed(usages: Iterable[Usage]) -> Usage:
    """The tokens of several calls together; ``counted`` is the least certain of theirs
    (unknown over estimated over reported), ``model`` theirs when they share one."""
    items = list(usages)
    if not items:
        return Usage()
    models = {u.model for u in items}
    rank = [Counted.REPORTED, Counted.ESTIMATED, Counted.UNKNOWN]
    return Usage(
        input=sum(u.input for u in items),
        output=sum(u.output for u in items),
        cache_read=sum(u.cache_read for u in items),
        cache_write=sum(u.cache_write for u in items),
        model=models.pop() if len(models) == 1 else "",
        counted=max((u.counted for u in items), key=rank.index),
    )


@dataclass(frozen=True)
class Spend:
    """What a set of calls (an invocation's, a cell's, a scenario's) spent."""

    calls: Mapping[str, int] = field(default_factory=dict)
    """Calls per target (``llm``, a tool's name, ``other``), in the order first seen."""
    faulted: Mapping[str, int] = field(default_factory=dict)
    """Of those, the calls a fault answered or edited, per target (only targets with any)."""
    usage: Usage | None = None
    """The tokens its LLM calls billed; None without an LLM call that billed."""
    cost_usd: float | None = None
    """Their cost; None without usage, or when a model had no price (``unpriced``)."""
    unpriced: tuple[str, ...] = ()
    """The models with no price."""

    @property
    def llm_calls(self) -> int:
        return self.calls.get("llm", 0)

    def to_document(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "faulted": dict(self.faulted),
            "usage": None if self.usage is None else self.usage.to_document(),
            "cost_usd": self.cost_usd,
            "unpriced": list(self.unpriced),
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Spend:
        usage = doc.get("usage")
        return cls(
            calls=dict(doc["calls"]),
            faulted=dict(doc["faulted"]),
            usage=None if usage is None else Usage.from_document(usage),
            cost_usd=doc.get("cost_usd"),
            unpriced=tuple(doc.get("unpriced", ())),
        )
