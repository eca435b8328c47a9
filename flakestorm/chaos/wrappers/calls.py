"""One wrapped call: its decision (from the scenario's
:class:`~flakestorm.chaos.faults.decisions.FaultBook`), what the wrapper does before calling
through (:class:`Plan`), what it does to the result, and the
:class:`~flakestorm.chaos.delivery.interactions.Interaction` it logs.

A fault that fired on the call but could not be applied to it (an LLM callable without a
recognisable ``messages`` argument, a reply without text, a stream shape flakestorm cannot
edit, a tool result with no text to carry an attack) is taken out of ``fired`` and logged in
``unapplied`` with the reason: it was not delivered (SPEC §10), and its scenario's cells are
ERRORED, never passed.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flakestorm.agents.closing import Closing
from flakestorm.agents.importer import describe_exception
from flakestorm.chaos.attacks import tool_results
from flakestorm.chaos.delivery import call_facts
from flakestorm.chaos.delivery.interactions import Interaction, value_json, value_text
from flakestorm.chaos.faults.decisions import LLM_KEY, FaultBook, Target, call_rng, tool_key
from flakestorm.chaos.faults.labels import attack_label, llm_fault_label
from flakestorm.chaos.faults.modes import CALL_THROUGH
from flakestorm.chaos.faults.recording import Miss, python_plan
from flakestorm.chaos.faults.tool_modes import LOST_REPLY, TOOL_MODES
from flakestorm.chaos.llm.modes import ANSWERED_INSTEAD, LLM_MODES
from flakestorm.chaos.llm.usage import UsageMeter
from flakestorm.chaos.llm.values import inject_arguments, takes_system, transform_reply
from flakestorm.chaos.wrappers.sdk_errors import sdk_of
from flakestorm.chaos.wrappers.sdk_streams import (
    Waits,
    fault_raw_response,
    fault_stream,
    fault_stream_manager,
    is_raw_response,
    is_sdk_stream,
    stream_meter,
    watch_stream,
)
from flakestorm.chaos.wrappers.sdk_usage import sdk_usage
from flakestorm.chaos.wrappers.sites import Site
from flakestorm.config import LlmFault, ToolFault
from flakestorm.errors import ToolFaultError
from flakestorm.results.usage import Usage

if TYPE_CHECKING:
    from flakestorm.chaos.delivery.interactions import InteractionLog

METHOD = "CALL"
"""The ``method`` of a python interaction."""


class Call(Closing):
    """One wrapped call in progress: its decision, and what actually reached the agent.

    A wrapper drives it through its course, in a ``with`` block that logs the call as the
    wrapper left it: :meth:`plan` (what the fault book decided, or a replayed session's
    answer), :meth:`answers` (a fault's error raised, or a value returned, in place of the
    callable), else the callable called :meth:`through`, and its result :meth:`finished`."""

    def __init__(
        self,
        log: InteractionLog,
        clock: Callable[[], float],
        site: Site,
        original: Callable[..., Any],
        book: FaultBook,
        cell: str,
    ) -> None:
        self.log = log
        self.clock = clock
        self.site = site
        self.original = original
        self.book = book
        self.cell = cell
        self.seq = log.next_seq()
        self.started = clock()
        if site.target is Target.LLM:
            self.decision = book.llm_call(cell)
        else:
            self.decision = book.tool_call(site.name, site.url, cell)
        self.fired = list(self.decision.fired)
        self.unapplied: dict[str, str] = {}
        self.recorded = False
        self.miss: str | None = None
        """A replay miss's ``upstream_error`` (a replayed session recorded no such call)."""
        self.request: str | None = None
        self.response: str | None = None
        self.fingerprint = ""
        self.idempotency_key: str | None = None
        self.retry_after_s: float | None = None
        self.usage: Usage | None = None
        self.deferred = False
        """The result is a stream: the call is logged when the agent has read it."""
        self.waits = Waits()
        """How a faulted stream of its result waits (the wrapping's sleeps)."""
        self.awaited = False
        """A sync callable handed back an awaitable: the call is logged when it is awaited."""
        llm = site.target is Target.LLM
        self._plan = llm_plan if llm else tool_plan
        self._finish = llm_result if llm else tool_result

    def plan(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan:
        """What the wrapper does before (and instead of) calling through."""
        return self._plan(self, args, kwargs)

    def answers(self, plan: Plan) -> bool:
        """Whether ``plan`` answers the agent in place of the callable: its error is logged
        (:meth:`raised`) and raised, its value logged as a 200 (the caller returns it)."""
        if plan.error is not None:
            self.raised(plan.error)
            raise plan.error
        if plan.value is CALL_THROUGH:
            return False
        self.settle(200)
        return True

    @contextlib.contextmanager
    def through(self) -> Iterator[None]:
        """Around the call of the callable (and the reading of its stream): a failure is logged
        with its description and raised; the agent that stops reading a stream got a 200."""
        try:
            yield
        except GeneratorExit:
            self.settle(200)
            raise
        except BaseException as exc:
            self.settle(None, describe_exception(exc))
            raise

    def finish(self, result: Any) -> Any:
        """The callable's ``result`` as the agent gets it (a fault applied to it)."""
        return self._finish(self, result)

    def finished(self, result: Any) -> Any:
        """:meth:`finish`, with the call logged as a 200."""
        result = self.finish(result)
        self.settle(200)
        return result

    def close(self) -> None:
        """The wrapper is left: the call is logged as it was left, if nothing logged it (nor
        will: an awaitable or a stream the agent reads later)."""
        if not self.awaited:
            self.settle(None)

    def rng(self) -> random.Random:
        """Randomness for this call's payload choices, fixed by the call's identity as the
        proxy fixes it for the same call (:func:`~flakestorm.chaos.faults.decisions.call_rng`)."""
        s = self.book.scenario
        key = tool_key(self.site.name) if self.site.target is Target.TOOL else LLM_KEY
        return call_rng(s.seed, s.name, self.cell, key, self.decision.call_index)

    def not_applied(self, label: str, reason: str) -> None:
        """The fault ``label`` fired but could not be applied to this call, because ``reason``."""
        if label in self.fired:
            self.fired.remove(label)
            self.unapplied.setdefault(label, reason)

    def settle(self, status: int | None, upstream_error: str | None = None) -> None:
        """Log the call as the wrapper left it (not yet when its result is a stream the agent
        reads later: the stream logs it when it ends)."""
        if not self.deferred:
            self.record(status, upstream_error)

    def raised(self, error: BaseException) -> None:
        """Log a call answered by raising ``error`` into the agent: a ``ToolFaultError`` (or
        an SDK's status error) as the status it stands for, and its message as the response
        (the proxy's error reply), so a replay of the call raises the same."""
        self.retry_after_s = call_facts.python_retry_after_s(error)
        if isinstance(error, ToolFaultError):
            self.response = error.message
            self.settle(error.error_code)
            return
        status = getattr(error, "status_code", None)
        self.settle(status if isinstance(status, int) else None)

    def record(self, status: int | None, upstream_error: str | None = None) -> None:
        if self.recorded:
            return
        self.recorded = True
        self.log.append(
            Interaction(
                seq=self.seq,
                scenario=self.book.scenario.name,
                cell_id=self.cell,
                target=self.site.target,
                tool=self.site.name if self.site.target is Target.TOOL else None,
                method=METHOD,
                url=self.site.url,
                call_index=self.decision.call_index,
                matched=self.decision.matched,
                fired=tuple(self.fired),
                status=status,
                upstream_error=upstream_error or self.miss,
                latency_ms=(self.clock() - self.started) * 1000,
                request=self.request,
                response=self.response,
                unapplied=tuple(self.unapplied.items()),
                replaced=self.decision.replaced,
                unscheduled=self.decision.unscheduled,
                started_ms=round(self.started * 1000, 3),
                retry_after_s=self.retry_after_s,
                idempotency_key=self.idempotency_key,
                fingerprint=self.fingerprint,
                usage=self.usage,
            )
        )


@dataclass(frozen=True)
class Plan:
    """What a wrapper does before (and instead of) calling through: the fault's
    :class:`~flakestorm.chaos.faults.modes.PythonPlan`, and the arguments to call with."""

    delay_s: float = 0.0
    error: BaseException | None = None
    """Raised into the agent after the delay."""
    value: Any = CALL_THROUGH
    """Returned instead of calling through."""
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def _replayed(call: Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan | None:
    """The plan of a call a replayed session answers (:mod:`flakestorm.chaos.faults.recording`)."""
    sent = {"args": list(args), "kwargs": kwargs} if kwargs else list(args)
    call.request = value_text(sent)
    call.fingerprint = call_facts.fingerprint(METHOD, call.site.url, value_json(sent))
    call.idempotency_key = call_facts.python_idempotency_key(kwargs)
    recording = call.book.scenario.replay
    if recording is None:
        return None
    tool = call.site.target is Target.TOOL
    index = call.decision.call_index
    served = recording.tool(call.site.name, index) if tool else recording.llm(index)
    if isinstance(served, Miss):
        call.miss = served.error
    plan = python_plan(served, tool)
    if plan.value is not CALL_THROUGH:
        call.response = value_text(plan.value)
    return Plan(plan.delay_s, plan.error, plan.value, args, kwargs)


def tool_plan(call: Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan:
    replayed = _replayed(call, args, kwargs)
    if replayed is not None:
        return replayed
    chosen = call.decision.tool_fault
    if chosen is None:
        return Plan(args=args, kwargs=kwargs)
    fault: ToolFault = chosen[1]
    plan = TOOL_MODES[fault.mode].plan(fault, call.site.name)
    if plan.value is not CALL_THROUGH:
        call.response = value_text(plan.value)
    return Plan(plan.delay_s, plan.error, plan.value, args, kwargs)


def tool_result(call: Call, result: Any) -> Any:
    result = _poisoned(call, result)
    call.response = value_text(result)
    chosen = call.decision.tool_fault
    if chosen is not None and TOOL_MODES[chosen[1].mode].drops_reply:  # ``lost_reply``
        raise ConnectionResetError(LOST_REPLY)
    return result


def _poisoned(call: Call, result: Any) -> Any:
    attacks = call.decision.attacks
    if not attacks:
        return result
    poisoned, delivered = tool_results.try_poison_value(result, [a for _, a in attacks], call.rng())
    if not delivered:
        for index, attack in attacks:
            call.not_applied(
                attack_label(index, attack),
                f"the tool's result (a {type(result).__name__}) has no text to carry it",
            )
    return poisoned


def llm_plan(call: Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan:
    replayed = _replayed(call, args, kwargs)
    if replayed is not None:
        return replayed
    injections = call.decision.attacks
    if injections:
        system_param = takes_system(call.original, args, kwargs)
        injected = inject_arguments(args, kwargs, [a for _, a in injections], system_param)
        if injected is None:
            for index, attack in injections:
                call.not_applied(
                    attack_label(index, attack),
                    "the LLM callable was called without a recognisable messages argument",
                )
        else:
            args, kwargs = injected
    chosen = call.decision.llm_fault
    if chosen is None:
        return Plan(args=args, kwargs=kwargs)
    fault: LlmFault = chosen[1]
    # a fault that answers instead of the LLM (``rate_limit``, ``timeout``) left the book no
    # attacks to inject: it listed them in the decision's ``replaced``; one that answers only a
    # request that does not stream (``timeout`` with ``after_chunks``) did leave them
    plan = LLM_MODES[fault.mode].plan(fault, asks_stream(call.original, kwargs))
    if plan.error is not None or plan.value is not CALL_THROUGH:
        for index, attack in injections:
            call.not_applied(attack_label(index, attack), ANSWERED_INSTEAD)
    error = plan.error
    sdk = sdk_of(args)
    if error is not None and sdk is not None:
        error = sdk.error(fault, error)
    return Plan(plan.delay_s, error, plan.value, args, kwargs)


def llm_result(call: Call, result: Any) -> Any:
    streamed = is_sdk_stream(result) or hasattr(result, "__enter__") or is_raw_response(result)
    call.usage = sdk_usage(result, streamed)  # what the LLM billed, before a fault edits it
    meter = stream_meter(result) if is_sdk_stream(result) else None
    if meter is not None and call.decision.llm_fault is None:
        # a stream the agent reads later: its bytes, unchanged, metered as it reads them
        call.deferred = True
        return watch_stream(result, meter, _billing(call), lambda _: call.record(200))
    result = _distorted(call, result, meter)
    if not call.deferred:  # a stream is read later: what it carried is not kept
        call.response = value_text(result)
    return result


def _billing(call: Call) -> Callable[[Usage], None]:
    def billed(usage: Usage) -> None:
        call.usage = usage

    return billed


def _distorted(call: Call, result: Any, meter: UsageMeter | None = None) -> Any:
    chosen = call.decision.llm_fault
    if chosen is None:
        return result
    index, fault = chosen
    label = llm_fault_label(index, fault)
    rng = call.rng()

    def done(reason: str | None) -> None:
        if reason is not None:
            call.not_applied(label, reason)
        call.record(200)

    waits = call.waits

    def whole(reply: Any) -> Any:
        """A parsed reply, whole or a stream, with the fault applied."""
        if is_sdk_stream(reply):
            return fault_stream(reply, fault, rng, done, waits=waits)
        changed, why_not = _whole_reply(reply, fault, rng)
        done(why_not)
        return changed

    if is_raw_response(result):  # ``with_raw_response``: the reply is what .parse() gives
        call.deferred = True
        fault_raw_response(result, whole)
        return result
    if is_sdk_stream(result):
        call.deferred = True
        metered = None if meter is None else (meter, _billing(call))
        return fault_stream(result, fault, rng, done, metered, waits)
    helper = hasattr(result, "__enter__") or hasattr(result, "__aenter__")
    if helper and fault_stream_manager(result, fault, rng, done, waits):
        call.deferred = True
        return result
    changed, why_not = _whole_reply(result, fault, rng)
    if why_not is not None:
        call.not_applied(label, why_not)
    return changed


def _whole_reply(reply: Any, fault: LlmFault, rng: random.Random) -> tuple[Any, str | None]:
    """``reply`` (not a stream) with ``fault`` applied, and None; or ``reply`` as it is, and
    why the fault could not be applied to it."""
    if LLM_MODES[fault.mode].keeps_frames:  # a stream mode (or timeout with after_chunks)
        return reply, f"{fault.mode.value} acts on a streamed reply, and this one was not streamed"
    changed = transform_reply(reply, fault, rng)
    return (reply, _why_not(reply)) if changed is None else (changed, None)


def asks_stream(method: Callable[..., Any], kwargs: dict[str, Any]) -> bool:
    """Whether a call of the LLM callable ``method`` asks for a stream: ``stream=True``, or an
    SDK's stream helper (``.stream(...)``)."""
    return kwargs.get("stream") is True or getattr(method, "__name__", "") == "stream"


def _why_not(result: Any) -> str:
    kind = type(result).__name__
    if hasattr(result, "__iter__") or hasattr(result, "__aiter__"):
        return (
            f"the LLM callable returned a {kind}, a stream flakestorm cannot edit "
            "(it edits the OpenAI and Anthropic SDKs' streams and whole replies)"
        )
    return f"the LLM callable's reply (a {kind}) has no text flakestorm can find"
