"""Serving one data call: the fault book's decision applied, the rest sent upstream.

A tool fault answers in place of the tool (or, ``slow``, delays the real reply); tool-side
context attacks poison a 2xx tool result (a ``slow`` one's too, after the delay). An LLM-side
``injection_via_context`` rewrites the request; an LLM fault either answers before the
upstream is asked (``rate_limit``, ``timeout``...) or distorts its 2xx reply, whole or
streamed. Other traffic and stragglers go upstream untouched. Randomness comes only from an
RNG seeded by the scenario and the call.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from flakestorm.chaos import llm
from flakestorm.chaos.attacks.tool_results import poison_body
from flakestorm.chaos.faults.decisions import (
    LLM_KEY,
    Decision,
    FaultBook,
    Target,
    call_rng,
    tool_key,
)
from flakestorm.chaos.faults.labels import attack_label, llm_fault_label, tool_fault_label
from flakestorm.chaos.faults.tool_modes import TOOL_MODES
from flakestorm.chaos.llm.modes import ANSWERED_INSTEAD, LLM_MODES
from flakestorm.chaos.llm.streams import edited
from flakestorm.chaos.llm.usage import UsageMeter
from flakestorm.chaos.proxy.a2a_calls import serve_a2a
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.framing import FramedHandler
from flakestorm.chaos.proxy.mcp_calls import serve_mcp
from flakestorm.chaos.proxy.reply import HttpResponse, closing, from_llm, from_tool, lost
from flakestorm.chaos.proxy.routes import attribute
from flakestorm.chaos.proxy.upstreams.base import UpstreamRequest
from flakestorm.config import LlmFault

UNPLACED = (
    "the request is not an OpenAI or Anthropic request flakestorm can place it in (a JSON "
    "object with messages, input or instructions, or a text prompt)"
)
"""Why an ``injection_via_context`` could not be applied to an LLM request."""


def serve(handler: FramedHandler, call: ServedCall, body: bytes) -> HttpResponse:
    """The reply to ``call`` (attributed here) with its faults applied."""
    book = attribute(call, handler.proxy, handler.headers)
    if call.mcp is not None:
        return serve_mcp(handler, call, body, book)
    if call.a2a is not None:
        return serve_a2a(handler, call, body, book)
    if book is None or call.target is Target.OTHER:
        return _upstream(handler, call, body)
    if call.target is Target.TOOL:
        decision = book.tool_call(call.tool, call.upstream_url, call.cell)
        return _serve_tool(handler, call, body, book, decision)
    return _serve_llm(handler, call, body, book, book.llm_call(call.cell))


def _upstream(handler: FramedHandler, call: ServedCall, body: bytes) -> HttpResponse:
    return handler.proxy.upstream.send(UpstreamRequest(call, handler.headers, body))


def _serve_tool(
    handler: FramedHandler, call: ServedCall, body: bytes, book: FaultBook, decision: Decision
) -> HttpResponse:
    call.decided(decision)
    if decision.tool_fault is not None:
        index, fault = decision.tool_fault
        call.fired.append(tool_fault_label(index, fault))
        unit = TOOL_MODES[fault.mode]
        injected = unit.response(fault)
        if injected is not None:  # it answers instead of the tool (the book knew: no attacks)
            return from_tool(injected)
        if not handler.hold(unit.delay_ms(fault)):
            return HttpResponse(503, [], drop=True)
        if unit.drops_reply:  # the tool acts on the call, then its reply is lost
            return lost(_upstream(handler, call, body), call)
        # ``slow``: the real reply comes after the delay, and the attacks poison it as usual
    reply = _upstream(handler, call, body)
    if decision.attacks and 200 <= reply.status < 300 and reply.chunks is not None:
        for index, attack in decision.attacks:
            call.not_applied(
                attack_label(index, attack),
                "the tool's reply is streamed: tool-result attacks poison whole replies",
            )
    if decision.attacks and 200 <= reply.status < 300 and reply.chunks is None:
        scenario = book.scenario
        key = tool_key(str(call.tool))
        rng = call_rng(scenario.seed, scenario.name, call.cell, key, decision.call_index)
        reply.body = poison_body(
            reply.body, reply.content_type, [a for _, a in decision.attacks], rng
        )
        call.fired += [attack_label(i, a) for i, a in decision.attacks]
    return reply


def _serve_llm(
    handler: FramedHandler, call: ServedCall, body: bytes, book: FaultBook, decision: Decision
) -> HttpResponse:
    call.decided(decision)
    assert call.provider is not None
    provider = call.provider
    chosen = decision.llm_fault
    streaming = llm.is_streaming(body)
    if chosen is not None:
        before = LLM_MODES[chosen[1].mode].before_upstream(chosen[1], provider, streaming)
        if before is not None:  # the fault answers: what the attacks would add reaches nothing
            call.fired.append(llm_fault_label(*chosen))
            for index, attack in decision.attacks:
                call.not_applied(attack_label(index, attack), ANSWERED_INSTEAD)
            return from_llm(before)
    for index, attack in decision.attacks:
        injected = llm.inject_context(provider, body, attack.payload) if attack.payload else body
        if injected == body:  # as the python wrappers do for a call without messages
            call.not_applied(attack_label(index, attack), UNPLACED)
            continue
        body = injected
        call.fired.append(attack_label(index, attack))
    if chosen is None:
        return _upstream(handler, call, body)
    index, fault = chosen
    label = llm_fault_label(index, fault)
    reply = _upstream(handler, call, body)
    if not 200 <= reply.status < 300:
        return reply  # the upstream failed on its own: nothing to distort
    scenario = book.scenario
    rng = call_rng(scenario.seed, scenario.name, call.cell, LLM_KEY, decision.call_index)
    call.fired.append(label)
    reply = _metered(reply, call, body)
    return _llm_fault_on(reply, fault, provider, rng, lambda why: call.not_applied(label, why))


def _metered(reply: HttpResponse, call: ServedCall, body: bytes) -> HttpResponse:
    """The upstream's 2xx reply, its usage read before a content fault edits it (the upstream
    billed what it sent, not what the agent got): set on the call for a whole reply, and for a
    stream once it has run to its end. A stream the fault stops reading early is left to the
    server, which meters what reached the agent."""
    assert call.provider is not None
    meter = UsageMeter(call.provider, body, reply.chunks is not None)
    if reply.chunks is None:
        meter.feed(reply.body)
        call.usage = meter.usage(finished=True)
        return reply

    def read(chunks: Iterator[bytes]) -> Iterator[bytes]:
        try:
            for chunk in chunks:
                meter.feed(chunk)
                yield chunk
            call.usage = meter.usage(finished=True)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    reply.chunks = read(reply.chunks)
    return reply


def _llm_fault_on(
    reply: HttpResponse,
    fault: LlmFault,
    provider: llm.Provider,
    rng: random.Random,
    not_applied: Callable[[str], None],
) -> HttpResponse:
    """Apply an LLM fault to a real (or mock, or replayed) 2xx reply, streamed or not;
    ``not_applied(why)`` when the reply is not one the fault can act on."""
    if reply.chunks is not None:
        faulter = llm.StreamFaulter(fault, rng)
        streamed = _faulted(faulter, reply.chunks, not_applied)
        chunks = closing(streamed, reply.chunks)
        return HttpResponse(reply.status, reply.headers, chunks=chunks, pace=faulter)
    if LLM_MODES[fault.mode].keeps_frames:  # a stream mode (or timeout with after_chunks)
        not_applied(f"{fault.mode.value} acts on a streamed reply, and this one was not streamed")
        return reply
    if not llm.is_reply_document(reply.body):
        not_applied(
            "upstream's reply is not an OpenAI or Anthropic reply document flakestorm can edit"
        )
    return from_llm(
        llm.fault_on_reply(fault, provider, reply.status, tuple(reply.headers), reply.body, rng)
    )


def _faulted(
    faulter: llm.StreamFaulter, chunks: Iterator[bytes], not_applied: Callable[[str], None]
) -> Iterator[bytes]:
    """Upstream's stream through ``faulter``; ``not_applied`` when it ends with the fault not
    applied (the stream was unrecognised, or ended before the fault's cut)."""
    try:
        yield from edited(faulter, chunks)
    finally:
        reason = faulter.unapplied
        if reason is not None:
            not_applied(reason)
