"""The plan of a run (SPEC §13): what it will do, made from the config — and, for a python agent,
from its source, read the one way — before anything runs. ``validate`` prints it (``--json``
as data) and the run reads the same decisions, each made in one place:

- the channel its faults take (:func:`flakestorm.chaos.choice.choose`);
- whether the agent keeps a session per cell (:func:`flakestorm.agents.source.sessions_of`);
- per phase, which scenarios run concurrently and which one at a time, and why
  (:func:`flakestorm.chaos.ordering.order_dependence`, a configured reset);
- per phase, the invocations its command (``contract run``, ``run --chaos-only``, ``run``,
  ``replay run``) sends the agent, readiness checks aside, by the rules the phases send them
  with (:mod:`flakestorm.engine.counting`); and the invocations of ``ci``, which runs every
  configured phase in report order (only its first phase makes the stateful check). Where the
  number cannot be known before the run (the source does not say whether the agent takes
  ``session_id``, sessions imported from LangSmith, a budget), the plan says so and why
  instead of guessing.

Light to import: nothing here starts, imports or calls the agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flakestorm.agents.source import module_file, search_path, sessions_of
from flakestorm.chaos.choice import ChannelChoice, choose
from flakestorm.chaos.ordering import order_dependence
from flakestorm.config import Config, PhaseName, Scenario
from flakestorm.engine.counting import (
    MatrixCount,
    count_invocations,
    mutation_sends,
    scenarios_fly,
)
from flakestorm.engine.plan import Plan, chaos_contract, plan_for
from flakestorm.errors import Problem, UsageError

CONCURRENT = "concurrent"
ONE_AT_A_TIME = "one at a time"
UNLESS_ATTRIBUTED = "one at a time unless attributed"
TOGETHER = "in flight together"
TOGETHER_IF_ATTRIBUTED = "in flight together if attributed"
ONE_AFTER_ANOTHER = "one after another"

CONTRACT, CHAOS, MUTATION, REPLAY = (
    PhaseName.CONTRACT.value,
    PhaseName.CHAOS.value,
    PhaseName.MUTATION.value,
    PhaseName.REPLAY.value,
)
PHASE_ORDER = (CONTRACT, CHAOS, MUTATION, REPLAY)
"""The phases in the order a run (``ci``) runs and reports them (the registry's order)."""


@dataclass(frozen=True)
class ScenarioRuns:
    """How a scenario's cells run, and why."""

    name: str
    runs: str
    why: str


@dataclass(frozen=True)
class PhaseCount:
    """What one phase's command will send the agent."""

    phase: str
    cells: int
    invocations: int
    exact: bool = True
    why: str = ""
    """Why the number is not exact (empty when it is)."""
    scenarios: tuple[ScenarioRuns, ...] = ()
    matrix: MatrixCount | None = None
    """The matrix count behind ``invocations`` (contract and chaos phases)."""
    sends: int = 0
    """The mutation phase: the requests one run of every mutation sends."""
    baselines: int = 0
    """The mutation phase: its chaos-free baselines (``behavior_unchanged`` ``auto``)."""
    recorded: int = 0
    """The replay phase: the tool responses its sessions recorded."""
    flight: ScenarioRuns | None = None
    """How the matrix's scenarios run relative to each other (SPEC §9; its ``name`` is
    ``scenarios``): all in flight together, or one after another, and why; None with fewer
    than two scenarios."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cells": self.cells,
            "invocations": self.invocations,
            "exact": self.exact,
        }
        if self.why:
            out["why"] = self.why
        if self.matrix is not None:
            m = self.matrix
            out["parts"] = {
                "prompts": m.prompt_runs * m.repeat,
                "baselines": m.baselines,
                "stateful_check": m.detection,
                "forwarding_probe": m.probe,
            }
        if self.scenarios:
            out["scenarios"] = [
                {"name": s.name, "runs": s.runs, "why": s.why} for s in self.scenarios
            ]
        if self.flight is not None:
            out["flight"] = {"runs": self.flight.runs, "why": self.flight.why}
        return out


@dataclass(frozen=True)
class RunPlan:
    """The plan of a run of every configured phase (``ci``), and of each phase's command."""

    channel: ChannelChoice
    sessions: bool | None
    """Whether the agent keeps a session per cell; None: its source does not say (the run
    reads the imported callable)."""
    reset: bool
    """A reset before each cell (``agent.reset_endpoint`` / ``reset_function``, no session)."""
    phases: Mapping[str, PhaseCount]
    ci: PhaseCount
    """Every configured phase in one run (``flakestorm ci``)."""
    warnings: tuple[str, ...] = ()

    def as_json(self, warnings: tuple[str, ...] = ()) -> dict[str, Any]:
        return {
            "channel": {
                "kind": self.channel.kind.value,
                "description": self.channel.describe(),
            },
            "sessions": self.sessions,
            "reset": self.reset,
            "warnings": [*warnings, *self.warnings],
            "phases": {name: count.as_json() for name, count in self.phases.items()},
            "ci": self.ci.as_json(),
        }


def plan_run(config: Config, base_dir: Path) -> RunPlan:
    """The plan of ``config`` (its files relative to ``base_dir``). Raises
    :class:`UsageError` for what no run of it could do (a python agent with ``proxy.url`` and
    routes, say)."""
    sessions = sessions_of(config.agent, base_dir)
    reset = not sessions and bool(config.agent.reset_endpoint or config.agent.reset_function)
    notes: list[str] = []
    if sessions is None and _has_source(config, base_dir):  # else: the run's import error
        notes.append(
            f'whether "{config.agent.endpoint}" takes `session_id` is read when the run imports '
            "it (its source does not say): the invocations are counted as if it does not"
        )
    scenarios: list[Scenario] = []
    matrices: dict[str, Plan] = {}
    if config.contract is not None:
        matrices[CONTRACT] = plan_for(config, config.contract)
    if config.chaos is not None and config.golden_prompts:
        matrices[CHAOS] = plan_for(config, chaos_contract(config))
    for matrix in matrices.values():
        scenarios += matrix.scenarios
    phases: dict[str, PhaseCount] = {}
    for name, matrix in matrices.items():
        phases[name] = _matrix_count(name, matrix, config, sessions, reset, first=True)
    if config.mutations is not None:
        phases[MUTATION] = _mutation_count(config, bool(sessions))
    if config.replays is not None:
        phases[REPLAY] = _replay_count(config, base_dir)
    chaos = any(s.needs_delivery for s in scenarios) or config.replays is not None
    channel = choose(config, chaos)
    if notes:
        phases = {name: _inexact(count, notes[0]) for name, count in phases.items()}
    ci = _ci(phases, matrices, config, sessions, reset)
    return RunPlan(channel, sessions, reset, phases, ci, tuple(notes))


def _has_source(config: Config, base_dir: Path) -> bool:
    """Whether a python agent's module has a source file to read (an agent that cannot be
    imported is the run start's error to report, not a count to qualify)."""
    module = config.agent.endpoint.partition(":")[0]
    return module_file(module, [base_dir, *search_path()]) is not None


def _inexact(count: PhaseCount, why: str) -> PhaseCount:
    if count.phase == REPLAY:  # a replayed session is sent as recorded, sessions or not
        return count
    joined = "; ".join(w for w in (count.why, why) if w)
    return dataclasses.replace(count, exact=False, why=joined)


def _budgeted(count: PhaseCount, config: Config) -> PhaseCount:
    budget = config.advanced.max_invocations
    if budget is None or count.invocations <= budget:
        return count
    why = (
        f"advanced.max_invocations = {budget} stops the run after {budget} of "
        f"{count.invocations} invocations"
    )
    return dataclasses.replace(count, invocations=budget, exact=False, why=why)


def _matrix_count(
    name: str, plan: Plan, config: Config, sessions: bool | None, reset: bool, first: bool
) -> PhaseCount:
    chaos = any(s.needs_delivery for s in plan.scenarios)
    choice = choose(config, chaos)
    count = count_invocations(
        plan,
        config,
        first=first,
        sessions=bool(sessions),
        exact_attribution=choice.exact_attribution,
    )
    runs = tuple(_runs(s, choice, reset) for s in plan.scenarios)
    phase = PhaseCount(name, count.cells, count.invocations, True, "", runs, count)
    flight = _flight(plan, choice, reset)
    return _budgeted(dataclasses.replace(phase, flight=flight), config)


def _flight(plan: Plan, choice: ChannelChoice, reset: bool) -> ScenarioRuns | None:
    """How the matrix's scenarios run relative to each other, as ``run_matrix`` decides
    (:func:`flakestorm.engine.phases.matrix.in_flight`)."""
    chaos = [s for s in plan.scenarios if s.needs_delivery]
    if len(plan.scenarios) < 2 or not chaos:
        return None
    flies = scenarios_fly(choice.exact_attribution, None, reset)
    if flies is False:
        return ScenarioRuns(
            "scenarios",
            ONE_AFTER_ANOTHER,
            "the agent is reset before each cell (a reset is "
            "global), so each call is put down to the cell declared active",
        )
    if flies:
        return ScenarioRuns(
            "scenarios",
            TOGETHER,
            "the wrappers attribute each call to its cell, so each is "
            "decided by its own scenario's faults",
        )
    return ScenarioRuns(
        "scenarios",
        TOGETHER_IF_ATTRIBUTED,
        "each call is decided by its own scenario's "
        "faults when the forwarding probe finds that the agent forwards attribution (the cell "
        "header, baggage or the trace context); else (or with a proxy service of an earlier "
        "flakestorm) one after another",
    )


def _runs(scenario: Scenario, choice: ChannelChoice, reset: bool) -> ScenarioRuns:
    """How ``scenario``'s cells run (SPEC §4.2, §5)."""
    if reset:
        return ScenarioRuns(
            scenario.name,
            ONE_AT_A_TIME,
            "the agent is reset before each cell (a reset is global)",
        )
    if not scenario.needs_delivery:
        return ScenarioRuns(scenario.name, CONCURRENT, "no fault travels with the agent's calls")
    if choice.exact_attribution:
        return ScenarioRuns(
            scenario.name, CONCURRENT, "the wrappers attribute each call to its cell"
        )
    order = order_dependence(scenario)
    if not order:
        return ScenarioRuns(
            scenario.name,
            CONCURRENT,
            "its faults do not depend on call order (its calls are reported per cell when the "
            "agent forwards attribution, else per scenario)",
        )
    return ScenarioRuns(
        scenario.name,
        UNLESS_ATTRIBUTED,
        f"its faults depend on call order ({'; '.join(order)}): its cells run one at a time "
        "unless the forwarding probe finds that the agent forwards attribution",
    )


def _mutation_count(config: Config, sessions: bool) -> PhaseCount:
    sends, baselines = mutation_sends(config, sessions)
    from flakestorm.mutations.generation import slots

    invocations = sends * config.advanced.repeat + baselines
    counted = PhaseCount(
        MUTATION, len(slots(config)), invocations, sends=sends, baselines=baselines
    )
    return _budgeted(counted, config)


def _replay_count(config: Config, base_dir: Path) -> PhaseCount:
    from flakestorm.loader.replays import resolve_sessions

    found, _ = resolve_sessions(config, base_dir, lambda path, m: Problem("", 1, 1, "", m))
    invocations = sum(len(s.session.steps) for s in found)
    recorded = sum(len(s.session.all_tool_responses) for s in found)
    count = PhaseCount(REPLAY, len(found), invocations, recorded=recorded)
    sources = config.replays.sources if config.replays is not None else []
    if sources:
        imported = f"plus the sessions imported from {len(sources)} LangSmith source(s) at run time"
        count = dataclasses.replace(count, exact=False, why=imported)
    return _budgeted(count, config)


def _ci(
    phases: Mapping[str, PhaseCount],
    matrices: Mapping[str, Plan],
    config: Config,
    sessions: bool | None,
    reset: bool,
) -> PhaseCount:
    """One run of every configured phase, in order: only the first makes the stateful check."""
    total = cells = 0
    exact, why = True, []
    for position, name in enumerate(n for n in PHASE_ORDER if n in phases):
        count = phases[name]
        if name in matrices and position:
            later = _matrix_count(name, matrices[name], config, sessions, reset, first=False)
            count = later if count.exact else _inexact(later, count.why)
        total += count.invocations
        cells += count.cells
        if not count.exact:
            exact = False
            why.append(f"{name}: {count.why}")
    counted = PhaseCount("ci", cells, total, exact, "; ".join(why))
    return _budgeted(counted, config) if exact else counted


def plan_or_problem(config: Config, base_dir: Path) -> RunPlan | str:
    """The plan, or why no run of the config could be made (a usage error's message)."""
    try:
        return plan_run(config, base_dir)
    except UsageError as exc:
        return str(exc)
