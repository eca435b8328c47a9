"""Fault delivery for a run: activate scenarios, read back interactions, prove delivery.

A :class:`Channel` is where faults reach the agent's dependencies: the chaos proxy for HTTP
agents (:class:`ProxyChannel`) or the python wrappers for python agents
(:class:`WrapperChannel`). The contract phase activates one scenario at a time on it, then
reads the scenario's interactions back: :func:`prove` turns them into per-cell proof (the
faults that fired in each cell and the calls the agent made) and the scenario's delivery proof
(the declared faults and those some call matched), and :func:`judge` decides from that proof
alone which declared faults no matching call ever reached (SPEC §4: those make the scenario's
cells ERRORED with a message that says what is probably mis-wired). The proof is kept in
``results.json``, so delivery can be judged again from files.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from flakestorm.chaos.faults import (
    LLM_REQUEST_ATTACKS,
    TOOL_RESULT_ATTACKS,
    UNATTRIBUTED,
    ActiveScenario,
    FaultBook,
    Target,
    attack_label,
    llm_fault_label,
    schedule_of,
    timed,
    tool_fault_label,
)
from flakestorm.chaos.interactions import Interaction, lost_note

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.control import ProxyControl
    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.chaos.wrappers.wrapping import Wrapping
from flakestorm.config import Scenario, Scheduled
from flakestorm.config.contract import STDIO_SERVER
from flakestorm.results.model import CallRecord, CellResult, ScenarioInfo, Status
from flakestorm.results.scenarios import MAX_UNATTRIBUTED_CALLS

CALM = "flakestorm:no-chaos"
"""The name of the pass-through scenario active outside chaos scenarios (baselines, checks)."""


def active_scenario(scenario: Scenario, seed: int, cell_id: str = "") -> ActiveScenario:
    return ActiveScenario(
        name=scenario.name,
        seed=seed,
        tool_faults=tuple(scenario.tool_faults),
        llm_faults=tuple(scenario.llm_faults),
        context_attacks=tuple(
            a
            for a in scenario.context_attacks
            if a.type in TOOL_RESULT_ATTACKS or a.type in LLM_REQUEST_ATTACKS
        ),
        cell_id=cell_id,
    )


class Channel(Protocol):
    """Where faults are delivered."""

    exact_attribution: bool
    """Whether every call is attributed to its cell whatever the concurrency."""

    def activate(self, scenario: ActiveScenario) -> None: ...

    def begin(self, invocation: str) -> None:
        """``invocation`` starts now: the origin of the active scenario's ``window_ms``, and
        (:meth:`follow_traces`) the invocation its trace id names."""
        ...

    def follow_traces(self) -> None:
        """The agent forwards only the trace context: from now on every invocation is made
        known as it begins, so its calls are attributed by their trace id."""
        ...

    def interactions(self, scenario: str) -> list[Interaction]: ...

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        """Drop ``scenario``'s interactions (but those of the cells in ``keep``): they are in
        the results now, so a long run's interaction log stays small."""
        ...

    def wiring_hint(self, label: str, tool: str | None) -> str: ...

    def lost(self) -> str | None:
        """The run's warning when the channel's interaction log did not keep every call whole
        (:func:`~flakestorm.chaos.interactions.lost_note`); None when it did."""
        ...


def prove(
    cells: Sequence[CellResult],
    interactions: Sequence[Interaction],
    book: FaultBook,
    channel: Channel,
    info: ScenarioInfo,
) -> tuple[list[CellResult], ScenarioInfo]:
    """The delivery proof of one scenario that ran on ``channel``.

    Returns the cells with ``faults_fired`` and ``calls`` filled in from their interactions,
    and ``info`` with the labels of the faults that must be delivered (``declared``), those
    some call matched and could act on (``matched``), those that matched a call but could not
    be applied to it (``unapplied``, with why), the context attacks' calls a fault answered in
    place of the tool or LLM (``replaced``, counted per fault) and a wiring hint per declared
    label. Whether a fault was delivered is decided from these alone by :func:`judge`.
    """
    by_cell: dict[str, list[Interaction]] = {}
    matched: dict[str, None] = {}
    unapplied: dict[str, str] = {}
    replaced: dict[str, dict[str, int]] = {}
    outside: dict[str, int] = {}
    for interaction in interactions:
        by_cell.setdefault(cell_of(interaction.cell_id), []).append(interaction)
        matched.update(dict.fromkeys(interaction.matched))
        for label in interaction.unscheduled:
            outside[label] = max(outside.get(label, 0), interaction.call_index + 1)
        for label, why in interaction.unapplied:
            unapplied.setdefault(label, why)
        for label, by in interaction.replaced:
            counts = replaced.setdefault(label, {})
            counts[by] = counts.get(by, 0) + 1
    declared = book.declared()
    tools = {f"tool_faults[{i}]": f.tool for i, f in enumerate(book.scenario.tool_faults)}
    hints = {
        label: channel.wiring_hint(label, tools.get(label.split(" ", 1)[0])) for label in declared
    }
    out = []
    for cell in cells:
        own = by_cell.get(cell.id, [])
        fired = dict.fromkeys(cell.faults_fired)
        for interaction in own:
            fired.update(dict.fromkeys(interaction.fired))
        calls = tuple(call_record(i) for i in own)
        out.append(dataclasses.replace(cell, faults_fired=tuple(fired), calls=calls))
    proof = dataclasses.replace(
        info,
        declared=declared,
        matched=tuple(label for label in matched if label in declared),
        hints=hints,
        unapplied={label: why for label, why in unapplied.items() if label in declared},
        replaced={label: by for label, by in replaced.items() if label in declared},
        unscheduled={
            label: _outside_schedule(book, label, calls)
            for label, calls in outside.items()
            if label in declared and label not in matched
        },
        seen=seen_counts(interactions),
        unattributed=len(by_cell.get(UNATTRIBUTED, ())),
        unattributed_calls=tuple(
            call_record(i) for i in by_cell.get(UNATTRIBUTED, ())[:MAX_UNATTRIBUTED_CALLS]
        ),
    )
    return out, proof


def call_record(interaction: Interaction) -> CallRecord:
    """``interaction`` as its cell (or mutation) keeps it in the results."""
    return CallRecord(
        target=interaction.target.value,
        tool=interaction.tool,
        method=interaction.method,
        url=interaction.url,
        status=interaction.status,
        fired=interaction.fired,
        upstream_error=interaction.upstream_error,
        latency_ms=round(interaction.latency_ms, 3),
        invocation=invocation_of(interaction.cell_id),
        request=interaction.request,
        response=interaction.response,
    )


def seen_counts(interactions: Sequence[Interaction]) -> dict[str, int]:
    """What a scenario's calls were, counted by kind (:attr:`ScenarioInfo.seen`): ``tool
    NAME``, ``llm``, ``forward ORIGIN`` (a forward-proxy or ``CONNECT`` call no tool route
    matched), ``other``."""
    seen: dict[str, int] = {}
    for interaction in interactions:
        if interaction.target is Target.TOOL:
            kind = f"tool {interaction.tool}"
        elif interaction.target is Target.LLM:
            kind = "llm"
        else:
            parts = urlsplit(interaction.url)
            if parts.scheme in ("http", "https") and parts.netloc:
                kind = f"forward {parts.scheme}://{parts.netloc}"
            elif interaction.method == "CONNECT":
                kind = f"forward https://{interaction.url}"
            else:
                kind = "other"
        seen[kind] = seen.get(kind, 0) + 1
    return seen


NOT_DELIVERED = "fault not delivered: "
"""How the reason of a cell in an undelivered scenario starts."""


def judge(info: ScenarioInfo, cells: Sequence[CellResult]) -> tuple[ScenarioInfo, list[CellResult]]:
    """Delivery judged from a scenario's proof alone (SPEC §4, §10): a declared fault that no
    call matched (a context attack whose every matching call a fault answered in place of the
    tool or LLM included), or that matched a call but could not be applied to it, is not
    delivered, and then every scored cell of the scenario is ERRORED with the reason (the
    invariant's own verdict kept in ``checked``). Judging again — e.g. with the calls of every
    shard — first gives the cells their own verdicts back."""
    own = [
        cell
        if cell.checked is None
        else dataclasses.replace(
            cell,
            status=cell.checked,
            reason=cell.checked_reason or "",
            checked=None,
            checked_reason=None,
        )
        for cell in cells
    ]
    # a stopped run (Ctrl-C, max_invocations) leaves cells not run: the calls that would have
    # delivered a fault may be in them, so only a scenario that ran to the end is judged; and
    # a scenario whose cells never invoked the agent (all skipped, not run, or errored before
    # their first invocation, e.g. by a failed reset) proves nothing
    ran = any(cell.status.scored and cell.prompts for cell in own) and not any(
        cell.status is Status.NOT_RUN for cell in own
    )
    matched = set(info.matched)
    undelivered = tuple(
        label
        for label in info.declared
        if ran and (label not in matched or label in info.unapplied)
    )
    judged = dataclasses.replace(info, undelivered=undelivered)
    if not undelivered:
        return judged, own
    reason = "; ".join(f"{NOT_DELIVERED}{label}: {info.why(label)}" for label in undelivered)
    out = [
        dataclasses.replace(
            cell,
            status=Status.ERRORED,
            reason=reason,
            checked=cell.status,
            checked_reason=cell.reason,
        )
        if cell.status.scored
        else cell
        for cell in own
    ]
    return judged, out


_INVOCATION_SUFFIX = re.compile(r"#\d+\.\d+(?:\.\d+)?$")
"""``#RUN.PROMPT``, or ``#RUN.PROMPT.TURN`` for a conversation's turn."""


def invocation_of(attribution: str) -> str:
    """``RUN.PROMPT`` of an interaction's attribution (``cell#0.2`` → ``0.2``; a turn's
    ``cell#0.2.3`` → ``0.2.3``), else ""."""
    found = _INVOCATION_SUFFIX.search(attribution)
    return found.group(0)[1:] if found else ""


def _outside_schedule(book: FaultBook, label: str, calls: int) -> str:
    """Why a fault whose matching calls all came outside its schedule is not delivered."""
    s = book.scenario
    faults: dict[str, Scheduled] = {tool_fault_label(i, f): f for i, f in enumerate(s.tool_faults)}
    faults.update((llm_fault_label(i, f), f) for i, f in enumerate(s.llm_faults))
    faults.update((attack_label(i, a), a) for i, a in enumerate(s.context_attacks))
    fault = faults.get(label)
    acts = schedule_of(fault).describe() if fault is not None else "its schedule"
    made = f"{calls} matching call{'s' if calls != 1 else ''}"
    return f"the agent made at most {made} per invocation; the fault acts on {acts}"


def cell_of(attribution: str) -> str:
    """The cell id of an interaction's attribution (``cell#run.prompt`` → ``cell``; the cell
    id itself may hold a ``#``, e.g. a scenario named ``outage #2``)."""
    return _INVOCATION_SUFFIX.sub("", attribution)


class ProxyChannel:
    """Faults delivered by a chaos proxy (embedded or a service), driven over its control API."""

    exact_attribution = False

    def __init__(self, control: ProxyControl, mcp: Mapping[str, str] | None = None) -> None:
        self._control = control
        self._mcp = dict(mcp or {})
        self._timed = False
        self._traced = False

    @property
    def url(self) -> str:
        return self._control.url

    def activate(self, scenario: ActiveScenario) -> None:
        self._control.activate(scenario)
        self._timed = timed(scenario)

    def begin(self, invocation: str) -> None:
        # one control call per invocation only where a window or the trace id needs it
        if self._timed or self._traced:
            self._control.begin(invocation)

    def follow_traces(self) -> None:
        self._traced = True

    def interactions(self, scenario: str) -> list[Interaction]:
        return self._control.interactions(scenario=scenario)

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        self._control.forget(scenario, keep)

    def lost(self) -> str | None:
        lost = self._control.lost
        return lost_note(lost.get("dropped", 0), lost.get("bodies_dropped", 0))

    def wiring_hint(self, label: str, tool: str | None) -> str:
        url = self._control.url
        mcp = mcp_hint(self._mcp, tool, url)
        if mcp is not None:
            return mcp
        if tool is not None and tool != "*":
            return (
                f"the agent made no call to `{tool}` through flakestorm — is its base URL "
                f"for that tool pointed at the proxy ({url}/tools/{tool}), or its HTTP_PROXY "
                f"at {url} with proxy.tools.{tool} set?"
            )
        if (
            tool == "*"
            or "tool_faults" in label
            or any(a.value in label for a in TOOL_RESULT_ATTACKS)
        ):
            return (
                "the agent made no tool call through flakestorm — are its tool URLs pointed "
                f"at {url}/tools/<name>, or its HTTP_PROXY at {url}?"
            )
        return (
            "the agent made no LLM call through flakestorm — is its OPENAI_BASE_URL pointed "
            f"at {url}/llm/openai/v1 (or ANTHROPIC_BASE_URL at {url}/llm/anthropic)?"
        )


class WrapperChannel:
    """Faults delivered by wrapping a python agent's tools and LLM callable."""

    exact_attribution = True

    def __init__(self, wrapping: Wrapping) -> None:
        self._wrapping = wrapping

    def activate(self, scenario: ActiveScenario) -> None:
        self._wrapping.activate(scenario)

    def begin(self, invocation: str) -> None:
        self._wrapping.begin(invocation)

    def follow_traces(self) -> None:
        pass  # calls are attributed by context variable

    def interactions(self, scenario: str) -> list[Interaction]:
        return self._wrapping.log.snapshot(scenario)

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        self._wrapping.log.forget(scenario, keep)

    def lost(self) -> str | None:
        log = self._wrapping.log
        return lost_note(log.dropped, log.bodies_dropped)

    def wiring_hint(self, label: str, tool: str | None) -> str:
        site = self._wrapping.site(tool) if tool is not None else None
        if site is not None and site.cause:
            return (
                f"the agent made no call to `{tool}`, {site.kind}, wrapped from the inside — "
                f"{site.cause}, and did the model ask for the tool?"
            )
        if site is not None and site.held_by:
            return (
                f"the agent made no call to `{tool}` where it is named: {site.held_by} keeps "
                f"its own reference to that function as its tool `{tool}` — name the holder "
                f"in agent.tools (its tools are each wrapped by their own names)"
            )
        kind = self._wrapping.tool_kind(tool) if tool is not None else None
        if kind is not None:
            return (
                f"the agent made no call to `{tool}`, {kind} wrapped from the inside — is "
                "that object the one the agent gives its framework, and did the model ask "
                "for the tool?"
            )
        if tool is not None and tool != "*":
            return (
                f"the agent made no call to the wrapped tool `{tool}` — does it call it "
                f"through its module at call time (`import tools; tools.{tool}(...)`), not a "
                f"copy taken earlier with `from ... import {tool}`?"
            )
        if "llm_faults" in label or any(a.value in label for a in LLM_REQUEST_ATTACKS):
            return (
                "the agent made no call to the wrapped agent.llm callable — does it call it "
                "through its module at call time?"
            )
        return "the agent made no call to any wrapped tool (agent.tools / agent.tool_registry)"


class InProcessChannel(WrapperChannel):
    """Faults for a python agent on both paths (SPEC §10): the HTTP calls of the tools in
    ``routes`` (``proxy.tools``) through the in-process ``proxy`` the agent's HTTP clients are
    routed to (:mod:`flakestorm.chaos.routing`), everything else by the wrappers. The proxy
    logs into the wrappers' log, so a cell's calls stay in the order they were made; each
    routed request carries its invocation's cell, so attribution is exact."""

    exact_attribution = True

    def __init__(
        self,
        wrapping: Wrapping,
        proxy: ChaosProxy,
        routes: Mapping[str, str],
        mcp: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(wrapping)
        self._proxy = proxy
        self._routes = dict(routes)
        self._mcp = dict(mcp or {})
        self._timed = False

    def activate(self, scenario: ActiveScenario) -> None:
        super().activate(scenario)
        active = self._proxy.scenario
        if active is not None and dataclasses.replace(scenario, cell_id=active.cell_id) == active:
            self._proxy.declare_cell(scenario.cell_id)  # the same scenario, for another cell
        else:
            self._proxy.activate(scenario)
        self._timed = timed(scenario)

    def begin(self, invocation: str) -> None:
        super().begin(invocation)
        if self._timed:
            self._proxy.book.begin(invocation)

    def wiring_hint(self, label: str, tool: str | None) -> str:
        mcp = mcp_hint(self._mcp, tool, self._proxy.url)
        if mcp is not None:
            return mcp
        if tool is not None and tool in self._routes:
            return (
                f"the agent made no HTTP call under proxy.tools.{tool} ({self._routes[tool]}) "
                "— does the tool call that URL with requests, httpx, aiohttp or "
                "urllib.request.urlopen (flakestorm routes those in process; not an aiohttp "
                "session made before the run, nor an opener of its own), "
                "and did the model ask for the tool?"
            )
        return super().wiring_hint(label, tool)


def mcp_hint(servers: Mapping[str, str], tool: str | None, url: str) -> str | None:
    """Why no call reached ``tool`` when it is an MCP tool (``SERVER.TOOL``, SERVER one of
    ``proxy.mcp``: a URL, or ``stdio``): where the agent's MCP client must point; None for any
    other tool."""
    server, dot, name = (tool or "").partition(".")
    if not dot or server not in servers:
        return None
    if servers[server] == STDIO_SERVER:
        return (
            f"the agent made no call to MCP tool `{name}` of server `{server}` through "
            f"flakestorm — does its MCP configuration start the server as `flakestorm "
            f"mcp-stdio --name {server} -- <server command>`, with FLAKESTORM_PROXY_URL={url} "
            "in its environment, and did the model ask for the tool?"
        )
    return (
        f"the agent made no call to MCP tool `{name}` of server `{server}` through flakestorm "
        f"— is its MCP client's URL for `{server}` pointed at {url}/mcp/{server} (or its "
        f"HTTP_PROXY at {url}), and did the model ask for the tool?"
    )
