"""Running a matrix of cells — every invariant under every scenario (SPEC §5) — for the
phases shaped that way (contract, chaos): the stateful check, the ``auto`` baselines, the
forwarding check, then the scenarios one at a time on the fault channel, each settled with its
delivery proof. The calls of a scenario without faults are kept with its cells too, when they
can be attributed to their invocations (python wrappers, a forwarded cell header, or cells run
one at a time for a reset); else its cells run concurrently under the calm scenario."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from flakestorm.agents import Reply
from flakestorm.agents.attribution import PRE_MATRIX, Source
from flakestorm.chaos.channels.channel import Channel
from flakestorm.chaos.delivery import interactions
from flakestorm.chaos.delivery.interactions import Interaction
from flakestorm.chaos.delivery.proof import CALM, active_scenario, judge, prove
from flakestorm.chaos.faults.decisions import ActiveScenario, FaultBook
from flakestorm.config import Scenario, turns_of
from flakestorm.engine.conduct import ConductJudge, pricer
from flakestorm.engine.counting import MatrixCount as MatrixCount
from flakestorm.engine.counting import count_invocations as count_invocations
from flakestorm.engine.executor import Options
from flakestorm.engine.matrix_plan import BaselineKey, Cell, MatrixPlan
from flakestorm.engine.phases.applicability import rejudge
from flakestorm.engine.phases.phase import PhaseContext, PhasePlan, PhaseRequest, SectionPhase
from flakestorm.engine.revival import revived_notice
from flakestorm.engine.run_plan import (
    TOGETHER,
    TOGETHER_IF_ATTRIBUTED,
    UNLESS_ATTRIBUTED,
    PhaseCount,
    count_matrix,
)
from flakestorm.results.model import CellResult, InvariantInfo, PhaseOutcome, ScenarioInfo
from flakestorm.results.scoring import score_cells
from flakestorm.results.spool import CELLS, Spool, Spooled
from flakestorm.results.sweeps import judged

STATEFUL_WARNING = (
    "Warning: No reset_endpoint configured. Contract matrix cells may share state. "
    "Results may be contaminated. Add reset_endpoint to your config for accurate isolation."
)


NOT_FORWARDING = (
    "The agent forwards no attribution to its tool and LLM calls (the X-Flakestorm-Cell "
    "header, the W3C baggage entry flakestorm-cell, or the W3C trace context, which an agent "
    "instrumented with OpenTelemetry forwards on its own)."
)
SERIAL_SCENARIOS = (
    " The faults of these chaos scenarios depend on the order of calls, so their cells ran one "
    "at a time: {scenarios}."
)
CONCURRENT_SCENARIOS = (
    " The cells of {scenarios} ran side by side: their calls are reported per scenario, not "
    "per cell."
)
FORWARD_HINT = " Forward one of them to run every scenario concurrently with per-cell calls."
NOTHING_REACHED = (
    "No call of the agent reached flakestorm before the matrix (the stateful check, the "
    "baselines, the forwarding probe), so what attribution it forwards is not known: its chaos "
    "scenarios ran as for an agent that forwards none."
)
REACH_HINT = (
    " Are its tool and LLM calls pointed at the chaos proxy (does the first golden prompt make "
    "one)?"
)
PRE_MATRIX_CELLS = frozenset(PRE_MATRIX)


def run_matrix(
    phase: str, plan: MatrixPlan, context: PhaseContext, lines: dict[str, int]
) -> PhaseOutcome:
    """Run ``plan`` as phase ``phase``: the stateful check (first phase only), the baselines,
    then the matrix scenario by scenario (chaos scenarios activated on the channel one at a
    time). Scored as a contract (:func:`~flakestorm.results.scoring.score_cells`); ``lines`` gives
    each invariant's line in the config."""
    executor, channel = context.executor, context.channel
    golden_prompts = context.loaded.config.golden_prompts
    seed = context.loaded.config.advanced.seed
    infos = {s.name: ScenarioInfo(s.name, describe_faults(s)) for s in plan.scenarios}
    if not plan.cells:  # a shard with none of this phase's cells
        return _outcome(phase, plan, lines, infos, [], [])
    counted = planned(phase, plan, context)
    assert counted.matrix is not None
    warnings = []
    revived = len(executor.revived)
    sent_before = executor.invocations
    calm = ActiveScenario(CALM, seed)
    if channel is not None:
        channel.activate(calm)
    probe = turns_of(golden_prompts[0])[0] if golden_prompts else plan.cells[0].prompts[0]
    if counted.matrix.detection and executor.looks_stateful(probe):
        warnings.append(STATEFUL_WARNING)
    baselines = executor.baselines(plan.baselines)
    chaos = [s for s in plan.scenarios if channel is not None and plan.recorded(s)]
    forwarding = True
    if channel is not None and counted.matrix.learns:
        if counted.matrix.probe:
            executor.probe(probe, "forwarding-probe")
        forwarding = _attribution(channel, context)
        if not forwarding:
            # only calls that reached flakestorm tell what the agent forwards: none is no evidence
            orders = {s.name: counted.scenario(s.name).order for s in chaos}
            warnings.append(_not_forwarding(orders, bool(channel.interactions(CALM))))
    # a scenario without faults is activated too when each of its calls can be attributed to
    # its invocation without running its cells one at a time (a reset runs them so anyway):
    # its calls are then kept with its cells, as a chaos scenario's are (replay export turns
    # them into sessions)
    run = context.plan
    exact = channel is not None and (
        run.channel.exact_attribution or run.reset or (bool(chaos) and forwarding)
    )
    recorded = first_compared([s for s in plan.scenarios if s in chaos or exact], plan)
    conduct = ConductJudge(plan, executor.options, pricer(context.loaded.config))
    # finished cells go to disk (memory stays flat in the run's size); a recorded scenario's
    # cells once settled with its delivery proof, the others as each finishes
    spool = Spool(CELLS, context.spool_dir, context.loaded.redactor)
    calm_cells = [c for c in plan.cells if c.scenario not in recorded]
    executor.run_cells(calm_cells, baselines, sink=spool.add)
    if channel is not None:  # calls outside recorded scenarios: only the checks' are read again
        channel.forget(CALM, keep=PRE_MATRIX_CELLS)
    if channel is not None:
        recording = _Recording(plan, channel, baselines, context, infos, conduct)
        if channel.flies and in_flight(counted, forwarding, recorded):
            room = flight_room(channel, executor.invocations - sent_before)
            for wave in waves(plan, recorded, executor.options.repeat, room):
                spool.extend(recording.fly(wave))
            recorded = []
        for scenario in recorded:
            runs = counted.scenario(scenario.name)
            order = runs.order if runs.runs == UNLESS_ATTRIBUTED and not forwarding else ()
            spool.extend(recording.alone(scenario, order))
        channel.activate(calm)
    warnings += revived_notice(executor.revived[revived:], "cell")
    return _outcome(phase, plan, lines, infos, spool.items, warnings)


def planned(phase: str, plan: MatrixPlan, context: PhaseContext) -> PhaseCount:
    """How the run's plan runs the matrix ``plan`` of ``phase``: as planned, or, for a shard's
    part of it or a phase the plan does not know (one registered beside the built-in ones),
    counted by the plan's rules on its channel, sessions and reset."""
    counted = context.plan.phase(phase)
    if counted is not None and counted.cells == len(plan.cells) and counted.matrix is not None:
        return counted
    config = context.loaded.config
    return count_matrix(phase, plan, context.plan, config, context.first)


@dataclasses.dataclass(frozen=True)
class _Recording:
    """What running a phase's recorded scenarios shares: each is settled with its delivery
    proof once its cells ran, and ``infos`` gets the judged scenario."""

    plan: MatrixPlan
    channel: Channel
    baselines: Mapping[BaselineKey, Reply | None]
    context: PhaseContext
    infos: dict[str, ScenarioInfo]
    conduct: ConductJudge

    def alone(self, scenario: Scenario, order: tuple[str, ...]) -> list[CellResult]:
        """The cells of one recorded scenario, run with it active on the channel (one at a
        time when its faults depend on call ``order`` and the agent forwards no attribution),
        settled with its delivery proof."""
        channel = self.channel
        # an earlier phase may have run a scenario of the same name ("chaos"): not ours
        earlier = {i.seq for i in channel.interactions(scenario.name)}
        active = active_scenario(scenario, self.context.loaded.config.advanced.seed)
        channel.activate(active)
        cells = [c for c in self.plan.cells if c.scenario is scenario]

        def before_invocation(invocation: str) -> None:
            channel.activate(dataclasses.replace(active, cell_id=invocation))

        info = dataclasses.replace(self.infos[scenario.name], serial=bool(order), order=order)
        settle = self._settler(active, earlier, info, cells)
        results = self.context.executor.run_cells(
            cells,
            self.baselines,
            serial=bool(order),
            before_invocation=before_invocation,
            settle=settle,
        )
        channel.forget(scenario.name)  # its calls are in its cells now
        return results

    def fly(self, recorded: Sequence[Scenario]) -> list[CellResult]:
        """The cells of every recorded scenario run side by side, each call decided by its
        cell's scenario; each scenario settled with its own delivery proof, and announced, as
        soon as its own cells ran."""
        channel, seed = self.channel, self.context.loaded.config.advanced.seed
        actives = [active_scenario(s, seed) for s in recorded]
        cells: dict[str, list[Cell]] = {s.name: [] for s in recorded}
        for cell in self.plan.cells:
            if cell.scenario.name in cells:
                cells[cell.scenario.name].append(cell)
        settlers = {}
        for active in actives:
            # an earlier phase may have run a scenario of the same name ("chaos"): not ours
            earlier = {i.seq for i in channel.interactions(active.name)}
            info = dataclasses.replace(self.infos[active.name], in_flight=True)
            self.infos[active.name] = info
            settlers[active.name] = self._settler(active, earlier, info, cells[active.name])
        channel.fly(actives, {c.id: name for name, mine in cells.items() for c in mine})

        flying = [c for name in cells for c in cells[name]]
        # each scenario is settled (and announced) as soon as its own cells are in
        results = self.context.executor.run_cells(
            flying, self.baselines, settle=lambda name, mine: settlers[name](name, mine)
        )
        for name in cells:
            channel.forget(name)  # their calls are in their cells now
        return results

    def _settler(
        self, active: ActiveScenario, earlier: set[int], info: ScenarioInfo, cells: Sequence[Cell]
    ) -> Callable[[str, list[CellResult]], list[CellResult]]:
        """Completes a recorded scenario's verdicts once its cells ran: the calls its cells
        made (not an earlier phase's), the invariants on calls judged on them and what each
        cell spent (:mod:`flakestorm.engine.conduct`), the delivery proof and judgement, then
        ``when`` judged per invocation where the scenario's faults may spare one
        (:mod:`.applicability`)."""
        planned = {cell.index: cell for cell in cells}
        channel, conduct, options = self.channel, self.conduct, self.context.executor.options

        def settle(_scenario: str, results: list[CellResult]) -> list[CellResult]:
            seen = [i for i in channel.interactions(active.name) if i.seq not in earlier]
            proven, proof = prove(results, seen, FaultBook(active), channel, info)
            proven = conduct.judge(proven, planned)
            self.infos[active.name], settled = judge(conduct.spent(proof, proven), proven)
            return [_per_invocation(r, planned.get(r.index), options) for r in settled]

        return settle


def first_compared(recorded: list[Scenario], plan: MatrixPlan) -> list[Scenario]:
    """``recorded`` with the scenario ``max_amplification`` compares with first (SPEC §15)."""
    first = [s for s in recorded if s.name == plan.compared_with]
    return first + [s for s in recorded if s.name != plan.compared_with]


def in_flight(counted: PhaseCount, forwarding: bool, recorded: Sequence[Scenario]) -> bool:
    """Whether the recorded scenarios run side by side, all in flight together (SPEC §9), as
    the plan says: always, or when the agent forwards attribution (``forwarding``, learned
    before the matrix); and there are several."""
    flight = counted.flight
    if flight is None or len(recorded) < 2:
        return False
    return flight.runs == TOGETHER or (flight.runs == TOGETHER_IF_ATTRIBUTED and forwarding)


MAX_FLIGHT_INVOCATIONS = 5_000
"""The most invocations in flight at once: scenarios beyond it wait for the next wave, so a
wave's calls fit the interaction log (100,000 calls: 20 per invocation) and each scenario's
delivery is proven on all of its calls."""
GUESSED_BODY_CHARS = 4_096
"""The body text an invocation's calls are taken to log when no call before the matrix shows
it."""


def flight_room(channel: Channel, sent: int) -> int:
    """How many invocations a wave may hold: :data:`MAX_FLIGHT_INVOCATIONS`, fewer when the
    bodies their calls log would not fit half the interaction log's body room
    (:data:`~flakestorm.chaos.delivery.interactions.RUN_BODY_CHARS`; a scenario's bodies are
    given back once its cells hold them), going by the calls of the ``sent`` invocations
    before the matrix (the stateful check, the baselines, the forwarding probe)."""
    seen = [i for i in channel.interactions(CALM) if i.cell_id in PRE_MATRIX_CELLS]
    chars = sum(len(i.request or "") + len(i.response or "") for i in seen)
    per = chars / sent if sent and chars else GUESSED_BODY_CHARS
    fits = int(interactions.RUN_BODY_CHARS // 2 // max(per, 1.0))
    return max(1, min(MAX_FLIGHT_INVOCATIONS, fits))


def waves(
    plan: MatrixPlan, recorded: Sequence[Scenario], repeat: int, room: int
) -> list[list[Scenario]]:
    """``recorded`` in consecutive waves of at most ``room`` invocations (a scenario bigger
    than that is a wave of its own)."""
    sends: dict[str, int] = {}
    for cell in plan.cells:
        sends[cell.scenario.name] = sends.get(cell.scenario.name, 0) + repeat * len(cell.prompts)
    out: list[list[Scenario]] = []
    size = 0
    for scenario in recorded:
        mine = sends.get(scenario.name, 0)
        # the scenario max_amplification compares with flies alone, before the others
        alone = bool(out) and out[-1][0].name == plan.compared_with
        if not out or size + mine > room or alone:
            out.append([])
            size = 0
        out[-1].append(scenario)
        size += mine
    return out


def _attribution(channel: Channel, context: PhaseContext) -> bool:
    """Whether the agent forwards attribution, from the calls before the matrix (said in a
    notice when it does)."""
    source = forwarded(channel.interactions(CALM))
    if source is Source.TRACE:
        channel.follow_traces()
    if source is not None:
        context.notice(f"attribution: the agent forwards {source.description}")
        return True
    return False


def forwarded(seen: Sequence[Interaction]) -> Source | None:
    """What the agent forwards to its calls, from the calls of the invocations before the
    matrix (the first source of :data:`flakestorm.agents.attribution.SOURCES` one of them was
    attributed by); None when it forwards none."""
    found = {i.attribution for i in seen if i.cell_id in PRE_MATRIX_CELLS}
    return next((s for s in Source if s.forwarded and s.value in found), None)


def _not_forwarding(serial: dict[str, tuple[str, ...]], reached: bool = True) -> str:
    """The warning of a run whose agent forwards no attribution (``reached``: some call before
    the matrix reached flakestorm and carried none; else nothing is known of it): which chaos
    scenarios' cells ran one at a time (and why), and which ran side by side with their calls
    per scenario."""
    alone = [f"{name} ({'; '.join(why)})" for name, why in serial.items() if why]
    together = [name for name, why in serial.items() if not why]
    text = NOT_FORWARDING if reached else NOTHING_REACHED
    if alone:
        text += SERIAL_SCENARIOS.format(scenarios="; ".join(alone))
    if together:
        text += CONCURRENT_SCENARIOS.format(scenarios=", ".join(together))
    return text + (FORWARD_HINT if reached else REACH_HINT)


def _outcome(
    phase: str,
    plan: MatrixPlan,
    lines: dict[str, int],
    infos: dict[str, ScenarioInfo],
    cells_out: Sequence[CellResult],
    warnings: list[str],
) -> PhaseOutcome:
    contract = plan.contract
    outcome = PhaseOutcome(
        phase=phase,
        name=contract.name,
        invariants=tuple(InvariantInfo.of(i, lines.get(i.id, 1)) for i in contract.invariants),
        scenarios=tuple(infos[s.name] for s in plan.scenarios),
        cells=cells_out if isinstance(cells_out, Spooled) else tuple(cells_out),
        score=score_cells(cells_out),
        warnings=tuple(warnings),
        sweeps=plan.sweeps,
    )
    return judged(outcome)


def dealt(plan: MatrixPlan, request: PhaseRequest) -> MatrixPlan:
    """``plan`` with only this run's part of its cells (``--shard``), indexes kept."""
    if request.shard is None:
        return plan
    return dataclasses.replace(plan, cells=tuple(request.deal(plan.cells)))


class MatrixPhase(SectionPhase):
    """A built-in phase that runs a matrix of cells (:func:`run_matrix`); its invariants are
    listed in the config at :attr:`invariants_at` (for their lines in annotations)."""

    invariants_at: tuple[str, ...]

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome:
        assert isinstance(plan, MatrixPlan)
        loaded = context.loaded
        lines = {
            inv.id: loaded.line_of((*self.invariants_at, i))
            for i, inv in enumerate(plan.contract.invariants)
        }
        return run_matrix(self.name, plan, context, lines)


def _per_invocation(result: CellResult, cell: Cell | None, options: Options) -> CellResult:
    if cell is None:
        return result
    return rejudge(
        result,
        cell.invariant.when,
        cell.scenario,
        len(cell.prompts),
        options.repeat,
        options.min_pass,
    )


def describe_faults(scenario: Scenario) -> tuple[str, ...]:
    """One short line per fault declared by ``scenario``."""
    out = [f"tool {f.tool}: {f.mode.value}" for f in scenario.tool_faults]
    out += [f"llm: {f.mode.value}" for f in scenario.llm_faults]
    out += [f"context: {a.type.value}" for a in scenario.context_attacks]
    return tuple(out)
