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
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from flakestorm.chaos.faults import (
    LLM_REQUEST_ATTACKS,
    TOOL_RESULT_ATTACKS,
    ActiveScenario,
    FaultBook,
    Target,
)
from flakestorm.chaos.interactions import Interaction

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.control import ProxyControl
    from flakestorm.chaos.wrappers.wrapping import Wrapping
from flakestorm.config import Scenario
from flakestorm.results import CallRecord, CellResult, ScenarioInfo, Status

CALM = "flakestorm:no-chaos"
"""The name of the pass-through scenario active outside chaos scenarios (baselines, checks)."""


def needs_delivery(scenario: Scenario) -> bool:
    """Whether ``scenario`` has faults that travel with the agent's tool or LLM calls."""
    return bool(
        scenario.tool_faults
        or scenario.llm_faults
        or any(
            a.type in TOOL_RESULT_ATTACKS or a.type in LLM_REQUEST_ATTACKS
            for a in scenario.context_attacks
        )
    )


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

    def interactions(self, scenario: str) -> list[Interaction]: ...

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        """Drop ``scenario``'s interactions (but those of the cells in ``keep``): they are in
        the results now, so a long run's interaction log stays small."""
        ...

    def wiring_hint(self, label: str, tool: str | None, seen: Sequence[Interaction]) -> str:
        """What is probably mis-wired when no call matched the fault ``label`` (on ``tool``),
        from what the channel saw in the scenario (``seen``)."""
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
    some call matched (``matched``), those that matched a call but could not be applied to it
    (``unapplied``, with why) and a wiring hint per declared label. Whether a fault was
    delivered is decided from these alone by :func:`judge`.
    """
    by_cell: dict[str, list[Interaction]] = {}
    matched: dict[str, None] = {}
    unapplied: dict[str, str] = {}
    for interaction in interactions:
        by_cell.setdefault(cell_of(interaction.cell_id), []).append(interaction)
        matched.update(dict.fromkeys(interaction.matched))
        for label, why in interaction.unapplied:
            unapplied.setdefault(label, why)
    declared = book.declared()
    tools = {f"tool_faults[{i}]": f.tool for i, f in enumerate(book.scenario.tool_faults)}
    hints = {
        label: channel.wiring_hint(label, tools.get(label.split(" ", 1)[0]), interactions)
        for label in declared
    }
    out = []
    for cell in cells:
        own = by_cell.get(cell.id, [])
        fired = dict.fromkeys(cell.faults_fired)
        for interaction in own:
            fired.update(dict.fromkeys(interaction.fired))
        calls = tuple(
            CallRecord(
                target=i.target.value,
                tool=i.tool,
                method=i.method,
                url=i.url,
                status=i.status,
                fired=i.fired,
                upstream_error=i.upstream_error,
                latency_ms=round(i.latency_ms, 3),
                invocation=invocation_of(i.cell_id),
                request=i.request,
                response=i.response,
            )
            for i in own
        )
        out.append(dataclasses.replace(cell, faults_fired=tuple(fired), calls=calls))
    proof = dataclasses.replace(
        info,
        declared=declared,
        matched=tuple(label for label in matched if label in declared),
        hints=hints,
        unapplied={label: why for label, why in unapplied.items() if label in declared},
    )
    return out, proof


NOT_DELIVERED = "fault not delivered: "
"""How the reason of a cell in an undelivered scenario starts."""


def judge(info: ScenarioInfo, cells: Sequence[CellResult]) -> tuple[ScenarioInfo, list[CellResult]]:
    """Delivery judged from a scenario's proof alone (SPEC §4, §10): a declared fault that no
    call matched, or that matched a call but could not be applied to it, is not delivered, and
    then every scored cell of the scenario is ERRORED with the reason (the invariant's own
    verdict kept in ``checked``). Judging again — e.g. with the
    calls of every shard — first gives the cells their own verdicts back."""
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
    reason = "; ".join(f"{NOT_DELIVERED}{label}: {_why(info, label)}" for label in undelivered)
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


def _why(info: ScenarioInfo, label: str) -> str:
    if label in info.unapplied:
        return f"it matched a call but could not be applied: {info.unapplied[label]}"
    return info.hints.get(label, "")


_INVOCATION_SUFFIX = re.compile(r"#\d+\.\d+$")


def invocation_of(attribution: str) -> str:
    """``RUN.PROMPT`` of an interaction's attribution (``cell#0.2`` → ``0.2``), else ""."""
    found = _INVOCATION_SUFFIX.search(attribution)
    return found.group(0)[1:] if found else ""


def cell_of(attribution: str) -> str:
    """The cell id of an interaction's attribution (``cell#run.prompt`` → ``cell``; the cell
    id itself may hold a ``#``, e.g. a scenario named ``outage #2``)."""
    return _INVOCATION_SUFFIX.sub("", attribution)


class ProxyChannel:
    """Faults delivered by a chaos proxy (embedded or a service), driven over its control API."""

    exact_attribution = False

    def __init__(self, control: ProxyControl) -> None:
        self._control = control

    @property
    def url(self) -> str:
        return self._control.url

    def activate(self, scenario: ActiveScenario) -> None:
        self._control.activate(scenario)

    def interactions(self, scenario: str) -> list[Interaction]:
        return self._control.interactions(scenario=scenario)

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        self._control.forget(scenario, keep)

    def wiring_hint(self, label: str, tool: str | None, seen: Sequence[Interaction]) -> str:
        url = self._control.url
        tool_side = tool is not None or any(
            part in label for part in ("tool_faults", *(a.value for a in TOOL_RESULT_ATTACKS))
        )
        if not tool_side:
            return (
                f"the agent made no LLM call through flakestorm ({_saw(seen, Target.LLM)}) — is "
                f"its OPENAI_BASE_URL pointed at {url}/llm/openai/v1 (or ANTHROPIC_BASE_URL at "
                f"{url}/llm/anthropic)?"
            )
        name = tool if tool is not None and tool != "*" else None
        lead = (
            f"the agent made no call to `{name}` through flakestorm"
            if name is not None
            else "the agent made no tool call through flakestorm"
        )
        unmapped = _unmapped(seen)
        if unmapped:
            origin, count = next(iter(unmapped.items()))
            others = sum(unmapped.values()) - count
            more = f" (and {others} to {len(unmapped) - 1} other hosts)" if others else ""
            route = f"proxy.tools.{name or '<name>'}: {origin}"
            return (
                f"{lead}: the proxy saw {_calls(count, 'forward-proxy call')} to "
                f"{origin.partition('://')[2]}{more}, none mapped to a tool: add it to "
                f"proxy.tools ({route})"
            )
        if name is not None:
            return (
                f"{lead} ({_saw(seen, Target.TOOL)}) — is its base URL for that tool pointed "
                f"at the proxy ({url}/tools/{name}), or its HTTP_PROXY at {url} with "
                f"proxy.tools.{name} set?"
            )
        return (
            f"{lead} ({_saw(seen, Target.TOOL)}) — are its tool URLs pointed at "
            f"{url}/tools/<name>, or its HTTP_PROXY at {url}?"
        )


def _calls(n: int, what: str = "call") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _saw(seen: Sequence[Interaction], wanted: Target, who: str = "the proxy") -> str:
    """What ``who`` (the channel) saw instead of a call of the ``wanted`` kind, in a few
    words."""
    if not seen:
        return f"{who} saw no call from it in this scenario"
    kinds: dict[str, int] = {}
    for interaction in seen:
        if interaction.target is Target.TOOL:
            kind = f"to tool `{interaction.tool}`"
        else:
            kind = "to an LLM" if interaction.target is Target.LLM else "forward-proxy"
        kinds[kind] = kinds.get(kind, 0) + 1
    listed = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    return f"{who} saw {_calls(len(seen))} ({listed}), none {_WANTED[wanted]}"


_WANTED = {
    Target.LLM: "to an LLM endpoint (…/chat/completions, /completions, /responses, /messages)",
    Target.TOOL: "to this tool",
    Target.OTHER: "",
}


def _unmapped(seen: Sequence[Interaction]) -> dict[str, int]:
    """Forward-proxy and ``CONNECT`` calls no tool route matched, by origin, most first."""
    origins: dict[str, int] = {}
    for interaction in seen:
        if interaction.target is not Target.OTHER:
            continue
        parts = urlsplit(interaction.url)
        if parts.scheme in ("http", "https") and parts.netloc:
            origin = f"{parts.scheme}://{parts.netloc}"
        elif interaction.method == "CONNECT":
            origin = f"https://{interaction.url}"
        else:
            continue
        origins[origin] = origins.get(origin, 0) + 1
    return dict(sorted(origins.items(), key=lambda item: -item[1]))


class WrapperChannel:
    """Faults delivered by wrapping a python agent's tools and LLM callable."""

    exact_attribution = True

    def __init__(self, wrapping: Wrapping) -> None:
        self._wrapping = wrapping

    def activate(self, scenario: ActiveScenario) -> None:
        self._wrapping.activate(scenario)

    def interactions(self, scenario: str) -> list[Interaction]:
        return self._wrapping.log.snapshot(scenario)

    def forget(self, scenario: str, keep: Collection[str] = ()) -> None:
        self._wrapping.log.forget(scenario, keep)

    def wiring_hint(self, label: str, tool: str | None, seen: Sequence[Interaction]) -> str:
        kind = self._wrapping.tool_kind(tool) if tool is not None else None
        if kind is not None:
            return (
                f"the agent made no call to `{tool}`, {kind} wrapped from the inside "
                f"({_saw(seen, Target.TOOL, 'the wrappers')}) — is that object the one the "
                "agent gives its framework, and did the model ask for the tool?"
            )
        if tool is not None and tool != "*":
            return (
                f"the agent made no call to the wrapped tool `{tool}` "
                f"({_saw(seen, Target.TOOL, 'the wrappers')}) — does it call it "
                f"through its module at call time (`import tools; tools.{tool}(...)`), not a "
                f"copy taken earlier with `from ... import {tool}`?"
            )
        if "llm_faults" in label or any(a.value in label for a in LLM_REQUEST_ATTACKS):
            return (
                "the agent made no call to the wrapped agent.llm callable "
                f"({_saw(seen, Target.LLM, 'the wrappers')}) — does it call it through its "
                "module at call time?"
            )
        return (
            "the agent made no call to any wrapped tool (agent.tools / agent.tool_registry; "
            f"{_saw(seen, Target.TOOL, 'the wrappers')})"
        )
