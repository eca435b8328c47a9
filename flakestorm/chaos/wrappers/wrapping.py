"""The wrapping of a python agent's tools and LLM callable for one run (SPEC §4.1, §4.2, §10).

One :class:`Wrapping` per run. Entering it puts a wrapper in every slot of every
:class:`~flakestorm.chaos.wrappers.sites.Site` (``agent.tools``, ``agent.llm``, the tools of
``agent.tool_registry``; not a tool named in ``routed``, whose HTTP calls take their faults
at the proxy); leaving it puts every original back, whatever happened in between.

:meth:`Wrapping.activate` switches the scenario; every wrapped call then asks that scenario's
:class:`~flakestorm.chaos.faults.decisions.FaultBook` what to do, attributing the call to the cell
in :data:`~flakestorm.agents.python.current_call` (the scenario's ``cell_id`` when unset, e.g. in a
thread the agent started itself), and appends one
:class:`~flakestorm.chaos.delivery.interactions.Interaction` to the log (:mod:`.calls`). A call made
by an invocation of another scenario (one that outlived its timeout, say) goes through untouched and
is logged under its own scenario.

Sync callables get sync wrappers, coroutine functions async ones, async generator functions
async generators (their items are not transformed, like a sync generator's: a result fault on
them is logged as not applied, so it is not delivered). Waiting goes
through the injected ``sleep`` / ``async_sleep``; the default sync wait ends early when the
wrapping is exited.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from flakestorm.agents.closing import Closing
from flakestorm.agents.importer import Locate, default_locate
from flakestorm.agents.python import current_call
from flakestorm.chaos.delivery.interactions import InteractionLog
from flakestorm.chaos.faults.decisions import UNATTRIBUTED, ActiveScenario, FaultBook, Target
from flakestorm.chaos.faults.flight import InFlight
from flakestorm.chaos.wrappers.calls import Call, Plan
from flakestorm.chaos.wrappers.sdk_streams import (
    Waits,
    fail_stream_manager,
    is_async_stream_helper,
)
from flakestorm.chaos.wrappers.sdk_watch import SdkWatch
from flakestorm.chaos.wrappers.sites import (
    CALLABLE,
    Site,
    attribute_site,
    attribute_sites,
    registry_sites,
)
from flakestorm.config import AgentConfig

Sleep = Callable[[float], object]
"""``sleep(seconds)``: how a sync wrapper waits."""
AsyncSleep = Callable[[float], Awaitable[object]]
"""``await async_sleep(seconds)``: how an async wrapper waits."""

_IDLE = ActiveScenario(name="", seed=0)


class Wrapping(Closing):
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
        routed: Collection[str] = (),
    ) -> None:
        self.log = log
        self.clock = clock
        self._closing = threading.Event()
        self._sleep: Sleep = sleep if sleep is not None else self._closing.wait
        self._async_sleep = async_sleep
        self._book = FaultBook(_IDLE)
        self._flight: InFlight | None = None
        self._idle: dict[str, FaultBook] = {}
        self._lock = threading.Lock()
        self._installed: list[Callable[[], None]] = []
        sites = [
            site
            for i, ref in enumerate(agent.tools or ())
            for site in attribute_sites(ref, f"agent.tools[{i}]", Target.TOOL, base_dir, locate)
        ]
        if agent.tool_registry is not None:
            sites += registry_sites(agent.tool_registry, base_dir, locate)
        if agent.llm is not None:
            sites.append(attribute_site(agent.llm, "agent.llm", Target.LLM, base_dir, locate))
        # a tool whose HTTP calls are routed through the proxy takes its faults there
        self._sites = [s for s in sites if s.target is not Target.TOOL or s.name not in routed]
        self.tool_names: tuple[str, ...] = tuple(
            dict.fromkeys(s.name for s in self._sites if s.target is Target.TOOL)
        )
        """The names ``tool_faults[].tool`` can refer to, in config order."""
        self.has_llm = agent.llm is not None
        self.sdk_watch = SdkWatch(agent.llm, self._scenario_now)
        """The calls of the SDK methods beside ``agent.llm``: what the hint of an LLM fault
        that was not delivered names."""

    def wraps(self, name: str) -> bool:
        """Whether a tool called ``name`` is wrapped."""
        return name in self.tool_names

    def tool_kind(self, name: str) -> str | None:
        """What framework tool object the tool ``name`` is (``a Strands @tool``); None for a
        callable."""
        return next((s.kind for s in self._sites if s.name == name and s.kind != CALLABLE), None)

    def site(self, name: str) -> Site | None:
        """The (first) site of the tool ``name``."""
        return next((s for s in self._sites if s.target is Target.TOOL and s.name == name), None)

    # -- scenarios

    def activate(self, scenario: ActiveScenario | None) -> None:
        """Decide the following calls with ``scenario``'s faults (None: no faults).

        Activating the active scenario again with only another ``cell_id`` (the runner does
        so before each cell) keeps the per-cell call counts of cells still running.
        """
        scenario = scenario if scenario is not None else _IDLE
        book = self._book
        self._flight = None
        if dataclasses.replace(scenario, cell_id=book.scenario.cell_id) == book.scenario:
            book.scenario = scenario
            if scenario.cell_id:
                book.begin(scenario.cell_id)
        else:
            self._book = FaultBook(scenario)

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        """Decide each call by the book of its invocation's scenario among ``scenarios``, in
        flight together (:mod:`flakestorm.chaos.faults.flight`); :meth:`activate` lands them."""
        self._flight = InFlight(scenarios, cells)

    def begin(self, invocation: str) -> None:
        """``invocation`` starts now: the origin of its faults' ``window_ms``."""
        flight = self._flight
        if flight is None or not flight.begin(invocation):
            self._book.begin(invocation)

    @property
    def scenario(self) -> ActiveScenario:
        return self._book.scenario

    def _book_for(self, scenario: str) -> FaultBook:
        """The active book; an empty one for a call made by another scenario's invocation."""
        book, flight = self._book, self._flight
        if flight is not None and scenario in flight.books:
            return flight.books[scenario]
        if not scenario or scenario == book.scenario.name:
            return book
        with self._lock:
            idle = self._idle.get(scenario)
            if idle is None:
                idle = self._idle[scenario] = FaultBook(ActiveScenario(name=scenario, seed=0))
            return idle

    def _scenario_now(self) -> str:
        """The scenario of the invocation making a call (the active one outside any)."""
        invocation = current_call.get(None)
        if invocation is not None and invocation.scenario:
            return invocation.scenario
        return self._book.scenario.name

    def _begin(self, site: Site, original: Callable[..., Any]) -> Call:
        invocation = current_call.get(None)
        book = self._book_for(invocation.scenario if invocation is not None else "")
        attributed = invocation.cell_id if invocation is not None else UNATTRIBUTED
        call = Call(self.log, self.clock, site, original, book, book.cell_of(attributed))
        call.waits = Waits(self._sleep, self._async_sleep)
        return call

    # -- entering and leaving

    def __enter__(self) -> Wrapping:
        self._closing.clear()
        try:
            for site in self._sites:
                for slot in site.slots:
                    slot.install(self._wrapper(site, slot.original))
                    self._installed.append(slot.restore)
            self._installed.append(self.sdk_watch.close)
            self.sdk_watch.__enter__()
        except BaseException:
            self._restore()
            raise
        return self

    def close(self) -> None:
        """Put every original back (a wait in a sync wrapper ends early)."""
        self._closing.set()
        self._restore()

    def _restore(self) -> None:
        failure: BaseException | None = None
        while self._installed:
            restore = self._installed.pop()
            try:
                restore()
            except Exception as exc:  # restore the others, then report the first failure
                failure = failure or exc
        if failure is not None:
            raise failure

    # -- wrappers

    def _wrapper(self, site: Site, original: Callable[..., Any]) -> Callable[..., Any]:
        """``original`` wrapped for ``site``, as a coroutine function, an async generator
        function or a plain callable, like ``original``: each drives one :class:`Call` through
        its course (planned by the fault book, answered or called through, its result
        finished), waiting and calling through its own way."""
        if _is_coroutine_function(original):
            wrapper = self._async_wrapper(site, original)
        elif inspect.isasyncgenfunction(original):
            wrapper = self._async_gen_wrapper(site, original)
        else:
            wrapper = self._sync_wrapper(site, original)
        return functools.wraps(original)(wrapper)

    async def _waited(self, plan: Plan) -> Plan:
        if plan.delay_s:
            await self._async_sleep(plan.delay_s)
        return plan

    def _async_wrapper(self, site: Site, original: Callable[..., Any]) -> Callable[..., Any]:
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._begin(site, original) as call:
                plan = await self._waited(call.plan(args, kwargs))
                if call.answers(plan):
                    return plan.value
                with call.through():
                    result = await original(*plan.args, **plan.kwargs)
                return call.finished(result)

        return async_wrapper

    def _async_gen_wrapper(self, site: Site, original: Callable[..., Any]) -> Callable[..., Any]:
        async def async_gen_wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._begin(site, original) as call:
                plan = await self._waited(call.plan(args, kwargs))
                if call.answers(plan):
                    yield plan.value
                    return
                with call.through():
                    # a stream of its own has no whole result to transform: like a sync
                    # generator's, result faults are logged as not applied
                    async for item in call.finish(original(*plan.args, **plan.kwargs)):
                        yield item
                call.settle(200)

        return async_gen_wrapper

    def _sync_wrapper(self, site: Site, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._begin(site, original) as call:
                plan = call.plan(args, kwargs)
                if plan.error is not None and is_async_stream_helper(original, plan.args):
                    # the async client's stream helper: wait and fail where it would, when the
                    # agent enters its manager, without blocking the event loop
                    manager = original(*plan.args, **plan.kwargs)
                    if fail_stream_manager(manager, plan.error, plan.delay_s, self._async_sleep):
                        return manager
                if plan.delay_s:
                    self._sleep(plan.delay_s)
                if call.answers(plan):
                    return plan.value
                with call.through():
                    result = original(*plan.args, **plan.kwargs)
                if inspect.isawaitable(result):  # a sync callable handing back a coroutine
                    call.awaited = True
                    return _finished_later(call, result)
                return call.finished(result)

        return wrapper


async def _finished_later(call: Call, awaitable: Awaitable[Any]) -> Any:
    with call.through():
        result = await awaitable
    return call.finished(result)


def _is_coroutine_function(fn: Any) -> bool:
    # also a function whose decorator hides it (the SDKs' ``async def create``)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn)):
        return True
    # a callable object with an ``async def __call__``
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)
