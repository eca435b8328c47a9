"""Fault delivery for a run: activate scenarios, read back interactions, prove delivery.

A :class:`Channel` is where faults reach the agent's dependencies: the chaos proxy for HTTP
agents (:class:`ProxyChannel`) or the python wrappers for python agents
(:class:`WrapperChannel`). The contract phase activates one scenario at a time on it, then
reads the scenario's interactions back and :func:`attach` turns them into per-cell proof:
the faults that fired in each cell and the calls the agent made, and — per scenario — the
declared faults that no matching call ever reached (SPEC §4: those make the scenario's cells
ERRORED with a message that says what is probably mis-wired).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from flakestorm.chaos.faults import (
    LLM_REQUEST_ATTACKS,
    TOOL_RESULT_ATTACKS,
    ActiveScenario,
    FaultBook,
)
from flakestorm.chaos.interactions import Interaction

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.control import ProxyControl
    from flakestorm.chaos.wrap import Wrapping
from flakestorm.config import Scenario
from flakestorm.results import CallRecord, CellResult, Status

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

    def wiring_hint(self, label: str, tool: str | None) -> str: ...


def attach(
    cells: Sequence[CellResult],
    interactions: Sequence[Interaction],
    book: FaultBook,
    channel: Channel,
) -> tuple[list[CellResult], tuple[str, ...]]:
    """Per-cell proof of what fired, and the scenario's undelivered faults.

    Returns the cells with ``faults_fired`` and ``calls`` filled in — and, when a declared
    fault was never delivered, every scored cell of the scenario ERRORED with the reason —
    plus the labels of the undelivered faults.
    """
    by_cell: dict[str, list[Interaction]] = {}
    matched: set[str] = set()
    for interaction in interactions:
        by_cell.setdefault(cell_of(interaction.cell_id), []).append(interaction)
        matched.update(interaction.matched)
    # a stopped run (Ctrl-C, max_invocations) leaves cells not run: the calls that would have
    # delivered a fault may be in them, so only a scenario that ran to the end is judged
    ran = any(cell.status.scored and cell.prompts for cell in cells) and not any(
        cell.status is Status.NOT_RUN for cell in cells
    )
    # a scenario whose cells never invoked the agent (all skipped, not run, or errored before
    # their first invocation, e.g. by a failed reset) proves nothing
    undelivered = tuple(label for label in book.declared() if label not in matched and ran)
    reason = ""
    if undelivered:
        s = book.scenario
        tools = {f"tool_faults[{i}]": f.tool for i, f in enumerate(s.tool_faults)}
        reasons = [
            f"fault not delivered: {label}: "
            + channel.wiring_hint(label, tools.get(label.split(" ", 1)[0]))
            for label in undelivered
        ]
        reason = "; ".join(reasons)
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
            )
            for i in own
        )
        updated = dataclasses.replace(cell, faults_fired=tuple(fired), calls=calls)
        if undelivered and cell.status.scored:
            updated = dataclasses.replace(updated, status=Status.ERRORED, reason=reason)
        out.append(updated)
    return out, undelivered


_INVOCATION_SUFFIX = re.compile(r"#\d+\.\d+$")


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

    def wiring_hint(self, label: str, tool: str | None) -> str:
        url = self._control.url
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

    def interactions(self, scenario: str) -> list[Interaction]:
        return self._wrapping.log.snapshot(scenario)

    def wiring_hint(self, label: str, tool: str | None) -> str:
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
