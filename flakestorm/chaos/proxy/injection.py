"""Serving one data call: the fault book's decision applied, the rest sent upstream.

A tool fault answers in place of the tool (or, ``slow``, delays the real reply); tool-side
context attacks poison a 2xx tool result. An LLM-side ``injection_via_context`` rewrites the
request; an LLM fault either answers before the upstream is asked (``rate_limit``,
``timeout``...) or distorts its 2xx reply, whole or streamed. Other traffic and stragglers go
upstream untouched. Randomness comes only from an RNG seeded by the scenario and the call.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from flakestorm.chaos import llm
from flakestorm.chaos.faults import (
    ActiveScenario,
    Decision,
    FaultBook,
    Target,
    attack_label,
    llm_fault_label,
    tool_fault_label,
)
from flakestorm.chaos.proxy.call import Call
from flakestorm.chaos.proxy.framing import FramedHandler
from flakestorm.chaos.proxy.reply import Reply, from_llm, from_tool
from flakestorm.chaos.proxy.routes import attribute
from flakestorm.chaos.proxy.upstreams.base import UpstreamRequest
from flakestorm.chaos.tool_results import fault_response, poison_body, slow_delay_ms
from flakestorm.config import LlmFault


def serve(handler: FramedHandler, call: Call, body: bytes) -> Reply:
    """The reply to ``call`` (attributed here) with its faults applied."""
    book = attribute(call, handler.proxy.book, handler.headers)
    if book is None or call.target is Target.OTHER:
        return _upstream(handler, call, body)
    if call.target is Target.TOOL:
        decision = book.tool_call(call.tool, call.upstream_url, call.cell)
        return _serve_tool(handler, call, body, book, decision)
    return _serve_llm(handler, call, body, book, book.llm_call(call.cell))


def _upstream(handler: FramedHandler, call: Call, body: bytes) -> Reply:
    return handler.proxy.upstream.send(UpstreamRequest(call, handler.headers, body))


def _serve_tool(
    handler: FramedHandler, call: Call, body: bytes, book: FaultBook, decision: Decision
) -> Reply:
    call.call_index, call.matched = decision.call_index, decision.matched
    if decision.tool_fault is not None:
        index, fault = decision.tool_fault
        call.fired.append(tool_fault_label(index, fault))
        injected = fault_response(fault)
        if injected is not None:
            return from_tool(injected)
        if not handler.hold(slow_delay_ms(fault)):
            return Reply(503, [], drop=True)
        return _upstream(handler, call, body)
    reply = _upstream(handler, call, body)
    if decision.attacks and 200 <= reply.status < 300 and reply.chunks is None:
        rng = _rng(book.scenario, call.cell, f"tool:{call.tool}", decision.call_index)
        reply.body = poison_body(
            reply.body, reply.content_type, [a for _, a in decision.attacks], rng
        )
        call.fired += [attack_label(i, a) for i, a in decision.attacks]
    return reply


def _serve_llm(
    handler: FramedHandler, call: Call, body: bytes, book: FaultBook, decision: Decision
) -> Reply:
    call.call_index, call.matched = decision.call_index, decision.matched
    assert call.provider is not None
    provider = call.provider
    for index, attack in decision.attacks:
        if attack.payload:
            injected = llm.inject_context(provider, body, attack.payload)
            if injected != body:
                body = injected
                call.fired.append(attack_label(index, attack))
    if decision.llm_fault is None:
        return _upstream(handler, call, body)
    index, fault = decision.llm_fault
    label = llm_fault_label(index, fault)
    streaming = llm.is_streaming(body)
    before = llm.fault_before_upstream(fault, provider, streaming)
    if before is not None:
        call.fired.append(label)
        return from_llm(before)
    reply = _upstream(handler, call, body)
    if not 200 <= reply.status < 300:
        return reply  # the upstream failed on its own: nothing to distort
    rng = _rng(book.scenario, call.cell, "llm", decision.call_index)
    call.fired.append(label)
    return _llm_fault_on(reply, fault, provider, rng)


def _llm_fault_on(
    reply: Reply, fault: LlmFault, provider: llm.Provider, rng: random.Random
) -> Reply:
    """Apply an LLM fault to a real (or mock, or replayed) 2xx reply, streamed or not."""
    if reply.chunks is not None:
        streamed = llm.fault_on_stream(fault, provider, reply.chunks, rng)
        return Reply(reply.status, reply.headers, chunks=_closing(streamed, reply.chunks))
    return from_llm(
        llm.fault_on_reply(fault, provider, reply.status, tuple(reply.headers), reply.body, rng)
    )


def _closing(outer: Iterator[bytes], inner: Iterator[bytes]) -> Iterator[bytes]:
    """``outer``, closing ``inner`` (the upstream stream it reads) however it ends."""
    try:
        yield from outer
    finally:
        close = getattr(inner, "close", None)
        if close is not None:
            close()


def _rng(scenario: ActiveScenario, cell: str, key: str, call_index: int) -> random.Random:
    return random.Random(f"{scenario.seed}\x1f{scenario.name}\x1f{cell}\x1f{key}\x1f{call_index}")
