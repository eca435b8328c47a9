"""LLM fault modes, one registered unit each (SPEC §4.1; the unit contract is in
:mod:`flakestorm.chaos.faults.modes`).

``rate_limit`` and ``timeout`` replace the upstream call (:func:`fault_before_upstream`):

- ``rate_limit``: HTTP 429 with the provider's error JSON
  (:func:`~flakestorm.chaos.llm.protocol.rate_limit_body`) and a ``Retry-After`` header:
  ``delay_ms`` rounded up to whole seconds when set, else
  :data:`~flakestorm.chaos.llm.protocol.RETRY_AFTER_S`. A streaming request gets the same 429,
  before any stream starts. A python call raises
  :class:`~flakestorm.errors.RateLimitFaultError`.
- ``timeout``: no answer for ``delay_ms`` (default
  :data:`~flakestorm.chaos.faults.modes.DEFAULT_TIMEOUT_MS`), then the connection is dropped. For a
  streaming request the stream *opens* (200 with SSE headers and one SSE comment frame,
  :data:`~flakestorm.chaos.llm.protocol.STALL_COMMENT`, which every SSE client ignores and
  which makes the headers leave at once) and then stalls (``stall_after_chunks=1``): the SDK
  has returned its stream object and times out reading it, which is how a stalled generation
  looks to an agent. A python call waits, then raises ``TimeoutError``.

The others rewrite the reply's text (:meth:`LlmMode.rewrite`), applied part by part by the
editors of :mod:`flakestorm.chaos.llm.replies` (whole replies, python replies) and
:mod:`flakestorm.chaos.llm.streams` (SSE streams); the flags of a unit (``truncates``,
``drops_tools``, ``rewrites_whole``) tell those editors what else changes:

- ``truncated_response``: the text is cut to the budget of ``max_tokens`` tokens; the reply is
  marked as stopped by the limit, and tool calls are dropped.
- ``empty``: the text becomes ``""``, and tool calls are dropped.
- ``garbage``: the text is replaced by random-looking text of a similar length.
- ``response_drift``: the text is rewritten with the fault's ``drift_type``.

The stream modes (SPEC §16) relay the upstream's frames as they are and act on how many
arrive and when; a reply that is not streamed is left as it is, and the fault is logged as not
applied to it:

- ``cut_stream``: after ``after_chunks`` content chunks the stream ends, with no finish reason,
  no usage and no terminal event (:mod:`flakestorm.chaos.llm.cuts`);
- ``slow_stream``: ``first_token_ms`` before the first content chunk, ``chunk_delay_ms`` before
  each later one (:mod:`flakestorm.chaos.llm.pacing`).

``timeout`` with ``after_chunks`` on a streaming request goes upstream: the stream is relayed
for that many content chunks, then held ``delay_ms`` and dropped (a stall mid-answer). On a
request that is not streamed it is the plain ``timeout``.

``garbage`` and ``response_drift`` need a text part whole before they rewrite it (a stream
holds its deltas back); ``truncated_response`` and ``empty`` act delta by delta.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Protocol

from flakestorm.chaos.faults.modes import DEFAULT_TIMEOUT_MS, Fields, PythonPlan, registry
from flakestorm.chaos.llm.protocol import (
    JSON_HEADERS,
    RETRY_AFTER_S,
    SSE_HEADERS,
    STALL_COMMENT,
    LlmResponse,
    Provider,
    rate_limit_body,
)
from flakestorm.chaos.llm.text import count_tokens, drift_text, garbage_text, truncate_text
from flakestorm.config import DriftType, LlmFault, LlmFaultMode
from flakestorm.errors import RateLimitFaultError

__all__ = ["LLM_MODES", "LlmMode", "TextState", "fault_before_upstream"]


class TextState(Protocol):
    """What a rewrite reads and updates while one reply's texts are edited (the editor)."""

    rng: random.Random
    budget: int
    """Tokens left of the ``truncated_response`` budget."""
    drift: DriftType
    """The drift type for this reply (the fault's, or one drawn from the RNG)."""


class LlmMode:
    """One LLM fault mode (see the module doc). The defaults suit a mode that leaves the text
    alone and lets the call through."""

    fields = Fields()
    replaces_upstream = False
    """The request never reaches the LLM: :meth:`before_upstream` answers instead."""
    truncates = False
    """The reply is marked as stopped by its token limit."""
    drops_tools = False
    """Tool calls are removed from the reply."""
    rewrites_whole = False
    """A text part is rewritten whole: a stream holds its deltas back until it ends."""
    streams_only = False
    """The mode acts on streamed replies only (``cut_stream``, ``slow_stream``)."""
    keeps_frames = False
    """On a stream, the upstream's frames are relayed as they are: the fault acts on how many
    are sent and when (:class:`~flakestorm.chaos.llm.cuts.Cut`,
    :class:`~flakestorm.chaos.llm.pacing.Pacing`)."""
    draws = False
    """The new text is drawn at random per call (from the call's RNG, :func:`call_rng`): which
    text a call gets depends on which invocation made it, and its place among their calls."""

    def detail(self, fault: LlmFault) -> str:
        """What the fault's label adds after the mode: its ``max_tokens``, else its
        ``drift_type``, whatever the mode (a scenario set over the control API is not checked
        for meaning, and its labels name what it carries)."""
        if fault.max_tokens is not None:
            return f"({fault.max_tokens} tokens)"
        if fault.drift_type is not None:
            return f"({fault.drift_type.value})"
        return ""

    def before_upstream(
        self, fault: LlmFault, provider: Provider, streaming: bool
    ) -> LlmResponse | None:
        """The reply instead of the upstream call; None: the call goes upstream."""
        return None

    def answers_instead(self, fault: LlmFault) -> bool:
        """Whether the fault answers in place of the upstream whatever the request, so the
        request (and what attacks put in it) never reaches the LLM and no upstream stream
        comes back to edit."""
        return self.replaces_upstream

    def rewrite(self, state: TextState, text: str) -> str:
        """The new text of one whole text part of the reply."""
        return text

    def plan(self, fault: LlmFault, streaming: bool = False) -> PythonPlan:
        """What a call of the python LLM callable gets (``streaming``: a call for a stream);
        calling through, its reply's texts are then rewritten
        (:func:`flakestorm.chaos.llm.values.transform_reply`), or its stream faulted."""
        return PythonPlan()


ANSWERED_INSTEAD = "the fault answered in place of the LLM: the request never reached it"
"""Why an ``injection_via_context`` on a call a fault answered was not applied (a ``timeout``
with ``after_chunks`` on a request that does not stream: the plain timeout)."""


class TimeoutMode(LlmMode):
    fields = Fields(optional=("delay_ms", "after_chunks"))
    replaces_upstream = True
    keeps_frames = True

    @staticmethod
    def delay_ms(fault: LlmFault) -> int:
        return DEFAULT_TIMEOUT_MS if fault.delay_ms is None else fault.delay_ms

    def detail(self, fault: LlmFault) -> str:
        return "" if fault.after_chunks is None else f"(after {fault.after_chunks} chunks)"

    def before_upstream(
        self, fault: LlmFault, provider: Provider, streaming: bool
    ) -> LlmResponse | None:
        delay_ms = self.delay_ms(fault)
        if streaming:
            if fault.after_chunks is not None:  # a stall mid-answer: the stream is relayed first
                return None
            return LlmResponse(
                200, SSE_HEADERS, chunks=(STALL_COMMENT,), stall_after_chunks=1, delay_ms=delay_ms
            )
        return LlmResponse(504, (), delay_ms=delay_ms, drop=True)

    def answers_instead(self, fault: LlmFault) -> bool:
        return fault.after_chunks is None  # with after_chunks a streamed request goes upstream

    def plan(self, fault: LlmFault, streaming: bool = False) -> PythonPlan:
        if streaming and fault.after_chunks is not None:
            return PythonPlan()  # the SDK stream is held after its chunks as it is read
        delay_ms = self.delay_ms(fault)
        error = TimeoutError(f"the LLM call timed out after {delay_ms} ms")
        return PythonPlan(delay_s=delay_ms / 1000, error=error)


class RateLimitMode(LlmMode):
    replaces_upstream = True

    def before_upstream(self, fault: LlmFault, provider: Provider, streaming: bool) -> LlmResponse:
        retry_after_s = (
            RETRY_AFTER_S if fault.delay_ms is None else math.ceil(fault.delay_ms / 1000)
        )
        headers = [*JSON_HEADERS, ("retry-after", str(retry_after_s))]
        if provider is Provider.ANTHROPIC:
            headers.append(("anthropic-ratelimit-requests-remaining", "0"))
        else:
            headers += [
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", f"{retry_after_s}s"),
            ]
        return LlmResponse(429, tuple(headers), body=rate_limit_body(provider))

    def plan(self, fault: LlmFault, streaming: bool = False) -> PythonPlan:
        return PythonPlan(error=RateLimitFaultError())


class TruncatedResponseMode(LlmMode):
    fields = Fields(required=("max_tokens",))
    truncates = True
    drops_tools = True

    def rewrite(self, state: TextState, text: str) -> str:
        kept = truncate_text(text, state.budget)
        state.budget -= count_tokens(kept)
        return kept


class EmptyMode(LlmMode):
    drops_tools = True

    def rewrite(self, state: TextState, text: str) -> str:
        return ""


class GarbageMode(LlmMode):
    rewrites_whole = True
    draws = True

    def rewrite(self, state: TextState, text: str) -> str:
        return garbage_text(state.rng, text)


class ResponseDriftMode(LlmMode):
    fields = Fields(required=("drift_type",))
    rewrites_whole = True
    draws = True

    def rewrite(self, state: TextState, text: str) -> str:
        return drift_text(text, state.drift, state.rng)


class CutStreamMode(LlmMode):
    fields = Fields(required=("after_chunks",))
    streams_only = True
    keeps_frames = True

    def detail(self, fault: LlmFault) -> str:
        return f"(after {fault.after_chunks} chunks)"


class SlowStreamMode(LlmMode):
    fields = Fields(one_of=("first_token_ms", "chunk_delay_ms"))
    streams_only = True
    keeps_frames = True

    def detail(self, fault: LlmFault) -> str:
        waits = []
        if fault.first_token_ms is not None:
            waits.append(f"first token {fault.first_token_ms} ms")
        if fault.chunk_delay_ms is not None:
            waits.append(f"{fault.chunk_delay_ms} ms a chunk")
        return f"({', '.join(waits)})"


LLM_MODES: Mapping[LlmFaultMode, LlmMode] = registry(
    [
        (LlmFaultMode.TIMEOUT, TimeoutMode()),
        (LlmFaultMode.RATE_LIMIT, RateLimitMode()),
        (LlmFaultMode.TRUNCATED_RESPONSE, TruncatedResponseMode()),
        (LlmFaultMode.EMPTY, EmptyMode()),
        (LlmFaultMode.GARBAGE, GarbageMode()),
        (LlmFaultMode.RESPONSE_DRIFT, ResponseDriftMode()),
        (LlmFaultMode.CUT_STREAM, CutStreamMode()),
        (LlmFaultMode.SLOW_STREAM, SlowStreamMode()),
    ]
)
"""Every LLM fault mode's unit."""


def fault_before_upstream(
    fault: LlmFault, provider: Provider, streaming: bool
) -> LlmResponse | None:
    """The reply for a fault that replaces the upstream call (``rate_limit``, ``timeout``), or
    None when the fault transforms the upstream reply instead."""
    return LLM_MODES[fault.mode].before_upstream(fault, provider, streaming)
