"""The plan of a run (SPEC §13): what it will do, made from the config — and, for a python agent,
from its source, read the one way — before anything runs. ``validate`` prints it (``--json``
as data) and the run reads the same decisions, each made in one place:

- the channel its faults take (:func:`flakestorm.chaos.channels.choice.choose`);
- whether the agent keeps a session per cell (:func:`flakestorm.agents.source.sessions_of`);
- per phase, which scenarios run concurrently and which one at a time, and why
  (:func:`flakestorm.chaos.faults.ordering.order_dependence`, a configured reset);
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
from flakestorm.chaos.channels.choice import ChannelChoice, choose, undeliverable
from flakestorm.chaos.faults.ordering import order_dependence
from flakestorm.config import AgentType, Config, PhaseName, Scenario
from flakestorm.engine.counting import MatrixCount, count_invocations, mutation_sends, scenarios_fly
from flakestorm.engine.matrix_plan import MatrixPlan, chaos_contract, plan_for
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
    order: tuple[str, ...] = ()
    """Why its faults depend on call order (``runs`` is one at a time unless attributed)."""


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
    channel: ChannelChoice | None = None
    """``validate``'s plan: the channel of this phase's own command, when it is not the
    plan's (the channel of every configured phase in one run)."""

    def scenario(self, name: str) -> ScenarioRuns:
        """How the scenario ``name`` runs."""
        return next(s for s in self.scenarios if s.name == name)

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
        if self.channel is not None:
            out["channel"] = _channel_json(self.channel)
        return out


def _channel_json(channel: ChannelChoice) -> dict[str, str]:
    return {"kind": channel.kind.value, "description": channel.describe()}


@dataclass(frozen=True)
class Command:
    """What a command runs: its phases in report order (``contract run``: the contract
    phase; ``ci``: every configured one), a built-in chaos profile in place of the top-level
    ``chaos`` (``--chaos-profile``), and whether it records a cassette (``--record``)."""

    phases: tuple[str, ...]
    chaos_profile: str | None = None
    record: bool = False
    ci: bool = False
    """The command is ``ci``: the plan records the total of its phases as ``ci``."""
    others: tuple[Scenario, ...] = ()
    """The scenarios of phases registered beside the built-in ones (the plan knows their
    work only from their own plans)."""
    channel_wanted: bool = False
    """Such a phase needs the fault channel without a chaos scenario."""


@dataclass(frozen=True)
class RunPlan:
    """The plan of a run: ``validate``'s (every configured phase, each as its own command
    runs it, and ``ci``) or one command's, which the run executes and records."""

    channel: ChannelChoice
    sessions: bool | None
    """Whether the agent keeps a session per cell; None: its source does not say (the run
    reads the imported callable and plans again with what it takes)."""
    reset: bool
    """A reset before each cell (``agent.reset_endpoint`` / ``reset_function``, no session)."""
    phases: Mapping[str, PhaseCount]
    """``validate``: each configured phase as its own command sends it; a command's plan: its
    phases as that command sends them (only the first makes the stateful check)."""
    ci: PhaseCount | None
    """Every configured phase in one run (``flakestorm ci``); None in a plan of another
    command."""
    warnings: tuple[str, ...] = ()
    command: Command | None = None
    """The command planned; None for ``validate``'s plan."""

    def phase(self, name: str) -> PhaseCount | None:
        """How the phase ``name`` runs (None for a phase the plan does not know: a phase
        registered beside the built-in ones)."""
        return self.phases.get(name)

    def as_json(self, warnings: tuple[str, ...] = ()) -> dict[str, Any]:
        out = {
            "channel": _channel_json(self.channel),
            "sessions": self.sessions,
            "reset": self.reset,
            "warnings": [*warnings, *self.warnings],
            "phases": {name: count.as_json() for name, count in self.phases.items()},
        }
        if self.ci is not None:
            out["ci"] = self.ci.as_json()
        return out


def plan_run(
    config: Config,
    base_dir: Path,
    command: Command | None = None,
    imported_sessions: bool | None = None,
) -> RunPlan:
    """The plan of ``config`` (its files relative to ``base_dir``): of ``command``'s run, or
    (``validate``, no command) of every configured phase's own command and of ``ci``.
    ``imported_sessions``: whether the imported agent takes ``session_id``, for the run of an
    agent whose source does not say. Raises :class:`UsageError` for what no run of it could do
    (a python agent with ``proxy.url`` and routes, a fault of ``--chaos-profile`` a python
    agent cannot be given)."""
    sessions = sessions_of(config.agent, base_dir)
    if sessions is None:
        sessions = imported_sessions
    reset = not sessions and bool(config.agent.reset_endpoint or config.agent.reset_function)
    notes: list[str] = []
    if sessions is None and _has_source(config, base_dir):  # else: the run's import error
        notes.append(
            f'whether "{config.agent.endpoint}" takes `session_id` is read when the run imports '
            "it (its source does not say): the invocations are counted as if it does not"
        )
    facts = _Facts(config, base_dir, sessions, reset, notes[0] if notes else "")
    everything = Command(configured(config), ci=True)
    if MUTATION in (command or everything).phases:
        notes += _left_out(config)
    if command is not None:
        channel, phases = _counted(facts, command)
        ci = _total(phases, config) if command.ci else None
        return RunPlan(channel, sessions, reset, phases, ci, tuple(notes), command)
    channel, runs = _counted(facts, everything)
    phases = {}
    for name in everything.phases:  # each phase's own command, and its channel when other
        own, counted = _counted(facts, Command((name,)))
        phases[name] = (
            counted[name] if own == channel else dataclasses.replace(counted[name], channel=own)
        )
    return RunPlan(channel, sessions, reset, phases, _total(runs, config), tuple(notes))


def _left_out(config: Config) -> list[str]:
    """The mutation types ``mutations.count`` leaves out (they are dealt round-robin)."""
    from flakestorm.mutations.generation import left_out

    mutations = config.mutations
    skipped = left_out(config) if mutations is not None else []
    if mutations is None or not skipped:
        return []
    names = ", ".join(k.value for k in skipped)
    types = f"{len(skipped)} type{'' if len(skipped) == 1 else 's'}"
    return [
        f"mutations.count {mutations.count} per golden prompt leaves out {types}: {names} "
        "(types are dealt round-robin; raise count to at least the number of types, or list "
        "fewer types)"
    ]


def configured(config: Config) -> tuple[str, ...]:
    """The phases a config configures, in report order (the chaos phase needs golden
    prompts to send)."""
    present = {
        CONTRACT: config.contract is not None,
        CHAOS: config.chaos is not None and bool(config.golden_prompts),
        MUTATION: config.mutations is not None,
        REPLAY: config.replays is not None,
    }
    return tuple(name for name in PHASE_ORDER if present[name])


@dataclass(frozen=True)
class _Facts:
    """What every count of a plan reads beyond the command."""

    config: Config
    base_dir: Path
    sessions: bool | None
    reset: bool
    undecided: str
    """Why the counts are not exact (the source does not say whether the agent keeps
    sessions); empty when they are."""


def _counted(facts: _Facts, command: Command) -> tuple[ChannelChoice, dict[str, PhaseCount]]:
    """The channel of ``command``'s run and each of its phases as that run sends it (only its
    first phase makes the stateful check)."""
    config = facts.config
    matrices: dict[str, MatrixPlan] = {}
    if CONTRACT in command.phases and config.contract is not None:
        matrices[CONTRACT] = plan_for(config, config.contract)
    if CHAOS in command.phases:
        profile = None
        if command.chaos_profile:
            from flakestorm.loader.profiles import load_profile

            profile = load_profile(command.chaos_profile)
        if profile is not None or config.chaos is not None:
            matrices[CHAOS] = plan_for(config, chaos_contract(config, profile))
    scenarios = [s for matrix in matrices.values() for s in matrix.scenarios]
    # the replay phase serves recorded responses on the channel, and every tool call of a
    # session must reach it (one the session did not record is a replay miss); the mutation
    # phase records each mutation's calls through the wrappers
    chaos = (
        any(s.needs_delivery for s in (*scenarios, *command.others))
        or REPLAY in command.phases
        or (MUTATION in command.phases and wraps(config))
        or command.channel_wanted
        or any(matrix.watched for matrix in matrices.values())
    )
    for scenario in (*scenarios, *command.others) if chaos else ():
        lacks = undeliverable(config.agent, config.proxy, scenario)
        if lacks:  # a scenario validate could not see (--chaos-profile)
            raise UsageError(f"scenario {scenario.name!r} {lacks[0][1]}")
    channel = choose(config, chaos, record=command.record)
    phases: dict[str, PhaseCount] = {}
    for position, name in enumerate(command.phases):
        if name in matrices:
            phases[name] = _matrix_count(name, matrices[name], facts, channel, not position)
        elif name == MUTATION and config.mutations is not None:
            phases[name] = _mutation_count(config, bool(facts.sessions))
        elif name == REPLAY and config.replays is not None:
            phases[name] = _replay_count(config, facts.base_dir)
    if facts.undecided:
        phases = {name: _inexact(count, facts.undecided) for name, count in phases.items()}
    return channel, phases


def wraps(config: Config) -> bool:
    """Whether the mutation phase opens the wrappers: a python agent with tools or an LLM
    callable, so the calls of each mutation are recorded."""
    agent = config.agent
    return agent.type is AgentType.PYTHON and bool(agent.tools or agent.tool_registry or agent.llm)


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
    name: str, plan: MatrixPlan, facts: _Facts, channel: ChannelChoice, first: bool
) -> PhaseCount:
    """A matrix phase as a run on ``channel`` sends it (``first``: as the run's first phase)."""
    count = count_invocations(
        plan,
        facts.config,
        first=first,
        sessions=bool(facts.sessions),
        exact_attribution=channel.exact_attribution,
    )
    runs = tuple(_runs(s, channel, facts.reset, plan) for s in plan.scenarios)
    flight = _flight(plan, channel, facts.reset)
    phase = PhaseCount(name, count.cells, count.invocations, True, "", runs, count, flight=flight)
    return _budgeted(phase, facts.config)


def count_matrix(
    name: str, plan: MatrixPlan, run: RunPlan, config: Config, first: bool
) -> PhaseCount:
    """A matrix phase the plan does not know (a phase registered beside the built-in ones)
    counted by the same rules, on the plan's channel."""
    facts = _Facts(config, Path("."), run.sessions, run.reset, "")
    return _matrix_count(name, plan, facts, run.channel, first)


def _flight(plan: MatrixPlan, channel: ChannelChoice, reset: bool) -> ScenarioRuns | None:
    """How the matrix's scenarios run relative to each other (SPEC §9): None with fewer than
    two, or when none is activated on the channel (no chaos, and a channel that cannot
    attribute calls itself)."""
    chaos = any(plan.recorded(s) for s in plan.scenarios)
    if len(plan.scenarios) < 2 or not (chaos or channel.exact_attribution):
        return None
    flies = scenarios_fly(channel.exact_attribution, None, reset)
    first = ""
    if plan.compared_with is not None:
        first = (
            f" ({plan.compared_with!r}, the scenario without faults max_amplification compares "
            "with, runs first)"
        )
    if flies is False:
        return ScenarioRuns(
            "scenarios",
            ONE_AFTER_ANOTHER,
            "the agent is reset before each cell (a reset is "
            f"global), so each call is put down to the cell declared active{first}",
        )
    if flies:
        return ScenarioRuns(
            "scenarios",
            TOGETHER,
            "the wrappers attribute each call to its cell, so each is "
            f"decided by its own scenario's faults{first}",
        )
    return ScenarioRuns(
        "scenarios",
        TOGETHER_IF_ATTRIBUTED,
        "each call is decided by its own scenario's "
        "faults when the forwarding probe finds that the agent forwards attribution (the cell "
        "header, baggage or the trace context); else (or with a proxy service of an earlier "
        f"flakestorm) one after another{first}",
    )


def _runs(scenario: Scenario, choice: ChannelChoice, reset: bool, plan: MatrixPlan) -> ScenarioRuns:
    """How ``scenario``'s cells run (SPEC §4.2, §5, §15)."""
    if reset:
        return ScenarioRuns(
            scenario.name,
            ONE_AT_A_TIME,
            "the agent is reset before each cell (a reset is global)",
        )
    if not plan.recorded(scenario):
        return ScenarioRuns(scenario.name, CONCURRENT, "no fault travels with the agent's calls")
    if choice.exact_attribution:
        return ScenarioRuns(
            scenario.name, CONCURRENT, "the wrappers attribute each call to its cell"
        )
    order = list(order_dependence(scenario)) if scenario.needs_delivery else []
    what = ["its faults depend on call order"] if order else []
    if plan.watched:
        order = [*order, f"{', '.join(plan.watched)}: invariants on each invocation's own calls"]
        what.append("its calls are counted per invocation")
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
        f"{' and '.join(what)} ({'; '.join(order)}): its cells run one at a time "
        "unless the forwarding probe finds that the agent forwards attribution",
        tuple(order),
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


def _total(phases: Mapping[str, PhaseCount], config: Config) -> PhaseCount:
    """One run of ``phases`` (counted as that run sends them), in order."""
    total = cells = 0
    exact, why = True, []
    for name, count in phases.items():
        total += count.invocations
        cells += count.cells
        if not count.exact:
            exact = False
            why.append(f"{name}: {count.why}")
    counted = PhaseCount("ci", cells, total, exact, "; ".join(why))
    return _budgeted(counted, config) if exact else counted
