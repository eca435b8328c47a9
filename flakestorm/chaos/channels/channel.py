"""The channels a run's faults reach the agent through (SPEC §4.2): the chaos proxy, embedded or a
service, driven over its control API (:class:`ProxyChannel`, http agents); the wrappers around a
python agent's callables (:class:`WrapperChannel`); and both at once, the wrappers and the proxy
flakestorm runs in process for a python agent's HTTP tool calls (:class:`InProcessChannel`).

A channel activates a scenario, reads back the calls the agent made, and says, for a fault no
call reached, where the agent's wiring is probably wrong. Which channel a run opens is decided
once from the config: :mod:`flakestorm.chaos.channels.choice`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from flakestorm.chaos.delivery.interactions import Interaction, lost_note
from flakestorm.chaos.faults.decisions import (
    LLM_REQUEST_ATTACKS,
    TOOL_RESULT_ATTACKS,
    ActiveScenario,
    timed,
)
from flakestorm.config.contract import STDIO_SERVER
from flakestorm.results.delivery_reasons import calls

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.control import ProxyControl
    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.chaos.wrappers.wrapping import Wrapping


class Channel(Protocol):
    """Where faults are delivered."""

    exact_attribution: bool
    """Whether every call is attributed to its cell whatever the concurrency."""
    flies: bool
    """Whether scenarios can be put in flight together (:meth:`fly`): an older proxy service
    cannot."""

    def activate(self, scenario: ActiveScenario) -> None: ...

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        """Put ``scenarios`` in flight together (SPEC §9, :mod:`flakestorm.chaos.faults.flight`):
        each call is decided by the scenario of the cell (``cells``: cell id -> scenario) its
        invocation is of; :meth:`activate` lands them."""
        ...

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

    def wiring_hint(self, label: str, tool: str | None, scenario: str = "") -> str:
        """Why no call of ``scenario`` matched the fault ``label`` (on ``tool``), as far as
        the channel can tell: what is probably mis-wired."""
        ...

    def lost(self) -> str | None:
        """The run's warning when the channel's interaction log did not keep every call whole
        (:func:`~flakestorm.chaos.delivery.interactions.lost_note`); None when it did."""
        ...


class ProxyChannel:
    """Faults delivered by a chaos proxy (embedded or a service), driven over its control API."""

    exact_attribution = False

    def __init__(
        self, control: ProxyControl, mcp: Mapping[str, str] | None = None, flies: bool = True
    ) -> None:
        self.flies = flies
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

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        self._control.fly(scenarios, cells)
        self._timed = any(timed(s) for s in scenarios)

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

    def wiring_hint(self, label: str, tool: str | None, scenario: str = "") -> str:
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
    flies = True

    def __init__(self, wrapping: Wrapping) -> None:
        self._wrapping = wrapping

    def activate(self, scenario: ActiveScenario) -> None:
        self._wrapping.activate(scenario)

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        self._wrapping.fly(scenarios, cells)

    def begin(self, invocation: str) -> None:
        self._wrapping.begin(invocation)

    def follow_traces(self) -> None:
        pass  # calls are attributed by context variable

    def interactions(self, scenario: str) -> list[Interaction]:
        return self._wrapping.log.snapshot(scenario)

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        self._wrapping.log.forget(scenario, keep)
        self._wrapping.sdk_watch.forget(scenario)

    def lost(self) -> str | None:
        log = self._wrapping.log
        return lost_note(log.dropped, log.bodies_dropped)

    def wiring_hint(self, label: str, tool: str | None, scenario: str = "") -> str:
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
            called = self._wrapping.sdk_watch.called(scenario)
            if called:
                method, count = called[0]
                return (
                    f"the agent made no call to the wrapped agent.llm method, but made "
                    f"{calls(count)} to `{method}` of the same SDK in this scenario (counted, "
                    "never faulted): its framework uses that method — name it in agent.llm"
                )
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
        same = (
            active is not None and dataclasses.replace(scenario, cell_id=active.cell_id) == active
        )
        if same and self._proxy.flight is None:
            self._proxy.declare_cell(scenario.cell_id)  # the same scenario, for another cell
        else:
            self._proxy.activate(scenario)
        self._timed = timed(scenario)

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        super().fly(scenarios, cells)
        self._proxy.fly(scenarios, cells)
        self._timed = any(timed(s) for s in scenarios)

    def begin(self, invocation: str) -> None:
        super().begin(invocation)
        if self._timed:
            self._proxy.begin(invocation)

    def wiring_hint(self, label: str, tool: str | None, scenario: str = "") -> str:
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
        return super().wiring_hint(label, tool, scenario)


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
