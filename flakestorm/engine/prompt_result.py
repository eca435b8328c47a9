"""One invocation judged: the agent's reply and the invariant's verdict on it, as every phase
records it (:class:`~flakestorm.results.model.PromptResult`)."""

from __future__ import annotations

from typing import Any

from flakestorm.agents import Reply
from flakestorm.checks.invariants import Verdict
from flakestorm.results.model import PromptResult


def judged_reply(
    prompt: str,
    sent: str,
    run: int,
    reply: Reply,
    verdict: Verdict,
    reason: str | None = None,
    **where: Any,
) -> PromptResult:
    """One invocation's result: the agent's ``reply`` to ``sent`` (for ``prompt``, in repeat
    ``run``) and the invariant's ``verdict`` on it (its reason, or ``reason``); ``where``: the
    conversation and turn, whether it was checked, the console of a reply that did not pass."""
    return PromptResult(
        prompt=prompt,
        sent=sent,
        run=run,
        passed=verdict.passed,
        reason=verdict.reason if reason is None else reason,
        output=reply.output,
        latency_ms=round(reply.latency_ms, 3),
        status=reply.status,
        error=reply.error.value if reply.error is not None else None,
        error_message=reply.error_message,
        similarity=verdict.score,
        similarity_backend=verdict.backend,
        leak_at=verdict.leak_at,
        stream=reply.stream,
        **where,
    )
