"""Serving one request to a downstream A2A agent (SPEC §17): the proxy routes ``/a2a/NAME/...``
here (``ServedCall.a2a``), :mod:`flakestorm.chaos.a2a.protocol` reads and answers it.

- its card (``/.well-known/agent-card.json``, 0.3's ``agent.json``) is relayed with every
  interface URL under the agent's base pointed back through the proxy's ``/a2a/NAME``, so a
  client that discovers the agent keeps calling it through flakestorm (in forward mode, where
  the client reaches the agent's own URL through the proxy, as it is); it is not a call of
  ``NAME``;
- a call (``SendMessage``, ``GetTask``...) is a call of tool ``NAME``, decided by the fault
  book like any tool call (a fault's ``method`` scopes it to one method); its effect (the
  method, task and message, not the ids that differ on every send) is its fingerprint;
- ``task_state``: the call goes to the agent, which acts on it; its reply's task is given the
  fault's state (artifacts gone, FAILED with a status message), and so is every later call
  about that task in the scenario (``GetTask``...: WORKING forever). On a stream every task
  and status update gets the state and artifact updates are dropped
  (:mod:`flakestorm.chaos.a2a.streams`); WORKING then holds the stream open, with no terminal
  state. A reply holding no task is left as it is and the fault logged as not applied;
- ``stream_cut``: a stream's first ``after_events`` events, then its end (before a terminal
  state); a call that is not streamed, or a stream that ends first, is not applied;
- ``lost_reply``: the agent acts on the call, then the connection is dropped;
- ``error``: a JSON-RPC error (``-32603``, the fault's ``message``; HTTP+JSON: the fault's
  ``error_code``); ``timeout``, ``slow``: as for any tool; the other modes answer as they do
  for an HTTP tool;
- anything else passes through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from flakestorm.chaos.a2a import protocol, results
from flakestorm.chaos.a2a.protocol import A2aCall
from flakestorm.chaos.a2a.streams import StreamEdit
from flakestorm.chaos.attacks.tool_results import try_poison_value
from flakestorm.chaos.delivery import call_facts
from flakestorm.chaos.faults.decisions import Decision, FaultBook, Target, call_rng, tool_key
from flakestorm.chaos.faults.labels import attack_label, tool_fault_label
from flakestorm.chaos.faults.modes import DEFAULT_TIMEOUT_MS
from flakestorm.chaos.faults.tool_modes import TOOL_MODES, error_message
from flakestorm.chaos.llm.streams import edited
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.framing import FramedHandler
from flakestorm.chaos.proxy.reply import HttpResponse, closing, from_tool, lost
from flakestorm.chaos.proxy.upstreams.base import UpstreamRequest
from flakestorm.config import A2aCard, A2aTaskState, ToolFault, ToolFaultMode

INTERNAL_ERROR = -32603
_JSON = [("Content-Type", "application/json")]


def serve_a2a(
    handler: FramedHandler, call: ServedCall, body: bytes, book: FaultBook | None
) -> HttpResponse:
    """The reply to a request to A2A agent ``call.a2a``, with its faults applied."""
    name = call.a2a
    assert name is not None
    if call.method == "GET" and call.rel_path.endswith(protocol.CARD_PATHS):
        return _card(handler, call, body, name, _card_fault(call, book, name))
    request = protocol.read_call(call.method, call.rel_path, body)
    if request is None or book is None:
        return _upstream(handler, call, body)
    reply = _served(handler, call, body, book, request)
    call.detail = _detail(request, reply)
    return reply


def _served(
    handler: FramedHandler, call: ServedCall, body: bytes, book: FaultBook, request: A2aCall
) -> HttpResponse:
    """The reply to a call of the agent, with its fault applied."""
    name = call.a2a
    assert name is not None
    call.target, call.tool = Target.TOOL, name
    # an act's effect, not its ids, says whether it was sent twice; a look has none
    call.fingerprint = (
        call_facts.fingerprint(call.method, name, request.effect()) if request.acts else ""
    )
    decision = book.tool_call(name, call.upstream_url, call.cell, method=request.method)
    call.decided(decision)
    remembered = book.a2a_tasks.get((name, request.task_id or ""))
    if decision.tool_fault is None:
        if remembered is not None:  # a later look at a task a fault gave its state
            reply = _remembered(handler, call, body, request, remembered)
        else:
            reply = _upstream(handler, call, body)
        return _poisoned(call, reply, book, request, decision)
    index, fault = decision.tool_fault
    label = tool_fault_label(index, fault)
    call.fired.append(label)
    unit = TOOL_MODES[fault.mode]
    if fault.mode is ToolFaultMode.ERROR:
        answer = protocol.error_response(request, INTERNAL_ERROR, error_message(fault))
        status = 200 if request.jsonrpc else fault.error_code
        return HttpResponse(status, list(_JSON), answer)
    if fault.mode is ToolFaultMode.STREAM_CUT:
        return _stream_cut(handler, call, body, request, (label, fault))
    if fault.mode is not ToolFaultMode.TASK_STATE:
        injected = unit.response(fault)
        if injected is not None:
            return from_tool(injected)
        if not handler.hold(unit.delay_ms(fault)):
            return HttpResponse(503, [], drop=True)
        reply = _upstream(handler, call, body)
        if unit.drops_reply:
            return lost(reply, call)
        # ``slow``: the agent's own reply after the delay, and the attacks poison it as usual
        return _poisoned(call, reply, book, request, decision)
    return _task_state(handler, call, body, book, request, (label, fault))


def _upstream(handler: FramedHandler, call: ServedCall, body: bytes) -> HttpResponse:
    return handler.proxy.upstream.send(UpstreamRequest(call, handler.headers, body))


def _poisoned(
    call: ServedCall, reply: HttpResponse, book: FaultBook, request: A2aCall, decision: Decision
) -> HttpResponse:
    """``reply`` with the context attacks that fired on the call in the agent's answer
    (:mod:`flakestorm.chaos.a2a.results`), or on a stream the first event that carries the
    answer's text; each one logged as not applied when the reply or stream holds none."""
    if not decision.attacks or not 200 <= reply.status < 300 or reply.drop:
        return reply
    labels = [attack_label(i, attack) for i, attack in decision.attacks]
    attacks = [attack for _, attack in decision.attacks]
    scenario = book.scenario
    rng = call_rng(
        scenario.seed, scenario.name, call.cell, tool_key(str(call.tool)), decision.call_index
    )
    if reply.chunks is not None:
        edit = StreamEdit(request, poison=lambda text: try_poison_value(text, attacks, rng)[0])
        call.fired += labels

        def ended() -> None:
            why = "the agent's stream carried no answer text to carry it (artifact or message)"
            for label in labels if not edit.poisoned else ():
                call.not_applied(label, why)

        return _edited(call, reply, labels[0], edit, ended)
    body = results.poisoned(request, reply.body, attacks, rng)
    if body is None:
        why = "the agent's reply holds no text part to carry it (an artifact's, status or message)"
        for label in labels:
            call.not_applied(label, why)
        return reply
    reply.body = body
    call.fired += labels
    return reply


def _whole(reply: HttpResponse) -> HttpResponse:
    if reply.chunks is not None:
        reply.body = b"".join(reply.chunks)
        reply.chunks = None
    return reply


def _card_fault(call: ServedCall, book: FaultBook | None, name: str) -> A2aCard | None:
    """What the scenario's ``card`` fault on ``name`` does to its card (its first such fault,
    whatever its schedule: a card fetch is no call of the agent), recorded on the call."""
    if book is None:
        return None
    for index, fault in enumerate(book.scenario.tool_faults):
        if fault.mode is ToolFaultMode.CARD and fault.tool == name and fault.card is not None:
            label = tool_fault_label(index, fault)
            call.matched = (*call.matched, label)
            call.fired.append(label)
            return fault.card
    return None


def _card(
    handler: FramedHandler, call: ServedCall, body: bytes, name: str, fault: A2aCard | None
) -> HttpResponse:
    """The agent's card, its interfaces pointed back through the proxy (under a ``card``
    fault: gone, or in the 0.3 shape)."""
    if fault is A2aCard.MISSING:
        call.detail = "card -> missing"
        return HttpResponse(404, list(_JSON), b'{"error": "agent card not found"}')
    reply = _whole(_upstream(handler, call, body))
    if not 200 <= reply.status < 300:
        return reply
    if not handler.path.startswith(("http://", "https://")):  # in forward mode: as it is
        host = handler.headers.get("Host") or f"127.0.0.1:{handler.proxy.port}"
        through = f"http://{host}/a2a/{name}"
        card = protocol.rewritten_card(reply.body, handler.proxy.a2a[name], through)
        if card is not None:
            reply.body = card
    if fault is A2aCard.V0_3:
        old = protocol.card_v03(reply.body)
        if old is None:
            call.not_applied(call.fired[-1], "the agent's card is not JSON")
        else:
            reply.body, call.detail = old, "card -> 0.3 shape"
    return reply


def _task_state(
    handler: FramedHandler,
    call: ServedCall,
    body: bytes,
    book: FaultBook,
    request: A2aCall,
    fired: tuple[str, ToolFault],
) -> HttpResponse:
    label, fault = fired
    assert fault.state is not None
    if request.streams:
        return _stream_state(handler, call, body, book, request, (label, fault.state))
    reply = _whole(_upstream(handler, call, body))
    if not 200 <= reply.status < 300:
        call.not_applied(label, f"the agent answered HTTP {reply.status}: no task to give a state")
        return reply
    changed = protocol.with_state(request, reply.body, fault.state)
    if changed is None:
        call.not_applied(label, "the agent's reply holds no task to give a state")
        return reply
    reply.body, task_id = changed
    book.a2a_tasks[(str(call.tool), task_id)] = (label, fault.state)
    return reply


def _remembered(
    handler: FramedHandler,
    call: ServedCall,
    body: bytes,
    request: A2aCall,
    remembered: tuple[str, A2aTaskState],
) -> HttpResponse:
    """A later call about a task a ``task_state`` fault gave its state: the same state."""
    label, state = remembered
    assert request.task_id is not None
    call.fired.append(label)
    if request.streams:
        return _stream_state(handler, call, body, None, request, (label, state))
    reply = _whole(_upstream(handler, call, body))
    changed = protocol.with_state(request, reply.body, state) if reply.status < 300 else None
    if changed is None:
        answer = protocol.task_with_state(request, request.task_id, state)
        return HttpResponse(200, list(_JSON), answer)
    reply.body = changed[0]
    return reply


def _stream_cut(
    handler: FramedHandler,
    call: ServedCall,
    body: bytes,
    request: A2aCall,
    fired: tuple[str, ToolFault],
) -> HttpResponse:
    """``stream_cut``: the stream's first ``after_events`` events, then its end."""
    label, fault = fired
    if not request.streams:
        reason = "stream_cut acts on a streamed call (SendStreamingMessage, SubscribeToTask)"
        call.not_applied(label, reason)
        return _upstream(handler, call, body)
    edit = StreamEdit(request, after_events=fault.after_events or 0)

    def ended() -> None:
        if not edit.cut:
            call.not_applied(
                label,
                f"the stream ended after {edit.events} events, before the cut after "
                f"{fault.after_events}",
            )

    return _edited(call, _upstream(handler, call, body), label, edit, ended)


def _stream_state(
    handler: FramedHandler,
    call: ServedCall,
    body: bytes,
    book: FaultBook | None,
    request: A2aCall,
    fired: tuple[str, A2aTaskState],
) -> HttpResponse:
    """``task_state`` on a stream: every task and status update in the state, artifacts gone;
    WORKING holds the stream open, never ending it with a terminal state."""
    label, state = fired
    edit = StreamEdit(request, state=state)

    def ended() -> None:
        if edit.task_id is None:
            call.not_applied(label, "the agent's stream held no task to give a state")
        elif book is not None:
            book.a2a_tasks[(str(call.tool), edit.task_id)] = (label, state)

    reply = _edited(call, _upstream(handler, call, body), label, edit, ended)
    if state is A2aTaskState.WORKING and reply.chunks is not None:
        reply.pace = _Held()
    return reply


class _Held:
    """A stream held open with nothing sent once its events are relayed (a task WORKING
    forever), then dropped after the default timeout."""

    hold_ms = DEFAULT_TIMEOUT_MS

    def wait_ms(self, frame: bytes) -> int:
        return 0


def _edited(
    call: ServedCall,
    reply: HttpResponse,
    label: str,
    edit: StreamEdit,
    ended: Callable[[], None],
) -> HttpResponse:
    """``reply`` (the agent's stream) through ``edit``; ``ended()`` once it is over."""
    if reply.chunks is None:
        if 200 <= reply.status < 300:
            call.not_applied(label, "the agent's reply to a streamed call was not a stream")
        else:
            call.not_applied(label, f"the agent answered HTTP {reply.status}: no stream")
        return reply
    chunks = reply.chunks

    def frames() -> Iterator[bytes]:
        try:
            yield from edited(edit, chunks)
        finally:
            ended()

    edited_reply = HttpResponse(reply.status, reply.headers, chunks=closing(frames(), chunks))
    edited_reply.pace = reply.pace  # a stream held open (a task WORKING forever) stays held
    return edited_reply


def _detail(request: A2aCall, reply: HttpResponse) -> str:
    """What the call asked and was told, for reports: ``SendMessage -> TASK_STATE_FAILED``."""
    if reply.drop:
        told = "no reply"
    elif reply.chunks is not None:
        told = "a stream"
    else:
        _, state = protocol.task_of(request, reply.body)
        error = protocol.error_of(request, reply.body)
        told = state or (f"error {error}" if error is not None else f"HTTP {reply.status}")
    return f"{request.method.value} -> {told}"
