"""Serving one request to an MCP server (streamable HTTP, SPEC §11): the proxy routes it here
(``ServedCall.mcp``), :mod:`flakestorm.chaos.mcp` reads and faults it.

- a ``tools/call`` is a call of tool ``SERVER.TOOL`` (a fault names it ``TOOL`` or
  ``SERVER.TOOL``), decided by the fault book like any tool call: a fault answers with its MCP
  unit's answer (:data:`~flakestorm.chaos.mcp.MCP_MODES`), ``slow`` delays the real response,
  and tool-result attacks poison the real result's text content (a streamed response is read
  whole first, then sent as it came, edited);
- a ``tools/list`` hides the tools a ``tool_removed`` fault of the scenario names (and proves
  that fault delivered: the agent saw the tool gone);
- everything else (``initialize``, notifications, pings, the GET stream, ``DELETE``) passes
  through untouched, logged as other traffic.

While a replayed session is active (SPEC §7), the proxy is the server: every request to an MCP
server is answered from the recording (:mod:`flakestorm.chaos.mcp.replay`), never sent to
the real one, so a session replays with the server down. A ``tools/call`` with nothing recorded
for it is a replay miss.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from flakestorm.chaos import mcp
from flakestorm.chaos.delivery import call_facts
from flakestorm.chaos.faults.decisions import FaultBook, Target, call_rng, tool_key
from flakestorm.chaos.faults.labels import attack_label, tool_fault_label
from flakestorm.chaos.faults.recording import Live, Miss
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.framing import FramedHandler
from flakestorm.chaos.proxy.reply import HttpResponse, UpstreamFailure, lost
from flakestorm.chaos.proxy.upstreams.base import UpstreamRequest
from flakestorm.config import ToolFaultMode


def serve_mcp(
    handler: FramedHandler, call: ServedCall, body: bytes, book: FaultBook | None
) -> HttpResponse:
    """The reply to a request to MCP server ``call.mcp``, with its faults applied."""
    server = call.mcp
    assert server is not None
    if book is None:  # no scenario: nothing to decide, the request need not be read
        return _upstream(handler, call, body)
    request = mcp.read_request(body) if call.method == "POST" else None
    # the protocol version the client speaks, for an answer flakestorm makes itself
    version = (request.version if request else "") or handler.headers.get(mcp.VERSION_HEADER, "")
    if book.scenario.replay is not None:
        return _replayed(call, request, book, server, version)
    if request is None:
        return _upstream(handler, call, body)
    if request.method == mcp.TOOLS_LIST:
        return _tools_list(handler, call, body, book, server, request)
    if not request.is_tool_call:
        return _upstream(handler, call, body)
    assert request.tool is not None
    call.target, call.tool = Target.TOOL, mcp.qualified(server, request.tool)
    _what_it_sent(call, request)
    decision = book.tool_call(call.tool, call.upstream_url, call.cell, short=request.tool)
    call.decided(decision)
    if decision.tool_fault is not None:
        index, fault = decision.tool_fault
        call.fired.append(tool_fault_label(index, fault))
        answer = mcp.MCP_MODES[fault.mode].answer(fault, request.id, request.tool)
        if not answer.through:
            if answer.drop:
                return HttpResponse(504, [], delay_ms=answer.delay_ms, drop=True)
            assert answer.message is not None
            message = mcp.message_bytes(mcp.completed(answer.message, version))
            headers = [("Content-Type", mcp.JSON_TYPE)]
            return HttpResponse(answer.status, headers, message, delay_ms=answer.delay_ms)
        if not handler.hold(answer.delay_ms):
            return HttpResponse(503, [], drop=True)
        if answer.drop:  # ``lost_reply``: the server acts on the call; its response is lost
            return lost(_upstream(handler, call, body), call)
    if not decision.attacks:
        return _upstream(handler, call, body)
    reply = _whole(_upstream(handler, call, body))
    if not 200 <= reply.status < 300:
        return reply
    scenario = book.scenario
    rng = call_rng(
        scenario.seed, scenario.name, call.cell, tool_key(call.tool), decision.call_index
    )
    attacks = [a for _, a in decision.attacks]
    edited = mcp.edit_response(
        reply.body, reply.content_type, request.id, lambda m: mcp.poisoned(m, attacks, rng)
    )
    labels = [attack_label(i, a) for i, a in decision.attacks]
    if edited is None:
        for label in labels:
            call.fired.append(label)
            call.not_applied(label, "the MCP server's reply holds no response to the call")
        return reply
    call.fired += labels
    return _rebuilt(reply, edited)


def _tools_list(
    handler: FramedHandler,
    call: ServedCall,
    body: bytes,
    book: FaultBook,
    server: str,
    request: mcp.Request,
) -> HttpResponse:
    faults = book.scenario.tool_faults
    removed = mcp.removed_tools(server, faults)
    if not removed:
        return _upstream(handler, call, body)
    reply = _whole(_upstream(handler, call, body))
    if not 200 <= reply.status < 300:
        return reply
    hidden: set[str] = set()

    def edit(message: mcp.Message) -> mcp.Message:
        hidden.update(set(mcp.listed_tools(message)) & removed)
        return mcp.without_tools(message, removed)

    edited = mcp.edit_response(reply.body, reply.content_type, request.id, edit)
    if edited is None:
        return reply
    labels = tuple(
        tool_fault_label(i, f)
        for i, f in enumerate(faults)
        if f.mode is ToolFaultMode.TOOL_REMOVED
        and (mcp.short_name(server, f.tool) or f.tool) in hidden
    )
    call.target, call.tool = Target.TOOL, mcp.qualified(server, mcp.TOOLS_LIST)
    call.matched = labels
    call.fired += labels
    return _rebuilt(reply, edited)


def _replayed(
    call: ServedCall, request: mcp.Request | None, book: FaultBook, server: str, version: str
) -> HttpResponse:
    """The replayed server's reply; a recorded result in the shape the request's protocol
    version wants (``resultType`` from the stateless versions on), as a fault's is: a client
    whose session began with the real server before the replay reads it as it read those."""
    recording = book.scenario.replay
    assert recording is not None
    if request is None:  # the GET stream, DELETE: the replayed server offers neither
        return HttpResponse(405, [("Allow", "POST")])
    if not request.is_tool_call:
        answer = mcp.replayed_answer(request, server, mcp.offered(server, recording.tool_names()))
        return (
            _json(mcp.completed(answer, version)) if answer is not None else HttpResponse(202, [])
        )
    assert request.tool is not None
    qualified = mcp.qualified(server, request.tool)
    call.target, call.tool = Target.TOOL, qualified
    decision = book.tool_call(qualified, call.upstream_url, call.cell, short=request.tool)
    call.decided(decision)
    name = qualified if qualified in recording.tool_names() else request.tool
    served = recording.tool(name, decision.call_index)
    if isinstance(served, Live):  # on_miss: live; an MCP call is never sent live in a replay
        served = Miss(name, decision.call_index, len(dict(recording.tools).get(name, ())))
    if isinstance(served, Miss):
        raise UpstreamFailure(502, "replay_miss", str(served))
    call.upstream_status = served.status
    reply = _json(mcp.completed(mcp.recorded_result(request.id, served), version))
    reply.delay_ms = served.latency_ms
    return reply


def _json(message: mcp.Message) -> HttpResponse:
    return HttpResponse(200, [("Content-Type", mcp.JSON_TYPE)], mcp.message_bytes(message))


def _upstream(handler: FramedHandler, call: ServedCall, body: bytes) -> HttpResponse:
    return handler.proxy.upstream.send(UpstreamRequest(call, handler.headers, body))


def _whole(reply: HttpResponse) -> HttpResponse:
    """``reply`` with a streamed body read whole (an MCP POST's stream ends with its
    response)."""
    if reply.chunks is None:
        return reply
    chunks: Iterator[bytes] = reply.chunks
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return HttpResponse(reply.status, reply.headers, body)


def _rebuilt(reply: HttpResponse, body: bytes) -> HttpResponse:
    headers = [(k, v) for k, v in reply.headers if k.lower() != "content-length"]
    return HttpResponse(reply.status, headers, body)


def _what_it_sent(call: ServedCall, request: mcp.Request) -> None:
    """A tool call's digest and idempotency key from its name and arguments, not its JSON-RPC
    envelope (whose ``id`` differs on every request): the same call sent twice is the same."""
    arguments = request.arguments
    call.fingerprint = call_facts.fingerprint(
        "POST", call.tool or "", json.dumps(arguments, sort_keys=True, default=str)
    )
    if isinstance(arguments, dict):
        call.idempotency_key = call_facts.python_idempotency_key(arguments) or call.idempotency_key
