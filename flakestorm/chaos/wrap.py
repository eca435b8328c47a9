"""Faults for python agents: their tools and LLM callable, wrapped in place (SPEC §4.1, §4.2).

One :class:`Wrapping` per run. Entering it replaces

- each ``agent.tools`` entry ``module:attr`` (attr may be dotted: ``module:client.search``)
  by a wrapper, set as that attribute of its owner (the module, object or class) — the tool's
  name, as ``tool_faults[].tool`` refers to it, is the last part of ``attr``;
- ``agent.llm`` the same way;
- every tool of ``agent.tool_registry`` (``names()``, ``get(name)``, ``set(name, fn)``), through
  ``set``;

and leaving it puts every original back, whatever happened in between. The agent must look
its tools up at call time (``tools.get_quote(...)``, or through the registry): a name bound
earlier with ``from tools import get_quote`` keeps the original function, the call never
reaches flakestorm, and the run reports the fault as not delivered.

:meth:`Wrapping.activate` switches the scenario; every wrapped call then asks that
scenario's :class:`~flakestorm.chaos.faults.FaultBook` what to do, attributing the call to the
cell in :data:`~flakestorm.agents.python.current_call` (the scenario's ``cell_id`` when unset,
e.g. in a thread the agent started itself), and appends one
:class:`~flakestorm.chaos.interactions.Interaction` to the log. A call made by an invocation
of another scenario (one that outlived its timeout, say) goes through untouched and is logged
under its own scenario.

What a fired fault does to the call:

==========================  ==============================================================
tool ``error``              raises :class:`~flakestorm.errors.ToolFaultError`
tool ``timeout``            waits ``delay_ms`` (default 30 s), raises ``TimeoutError``
tool ``slow``               waits ``delay_ms``, then calls the tool
tool ``malformed``          returns a string that is not valid JSON
tool ``malicious_response`` returns ``payload`` (a fresh copy)
tool-result attacks         the real result, poisoned (:mod:`flakestorm.chaos.tool_results`)
LLM ``rate_limit``          raises :class:`~flakestorm.errors.RateLimitFaultError`
LLM ``timeout``             waits ``delay_ms`` (default 30 s), raises ``TimeoutError``
LLM text modes              transform the reply text: a ``str`` reply, or the texts of every
                            choice of an OpenAI chat completion (``message.content``) or
                            completion (``text``), or of every text block of an Anthropic
                            message, as a dict or an object, with the proxy's editor
                            (``truncated_response``: budget per choice, shared by a message's
                            blocks); objects and dicts are copied, never changed in place
``injection_via_context``   the payload is appended to the system message of the
                            ``messages`` argument (added first when there is none; to the
                            ``system`` keyword argument, a string or text blocks, when the
                            callable takes one, as Anthropic's ``messages.create`` does);
                            messages are ``role``/``content`` dicts or objects with those
                            attributes (SDK messages, pydantic models), copied when changed
==========================  ==============================================================

A fault is listed as fired only when it reached the agent: an LLM callable without a
recognisable ``messages`` argument, a reply whose text cannot be found, or a tool result with
no text to carry an attack (a number, ``None``) leaves the call unchanged and the fault out of
``fired`` (it still appears in ``matched``).

Sync callables get sync wrappers, coroutine functions async ones, async generator functions
async generators (their items are not transformed, like a sync generator's). Waiting goes
through the injected ``sleep`` / ``async_sleep``; the default sync wait ends early when the
wrapping is exited.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from flakestorm.agents.importer import Locate, default_locate, describe_exception, load_reference
from flakestorm.agents.python import current_call
from flakestorm.chaos import tool_results
from flakestorm.chaos.faults import (
    LLM_KEY,
    UNATTRIBUTED,
    ActiveScenario,
    FaultBook,
    Target,
    attack_label,
    call_rng,
    llm_fault_label,
    tool_key,
)
from flakestorm.chaos.interactions import Interaction, InteractionLog, value_text
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.llm.values import inject_arguments, takes_system, transform_reply
from flakestorm.chaos.modes import CALL_THROUGH
from flakestorm.chaos.recording import Miss, python_plan
from flakestorm.chaos.tool_modes import TOOL_MODES
from flakestorm.config import AgentConfig, LlmFault, ToolFault
from flakestorm.errors import ConfigError

Sleep = Callable[[float], object]
"""``sleep(seconds)``: how a sync wrapper waits."""
AsyncSleep = Callable[[float], Awaitable[object]]
"""``await async_sleep(seconds)``: how an async wrapper waits."""

METHOD = "CALL"
"""The ``method`` of a python interaction."""

_IDLE = ActiveScenario(name="", seed=0)
_MISSING = object()


# --------------------------------------------------------------------------- places


@dataclass
class _Site:
    """One wrapped callable: where it lives, how to swap it, how the log names it."""

    name: str
    url: str
    target: Target
    original: Callable[..., Any]
    install: Callable[[Callable[..., Any]], None]
    restore: Callable[[], None]


def _attribute_site(
    reference: str, config_field: str, target: Target, base_dir: Path, locate: Locate
) -> _Site:
    value = load_reference(reference, base_dir, config_field, locate)
    if not callable(value):
        raise ConfigError(
            [
                locate(
                    config_field,
                    f'"{reference}" is a {type(value).__name__}: expected a callable',
                )
            ]
        )
    module_name, _, attr_path = reference.partition(":")
    parent, _, attr = attr_path.rpartition(".")
    owner: Any = (
        load_reference(f"{module_name}:{parent}", base_dir, config_field, locate)
        if parent
        else sys.modules[module_name]
    )
    raw = vars(owner).get(attr, _MISSING) if hasattr(owner, "__dict__") else value
    original: Callable[..., Any] = value
    rewrap: Callable[[Callable[..., Any]], Any] = _same
    # the descriptor itself, also when a base class defines it
    mro = owner.__mro__ if inspect.isclass(owner) else ()
    static = next((vars(k)[attr] for k in mro if attr in vars(k)), None)
    if isinstance(static, (staticmethod, classmethod)):
        original, rewrap = static.__func__, type(static)
    elif inspect.isfunction(static):
        original = static

    def install(wrapper: Callable[..., Any]) -> None:
        setattr(owner, attr, rewrap(wrapper))

    def restore() -> None:
        if raw is _MISSING:
            delattr(owner, attr)
        else:
            setattr(owner, attr, raw)

    return _Site(attr, f"python:{reference}", target, original, install, restore)


def _same(wrapper: Callable[..., Any]) -> Any:
    return wrapper


def _registry_sites(reference: str, base_dir: Path, locate: Locate) -> list[_Site]:
    config_field = "agent.tool_registry"

    def fail(message: str) -> ConfigError:
        return ConfigError([locate(config_field, message)])

    registry = load_reference(reference, base_dir, config_field, locate)
    missing = [m for m in ("names", "get", "set") if not callable(getattr(registry, m, None))]
    if missing:
        without = ", ".join(f"{m}()" for m in missing)
        raise fail(
            f'"{reference}" is a {type(registry).__name__} without {without}: '
            "expected a tool registry (names() -> list[str], get(name) -> callable, "
            "set(name, callable))"
        )
    try:
        names = registry.names()
    except Exception as exc:
        raise fail(f'"{reference}".names() failed: {describe_exception(exc)}') from None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        shown = type(names).__name__ if not isinstance(names, (list, tuple)) else "a non-str name"
        raise fail(f'"{reference}".names() returned {shown}: expected a list of str')
    sites = []
    for name in names:
        try:
            tool = registry.get(name)
        except Exception as exc:
            raise fail(f'"{reference}".get({name!r}) failed: {describe_exception(exc)}') from None
        if not callable(tool):
            raise fail(
                f'"{reference}".get({name!r}) returned a {type(tool).__name__}: expected a callable'
            )
        sites.append(
            _Site(
                name,
                f"python:{reference}/{name}",
                Target.TOOL,
                tool,
                functools.partial(registry.set, name),
                functools.partial(registry.set, name, tool),
            )
        )
    return sites


# --------------------------------------------------------------------------- one call


class _Call:
    """One wrapped call in progress: its decision, and what actually reached the agent."""

    def __init__(self, wrapping: Wrapping, site: _Site, book: FaultBook, cell: str) -> None:
        self.wrapping = wrapping
        self.site = site
        self.book = book
        self.cell = cell
        self.seq = wrapping.log.next_seq()
        self.started = wrapping.clock()
        if site.target is Target.LLM:
            self.decision = book.llm_call(cell)
        else:
            self.decision = book.tool_call(site.name, site.url, cell)
        self.fired = list(self.decision.fired)
        self.recorded = False
        self.miss: str | None = None
        """A replay miss's ``upstream_error`` (a replayed session recorded no such call)."""
        self.request: str | None = None
        self.response: str | None = None

    def rng(self) -> random.Random:
        """Randomness for this call's payload choices, fixed by the call's identity as the
        proxy fixes it for the same call (:func:`~flakestorm.chaos.faults.call_rng`)."""
        s = self.book.scenario
        key = tool_key(self.site.name) if self.site.target is Target.TOOL else LLM_KEY
        return call_rng(s.seed, s.name, self.cell, key, self.decision.call_index)

    def undelivered(self, label: str) -> None:
        if label in self.fired:
            self.fired.remove(label)

    def record(self, status: int | None, upstream_error: str | None = None) -> None:
        if self.recorded:
            return
        self.recorded = True
        self.wrapping.log.append(
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
                latency_ms=(self.wrapping.clock() - self.started) * 1000,
                request=self.request,
                response=self.response,
            )
        )


@dataclass(frozen=True)
class _Plan:
    """What a wrapper does before (and instead of) calling through: the fault's
    :class:`~flakestorm.chaos.modes.PythonPlan`, and the arguments to call with."""

    delay_s: float = 0.0
    error: BaseException | None = None
    """Raised into the agent after the delay."""
    value: Any = CALL_THROUGH
    """Returned instead of calling through."""
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def _replayed(call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Plan | None:
    """The plan of a call a replayed session answers (:mod:`flakestorm.chaos.recording`)."""
    call.request = value_text({"args": list(args), "kwargs": kwargs} if kwargs else list(args))
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
    return _Plan(plan.delay_s, plan.error, plan.value, args, kwargs)


def _tool_plan(call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Plan:
    replayed = _replayed(call, args, kwargs)
    if replayed is not None:
        return replayed
    chosen = call.decision.tool_fault
    if chosen is None:
        return _Plan(args=args, kwargs=kwargs)
    fault: ToolFault = chosen[1]
    plan = TOOL_MODES[fault.mode].plan(fault, call.site.name)
    if plan.value is not CALL_THROUGH:
        call.response = value_text(plan.value)
    return _Plan(plan.delay_s, plan.error, plan.value, args, kwargs)


def _tool_result(call: _Call, result: Any) -> Any:
    result = _poisoned(call, result)
    call.response = value_text(result)
    return result


def _poisoned(call: _Call, result: Any) -> Any:
    attacks = call.decision.attacks
    if not attacks:
        return result
    poisoned, delivered = tool_results.try_poison_value(result, [a for _, a in attacks], call.rng())
    if not delivered:
        for index, attack in attacks:
            call.undelivered(attack_label(index, attack))
    return poisoned


def _llm_plan(call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Plan:
    replayed = _replayed(call, args, kwargs)
    if replayed is not None:
        return replayed
    injections = call.decision.attacks
    if injections:
        system_param = takes_system(call.site.original, args, kwargs)
        injected = inject_arguments(args, kwargs, [a for _, a in injections], system_param)
        if injected is None:
            for index, attack in injections:
                call.undelivered(attack_label(index, attack))
        else:
            args, kwargs = injected
    chosen = call.decision.llm_fault
    if chosen is None:
        return _Plan(args=args, kwargs=kwargs)
    fault: LlmFault = chosen[1]
    unit = LLM_MODES[fault.mode]
    if unit.replaces_upstream:
        for index, attack in injections:  # the request never reaches the LLM
            call.undelivered(attack_label(index, attack))
    plan = unit.plan(fault)
    return _Plan(plan.delay_s, plan.error, plan.value, args, kwargs)


def _llm_result(call: _Call, result: Any) -> Any:
    result = _distorted(call, result)
    call.response = value_text(result)
    return result


def _distorted(call: _Call, result: Any) -> Any:
    chosen = call.decision.llm_fault
    if chosen is None:
        return result
    index, fault = chosen
    changed = transform_reply(result, fault, call.rng())
    if changed is None:
        call.undelivered(llm_fault_label(index, fault))
        return result
    return changed


# --------------------------------------------------------------------------- the wrapping


class Wrapping:
    """Wraps a python agent's tools and LLM callable for one run (module doc)."""

    def __init__(
        self,
        agent: AgentConfig,
        base_dir: Path,
        log: InteractionLog,
        locate: Locate = default_locate,
        *,
        sleep: Sleep | None = None,
        async_sleep: AsyncSleep = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.log = log
        self.clock = clock
        self._closing = threading.Event()
        self._sleep: Sleep = sleep if sleep is not None else self._closing.wait
        self._async_sleep = async_sleep
        self._book = FaultBook(_IDLE)
        self._idle: dict[str, FaultBook] = {}
        self._lock = threading.Lock()
        self._installed: list[_Site] = []
        sites = [
            _attribute_site(ref, f"agent.tools[{i}]", Target.TOOL, base_dir, locate)
            for i, ref in enumerate(agent.tools or ())
        ]
        if agent.tool_registry is not None:
            sites += _registry_sites(agent.tool_registry, base_dir, locate)
        if agent.llm is not None:
            sites.append(_attribute_site(agent.llm, "agent.llm", Target.LLM, base_dir, locate))
        self._sites = sites
        self.tool_names: tuple[str, ...] = tuple(
            dict.fromkeys(s.name for s in sites if s.target is Target.TOOL)
        )
        """The names ``tool_faults[].tool`` can refer to, in config order."""
        self.has_llm = agent.llm is not None

    # -- scenarios

    def activate(self, scenario: ActiveScenario | None) -> None:
        """Decide the following calls with ``scenario``'s faults (None: no faults).

        Activating the active scenario again with only another ``cell_id`` (the runner does
        so before each cell) keeps the per-cell call counts of cells still running.
        """
        scenario = scenario if scenario is not None else _IDLE
        book = self._book
        if dataclasses.replace(scenario, cell_id=book.scenario.cell_id) == book.scenario:
            book.scenario = scenario
        else:
            self._book = FaultBook(scenario)

    @property
    def scenario(self) -> ActiveScenario:
        return self._book.scenario

    def _book_for(self, scenario: str) -> FaultBook:
        """The active book; an empty one for a call made by another scenario's invocation."""
        book = self._book
        if not scenario or scenario == book.scenario.name:
            return book
        with self._lock:
            idle = self._idle.get(scenario)
            if idle is None:
                idle = self._idle[scenario] = FaultBook(ActiveScenario(name=scenario, seed=0))
            return idle

    def _begin(self, site: _Site) -> _Call:
        invocation = current_call.get(None)
        book = self._book_for(invocation.scenario if invocation is not None else "")
        attributed = invocation.cell_id if invocation is not None else UNATTRIBUTED
        return _Call(self, site, book, book.cell_of(attributed))

    # -- entering and leaving

    def __enter__(self) -> Wrapping:
        self._closing.clear()
        try:
            for site in self._sites:
                site.install(self._wrapper(site))
                self._installed.append(site)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        self._restore()

    def _restore(self) -> None:
        failure: BaseException | None = None
        while self._installed:
            site = self._installed.pop()
            try:
                site.restore()
            except Exception as exc:  # restore the others, then report the first failure
                failure = failure or exc
        if failure is not None:
            raise failure

    # -- wrappers

    def _wrapper(self, site: _Site) -> Callable[..., Any]:
        original = site.original
        if site.target is Target.LLM:
            plan, finish = _llm_plan, _llm_result
        else:
            plan, finish = _tool_plan, _tool_result

        if _is_coroutine_function(original):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = self._begin(site)
                try:
                    step = plan(call, args, kwargs)
                    if step.delay_s:
                        await self._async_sleep(step.delay_s)
                    if step.error is not None:
                        call.record(None)
                        raise step.error
                    if step.value is not CALL_THROUGH:
                        call.record(200)
                        return step.value
                    try:
                        result = await original(*step.args, **step.kwargs)
                    except BaseException as exc:
                        call.record(None, describe_exception(exc))
                        raise
                    result = finish(call, result)
                    call.record(200)
                    return result
                finally:
                    call.record(None)

            return functools.wraps(original)(async_wrapper)

        if inspect.isasyncgenfunction(original):

            async def async_gen_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = self._begin(site)
                try:
                    step = plan(call, args, kwargs)
                    if step.delay_s:
                        await self._async_sleep(step.delay_s)
                    if step.error is not None:
                        call.record(None)
                        raise step.error
                    if step.value is not CALL_THROUGH:
                        call.record(200)
                        yield step.value
                        return
                    try:
                        # a stream has no whole result to transform: like a sync generator's,
                        # result faults are left out of ``fired``
                        async for item in finish(call, original(*step.args, **step.kwargs)):
                            yield item
                    except GeneratorExit:  # the agent stopped reading
                        call.record(200)
                        raise
                    except BaseException as exc:
                        call.record(None, describe_exception(exc))
                        raise
                    call.record(200)
                finally:
                    call.record(None)

            return functools.wraps(original)(async_gen_wrapper)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = self._begin(site)
            deferred = False
            try:
                step = plan(call, args, kwargs)
                if step.delay_s:
                    self._sleep(step.delay_s)
                if step.error is not None:
                    call.record(None)
                    raise step.error
                if step.value is not CALL_THROUGH:
                    call.record(200)
                    return step.value
                try:
                    result = original(*step.args, **step.kwargs)
                except BaseException as exc:
                    call.record(None, describe_exception(exc))
                    raise
                if inspect.isawaitable(result):  # a sync callable handing back a coroutine
                    deferred = True
                    return _finished_later(call, result, finish)
                result = finish(call, result)
                call.record(200)
                return result
            finally:
                if not deferred:
                    call.record(None)

        return functools.wraps(original)(wrapper)


async def _finished_later(
    call: _Call, awaitable: Awaitable[Any], finish: Callable[[_Call, Any], Any]
) -> Any:
    try:
        result = await awaitable
    except BaseException as exc:
        call.record(None, describe_exception(exc))
        raise
    result = finish(call, result)
    call.record(200)
    return result


def _is_coroutine_function(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # a callable object with an ``async def __call__``
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)
