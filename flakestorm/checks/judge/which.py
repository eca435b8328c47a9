"""Which invariants are judged, and which judge each asks (no HTTP client here: ``validate``
reads it)."""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.config import MOCK_JUDGE, Config, Invariant, InvariantType, Judge
from flakestorm.structure.paths import ConfigPath


def judge_of(invariant: Invariant, config: Config) -> Judge | None:
    """The judge ``invariant`` asks (:func:`resolve`), or None when there is none
    (``validate`` refuses that)."""
    proxy = config.proxy
    upstream = proxy.llm_upstream if proxy is not None else None
    return resolve(invariant.judge or config.advanced.judge, upstream)


def resolve(judge: Judge | None, llm_upstream: str | None) -> Judge | None:
    """The judge set (the invariant's, else ``advanced.judge``) made whole with the proxy's
    LLM upstream (``llm_upstream``): none set and the upstream ``mock`` is the mock judge; an
    endpoint without ``base_url`` asks the upstream's OpenAI-compatible API (``URL/v1``), when
    the upstream is a URL. None: no judge can be made."""
    if judge is None:
        return MOCK_JUDGE if llm_upstream == MOCK_JUDGE else None
    if isinstance(judge, str) or judge.base_url is not None:
        return judge
    if llm_upstream is not None and llm_upstream.startswith(("http://", "https://")):
        return judge.model_copy(update={"base_url": llm_upstream.rstrip("/") + "/v1"})
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
