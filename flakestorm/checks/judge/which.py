"""Which invariants are judged, and which judge each asks (no HTTP client here: ``validate``
reads it)."""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.config import MOCK_JUDGE, Config, Invariant, InvariantType, Judge
from flakestorm.validation.paths import ConfigPath


def judge_of(invariant: Invariant, config: Config) -> Judge | None:
    """The judge ``invariant`` asks, or None when none is set (``validate`` refuses that)."""
    if invariant.judge is not None:
        return invariant.judge
    if config.advanced.judge is not None:
        return config.advanced.judge
    proxy = config.proxy
    if proxy is not None and proxy.llm_upstream == MOCK_JUDGE:
        return MOCK_JUDGE
    return None


@dataclass(frozen=True)
class Judged:
    """An ``llm_judge`` invariant and where it is in the config."""

    at: ConfigPath
    invariant: Invariant


def judged_invariants(config: Config) -> list[Judged]:
    """Every ``llm_judge`` invariant of the config: the mutation phase's, then the contract's."""
    out = [
        Judged(("invariants", i), inv)
        for i, inv in enumerate(config.invariants)
        if inv.type is InvariantType.LLM_JUDGE
    ]
    if config.contract is not None:
        out += [
            Judged(("contract", "invariants", i), inv)
            for i, inv in enumerate(config.contract.invariants)
            if inv.type is InvariantType.LLM_JUDGE
        ]
    return out
