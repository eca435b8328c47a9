"""The mutation phase (SPEC §6): does the agent still obey its rules when users phrase things
differently, attack it, or send it broken requests?

The plan is the config's mutations (:func:`flakestorm.mutations.generation.generate`: ``count``
per golden prompt, dealt round-robin over the types), made before the agent starts — with the
``llm`` generator that is when the endpoint is asked, so a failure there stops the run before
anything else (exit 3). Each mutation is one :class:`~flakestorm.engine.executor.Probe`, run by the
executor like a cell (``advanced.concurrency``, a reset before each run when one is configured,
``repeat`` / ``min_pass``), and judged against every top-level invariant (or ``completes`` and
``output_not_empty`` when there are none).

The verdict of a request-level mutation is the SPEC's: the agent passes with a clean rejection
(a 4xx, or 501 when the mutation changed the method) or a reply that satisfies the invariants;
any other 5xx, a reset connection, a hang past ``agent.timeout``, or a failed readiness check
right after the mutation fails it — and, as for any invocation the agent did not answer
(:mod:`flakestorm.checks.invariants`), every invariant checked, so a critical one fails the gate.

A mutation under which the agent went down (:attr:`Judged.down`) is followed by none until the
agent is back (restarted when flakestorm started it, else waited for); when it does not come
back, the mutations left are errored unsent with one reason naming that mutation
(:mod:`flakestorm.engine.probes`). Under concurrency a request that brings the agent down also
breaks
the others in flight. So a mutation (of any type) under which the agent went down while other
mutations were in flight is sent again on its own once they have all run, after the agent is
ready again, and judged on that isolated run
(:meth:`~flakestorm.engine.executor.Executor.run_probes`): the mutation that brings the agent down
fails, the others pass; ``MutationResult.isolated`` and the reason say so.

Calls. The phase runs on the fault channel when there is one (an http agent with a ``proxy``
section; the wrappers of a python agent with ``agent.tools``, ``agent.tool_registry`` or
``agent.llm``, which the phase opens itself), under a scenario of its own without faults
(:data:`SCENARIO`), and keeps with each mutation the tool and LLM calls attributed to it — by the
attribution an http agent forwards (the ``X-Flakestorm-Cell`` header, the W3C baggage entry or
trace context: :mod:`flakestorm.agents.attribution`; or, with a reset, because mutations then run
one
at a time), by the wrappers for a python agent — as contract cells keep theirs, so
``replay export`` can serve them again, and every report shows a failed mutation's. Of a run
judged on an isolated re-run, the calls kept are the re-run's. A scenario without faults does
not depend on call order, so an agent that forwards nothing still has its mutations run side by
side: their calls are then kept for the phase (its one :class:`ScenarioInfo`, counted and the
first listed), as a matrix's scenario keeps those it cannot attribute.

Score: ``100 × Σ w(type)·passed / Σ w(type)`` (:func:`flakestorm.results.scoring.score_mutations`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast, overload

from flakestorm.agents import Call, Reply
from flakestorm.agents.readiness import probe as readiness_probe
from flakestorm.agents.request import RequestShape
from flakestorm.agents.source import keeps_sessions
from flakestorm.chaos.channels.channel import Channel
from flakestorm.chaos.delivery.proof import CALM as CALM_SCENARIO
from flakestorm.chaos.delivery.proof import call_record, cell_of
from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.checks.invariants import Observation, Verdict
from flakestorm.config import (
    AgentType,
    Config,
    ContractInvariant,
    Invariant,
    InvariantType,
    MutationGenerator,
    Scenario,
    Severity,
)
from flakestorm.engine.matrix_plan import Baseline, BaselineKey, chaos_contract
from flakestorm.engine.phases.phase import (
    PhaseContext,
    PhaseName,
    PhasePlan,
    PhaseRequest,
    SectionPhase,
)
from flakestorm.engine.probes import Probe, ProbeRun
from flakestorm.engine.revival import revived_notice
from flakestorm.errors import AgentErrorKind, UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.mutations.generation import (
    Mutation,
    fell_back,
    generate,
    history_of,
    in_turns,
)
from flakestorm.redaction import without_userinfo
from flakestorm.results.model import (
    CallRecord,
    InvariantInfo,
    MutationResult,
    PhaseOutcome,
    PhaseScore,
    ScenarioInfo,
    Status,
)
from flakestorm.results.scenarios import MAX_UNATTRIBUTED_CALLS
from flakestorm.results.scoring import score_mutations
from flakestorm.results.spool import MUTATIONS, Spool

CheckFn = Callable[[Invariant, Observation], Verdict]

NAME = "mutation"
OUTPUT_CAP = 4096
"""Characters of a mutation's answer kept in the results (reports show an excerpt)."""
READY_CHECK_S = 2.0
"""How long the readiness check after a request-level mutation may take."""


@dataclass(frozen=True)
class MutationPlan:
    """The phase's work: its mutations (the units that pass or fail) and the invariants."""

    mutations: tuple[Mutation, ...]
    invariants: tuple[ContractInvariant, ...]
    notes: tuple[str, ...] = ()
    """What the reports say of how the mutations were made (the llm generator's health)."""
    sessions: bool = False
    """Made for an agent known before it runs to keep sessions (``agent.session``, or a python
    callable whose source takes ``session_id``: :mod:`flakestorm.agents.source`): attacks as
    real turns. A python agent the run finds taking ``session_id`` once it imported it (its
    source did not say) has the mutations put in that form then (:func:`in_turns`)."""

    @property
    def cells(self) -> Sequence[object]:
        return self.mutations

    @property
    def scenarios(self) -> Sequence[Scenario]:
        return ()


@dataclass(frozen=True)
class Judged:
    """The verdict on one reply to a mutation."""

    passed: bool
    reason: str
    failed: tuple[str, ...] = ()
    leak_at: int | None = None
    """Where the reply starts showing what a failed leak invariant forbids (the earliest)."""
    down: bool = False
    """The agent did not stay up to answer: a reset, a 5xx, a hang past ``agent.timeout``,
    or a failed readiness check right after (the executor then judges the mutation again on
    a run of its own when other mutations were in flight)."""


class MutationPhase(SectionPhase):
    kind = PhaseName.MUTATION

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> MutationPlan:
        plan = plan_mutations(loaded, request.sessions)
        # a shard's part (--shard K/N), dealt by index; every shard generates them all alike
        return dataclasses.replace(plan, mutations=tuple(request.deal(plan.mutations)))

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome:
        assert isinstance(plan, MutationPlan)
        return run_mutations(plan, context)

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        critical = [i.id for i in outcome.invariants if i.severity == "critical"]
        return score_mutations(outcome.mutations, critical)


def plan_mutations(loaded: LoadedConfig, sessions: bool | None = None) -> MutationPlan:
    """The mutations of ``loaded`` and the invariants they are checked against; ``sessions``:
    whether the agent keeps sessions, as the run's plan says (None: read from its source)."""
    config = loaded.config
    if config.mutations is None:
        raise UsageError(
            f"{loaded.path.name} has no `mutations` section, and `flakestorm run` runs the "
            "mutation phase: add one, or use `flakestorm run --chaos --chaos-only` (golden "
            "prompts under chaos), `flakestorm contract run`, or `flakestorm ci`"
        )
    if not config.golden_prompts:
        raise UsageError("the mutation phase mutates the golden prompts: add `golden_prompts`")
    writer = None
    if config.mutations.generator is MutationGenerator.LLM:
        from flakestorm.mutations.llm import LlmGenerator

        writer = LlmGenerator.for_config(config, loaded.base_dir)
    notes: tuple[str, ...] = ()
    if sessions is None:
        sessions = keeps_sessions(config.agent, loaded.base_dir)
    try:
        mutations = generate(config, llm=writer, sessions=sessions)
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        writer.health.fell_back = fell_back(mutations)
        notes = (writer.health.line(writer.model, without_userinfo(writer.url)),)
    return MutationPlan(mutations, mutation_invariants(config), notes, bool(sessions))


CALM = Scenario(name=NAME)
"""What ``when`` is evaluated against: mutations run without chaos."""


def mutation_invariants(config: Config) -> tuple[ContractInvariant, ...]:
    """The top-level invariants whose ``when`` applies without chaos (``always``,
    ``no_chaos``), with the ids the chaos phase gives them (``regex-3``); ``completes`` and
    ``output_not_empty`` when there are none (``validate`` warns about a ``when`` that applies
    to no phase)."""
    invariants = tuple(chaos_contract(config).invariants)
    # the invariants on calls (SPEC §15) are judged in the matrix phases, not on mutations
    applicable = tuple(i for i in invariants if i.when.applies(CALM) and not i.type.reads_calls)
    if applicable:
        return applicable
    return tuple(chaos_contract(config.model_copy(update={"invariants": []})).invariants)


def run_mutations(plan: MutationPlan, context: PhaseContext) -> PhaseOutcome:
    """Send every mutation of ``plan`` and judge the replies."""
    loaded = context.loaded
    config = loaded.config
    if context.plan.sessions and not plan.sessions:  # a python agent taking `session_id`
        plan = dataclasses.replace(plan, mutations=in_turns(plan.mutations, config), sessions=True)
    executor = context.executor
    needs_baseline = any(
        i.type is InvariantType.BEHAVIOR_UNCHANGED and (i.baseline or "auto") == "auto"
        for i in plan.invariants
    )
    baselines: Mapping[BaselineKey, Reply | None] = {}
    if needs_baseline:
        wanted = (baseline_of(m, config)[0] for m in plan.mutations)
        baselines = executor.baselines(list(dict.fromkeys(wanted)))
    judge = _judge(plan, context, baselines)
    channel = context.channel
    probes = _Probes(plan.mutations, SCENARIO if channel is not None else "")
    revived = len(executor.revived)
    min_pass = config.advanced.effective_min_pass
    severities = {inv.id: inv.severity for inv in plan.invariants}
    # each mutation goes to disk once final (memory stays flat in the number of mutations)
    spool = Spool(MUTATIONS, context.spool_dir, loaded.redactor)
    alone: dict[int, set[str]] = {}  # of the mutations judged on an isolated re-run: which runs

    def finished(position: int, runs: tuple[ProbeRun, ...]) -> None:
        spool.add(_with_severity(_result(plan.mutations[position], runs, min_pass), severities))
        rerun = {str(i) for i, run in enumerate(runs) if run.alone}
        if rerun:
            alone[position] = rerun

    scenarios: tuple[ScenarioInfo, ...] = ()
    if channel is None:
        executor.run_probes(probes, judge, sink=finished)
    else:  # the calls are read once every mutation ran: added to their mutations then
        calls, unattributed = _recorded(context, channel, probes, judge, finished)
        if unattributed.unattributed:  # an agent forwarding no attribution: per phase
            scenarios = (unattributed,)
        for position, mutation in enumerate(plan.mutations):
            records = calls.get(cell_of_mutation(mutation))
            if records:
                kept = _judged_calls(records, alone.get(position, set()))
                spool.add(dataclasses.replace(spool.items[position], calls=kept))
    notes = plan.notes + tuple(revived_notice(executor.revived[revived:], "mutation"))
    return _outcome(plan, context, spool.items, scenarios, notes)


def baseline_of(mutation: Mutation, config: Config) -> tuple[Baseline, BaselineKey]:
    """What a mutation's ``behavior_unchanged`` ``auto`` baseline is, and the key of the reply
    it compares with: its original prompt's chaos-free answer; a conversation's last turn's,
    the conversation sent clean in a session of its own (``plan.Baseline``)."""
    if not mutation.history:
        return mutation.original, mutation.original
    conversation = (*history_of(config, mutation.prompt_index), mutation.original)
    return conversation, (conversation, len(conversation))


def _judge(
    plan: MutationPlan, context: PhaseContext, baselines: Mapping[BaselineKey, Reply | None]
) -> Callable[[Probe, Reply], Judged]:
    """How a mutation's reply is judged: a prompt against every invariant; a request-level
    mutation by its verdict rule, then (http agents) a readiness check right after; a failed
    verdict of an agent that went down marked ``down``, so the executor judges it again alone."""
    config, executor = context.loaded.config, context.executor
    by_id = {m.id: m for m in plan.mutations}

    def verdict_of(probe: Probe, reply: Reply) -> Judged:
        mutation = by_id[probe.id]
        base = baselines.get(baseline_of(mutation, config)[1])
        baseline = base.output if base is not None else None
        if mutation.request is None:
            return _check(plan, executor.check, mutation.prompt, reply, baseline)
        verdict = _judge_request(plan, executor.check, mutation, reply, baseline)
        if config.agent.type is AgentType.HTTP:
            not_ready = readiness_probe(
                config.agent, min(READY_CHECK_S, config.agent.timeout / 1000)
            )
            if not_ready is not None:
                return Judged(
                    False,
                    f"the agent failed its readiness check right after: {not_ready}",
                    _every(plan),
                    down=True,
                )
        return verdict

    def judge(probe: Probe, reply: Reply) -> Judged:
        verdict = verdict_of(probe, reply)
        if not verdict.passed and reply.down:
            return dataclasses.replace(verdict, down=True)
        return verdict

    return judge


def _outcome(
    plan: MutationPlan,
    context: PhaseContext,
    results: Sequence[MutationResult],
    scenarios: tuple[ScenarioInfo, ...],
    notes: tuple[str, ...],
) -> PhaseOutcome:
    loaded = context.loaded
    config = loaded.config
    # each invariant's line in the config (by its position among all top-level invariants)
    positions = [inv.id for inv in chaos_contract(config).invariants] if config.invariants else []
    lines = {ident: loaded.line_of(("invariants", i)) for i, ident in enumerate(positions)}
    return PhaseOutcome(
        phase=NAME,
        name=NAME,
        invariants=tuple(InvariantInfo.of(i, lines.get(i.id, 1)) for i in plan.invariants),
        scenarios=scenarios,
        cells=(),
        score=score_mutations(results),
        mutations=results,
        warnings=notes,
    )


SCENARIO = "flakestorm:mutation"
"""The scenario (without faults) the phase's calls are attributed under on the channel."""


def cell_of_mutation(mutation: Mutation) -> str:
    """What a mutation's calls are attributed to (the cell header, without ``#RUN.0``)."""
    return f"mutation:{mutation.id}"


def _recorded(
    context: PhaseContext,
    channel: Channel,
    probes: Sequence[Probe],
    judge: Callable[[Probe, Reply], Judged],
    sink: Callable[[int, tuple[ProbeRun, ...]], None],
) -> tuple[dict[str, tuple[CallRecord, ...]], ScenarioInfo]:
    """Run ``probes`` under :data:`SCENARIO` on ``channel``, each probe's runs to ``sink`` once
    final; the calls of each mutation (by :func:`cell_of_mutation`), and the calls no mutation
    can be told to have made (an http agent that forwards no attribution, mutations running
    concurrently: a scenario without faults does not depend on call order)."""
    seed = context.loaded.config.advanced.seed
    earlier = {i.seq for i in channel.interactions(SCENARIO)}
    active = ActiveScenario(SCENARIO, seed)
    channel.activate(active)
    channel.follow_traces()  # an agent forwarding only the trace context: each call its own

    def before_invocation(invocation: str) -> None:
        channel.activate(dataclasses.replace(active, cell_id=invocation))

    try:
        context.executor.run_probes(probes, judge, before_invocation, sink)
    finally:
        seen = [i for i in channel.interactions(SCENARIO) if i.seq not in earlier]
        channel.forget(SCENARIO)  # the calls are in the results now
        channel.activate(ActiveScenario(CALM_SCENARIO, seed))
    calls: dict[str, list[CallRecord]] = {}
    unattributed = [i for i in seen if not i.cell_id]
    for interaction in seen:
        if interaction.cell_id:
            calls.setdefault(cell_of(interaction.cell_id), []).append(call_record(interaction))
    # each run's calls in the order they came (runs of a mutation may overlap)
    kept = {cell: tuple(sorted(records, key=_run_of)) for cell, records in calls.items()}
    first = tuple(call_record(i) for i in unattributed[:MAX_UNATTRIBUTED_CALLS])
    info = ScenarioInfo(SCENARIO, (), unattributed=len(unattributed), unattributed_calls=first)
    return kept, info


def _judged_calls(records: tuple[CallRecord, ...], alone: set[str]) -> tuple[CallRecord, ...]:
    """The calls of the invocations the verdicts came from: of a run judged on an isolated
    re-run (sent as ``RUN.1``; ``alone``: those runs), the re-run's, as ``RUN.0``, and not
    those of its first."""
    if not alone:
        return records
    kept = []
    for call in records:
        run, _, index = call.invocation.partition(".")
        if run in alone:
            if index != "1":
                continue
            call = dataclasses.replace(call, invocation=f"{run}.0")
        kept.append(call)
    return tuple(kept)


def _run_of(call: CallRecord) -> int:
    """The run of a mutation that made ``call`` (its invocation is ``RUN.0``)."""
    return int(call.invocation.partition(".")[0] or 0)


class _Probes(Sequence[Probe]):
    """The mutations as the executor's probes, each made when it is taken (not all held)."""

    def __init__(self, mutations: Sequence[Mutation], scenario: str) -> None:
        self._mutations = mutations
        self._scenario = scenario

    def __len__(self) -> int:
        return len(self._mutations)

    @overload
    def __getitem__(self, position: int) -> Probe: ...

    @overload
    def __getitem__(self, position: slice) -> Sequence[Probe]: ...

    def __getitem__(self, position: int | slice) -> Probe | Sequence[Probe]:
        if isinstance(position, slice):
            return _Probes(self._mutations[position], self._scenario)
        m = self._mutations[position]
        call = Call(cell_id=cell_of_mutation(m), scenario=self._scenario, request=m.request)
        return Probe(m.id, m.prompt, call, m.turns)


def _check(
    plan: MutationPlan,
    check: CheckFn,
    prompt: str,
    reply: Reply,
    baseline: str | None,
) -> Judged:
    """Every invariant on ``reply`` (HarnessError from the checker propagates: ERRORED)."""
    observation = Observation(prompt, reply, baseline)
    failed = []
    reasons = []
    leaks = []
    for invariant in plan.invariants:
        verdict = check(invariant, observation)
        if not verdict.passed:
            failed.append(invariant.id)
            reasons.append(f"{invariant.id}: {verdict.reason}")
            if verdict.leak_at is not None:
                leaks.append(verdict.leak_at)
    if failed:
        return Judged(False, "; ".join(reasons), tuple(failed), min(leaks, default=None))
    n = len(plan.invariants)
    return Judged(True, f"held all {n} invariant{'s' if n != 1 else ''}")


def _judge_request(
    plan: MutationPlan, check: CheckFn, mutation: Mutation, reply: Reply, baseline: str | None
) -> Judged:
    """SPEC §6: a clean rejection or a reply satisfying the invariants passes."""
    status = reply.status
    assert mutation.request is not None
    if reply.error in (AgentErrorKind.STATUS, AgentErrorKind.TOO_LARGE) and status is not None:
        if 400 <= status < 500:
            return Judged(True, f"rejected cleanly: HTTP {status}")
        if status == 501 and mutation.request.method is not None:
            return Judged(True, "rejected cleanly: HTTP 501 (method not implemented)")
        if reply.error is AgentErrorKind.STATUS or not 200 <= status < 300:
            return Judged(False, f"HTTP {status}: {reply.error_message}", _every(plan))
    if reply.error is not None:
        return Judged(False, f"{reply.error.value}: {reply.error_message}", _every(plan))
    return _check(plan, check, mutation.prompt, reply, baseline)


def _every(plan: MutationPlan) -> tuple[str, ...]:
    """The invariants a request fails when the agent did not stay up to answer it: all."""
    return tuple(invariant.id for invariant in plan.invariants)


def _result(mutation: Mutation, runs: tuple[ProbeRun, ...], min_pass: int) -> MutationResult:
    base = MutationResult(
        index=mutation.index,
        id=mutation.id,
        type=mutation.type.value,
        transform=mutation.transform,
        generator=mutation.generator,
        weight=mutation.weight,
        original=mutation.original,
        sent=mutation.prompt,
        turns=mutation.turns,
        request=_shape_fields(mutation.request),
        changes=mutation.request.changes if mutation.request is not None else (),
        status=Status.NOT_RUN,
        reason="",
        runs_total=len(runs),
    )
    errored = next((i for i, r in enumerate(runs) if r.error is not None), None)
    if errored is not None:
        run = runs[errored]
        result = _with_reply(base, run.reply, Status.ERRORED, run.error or "", ())
        return dataclasses.replace(result, run=errored)
    if any(r.reply is None for r in runs):
        done = sum(1 for r in runs if r.reply is not None)
        reason = f"the run stopped before this mutation finished ({done}/{len(runs)} runs)"
        return dataclasses.replace(base, reason=reason)
    verdicts = [cast(Judged, r.verdict) for r in runs]
    passed_runs = sum(1 for v in verdicts if v.passed)
    shown_at = next((i for i, v in enumerate(verdicts) if not v.passed), 0)
    judged, shown = verdicts[shown_at], runs[shown_at]
    status = Status.PASSED if passed_runs >= min_pass else Status.FAILED
    reason = judged.reason + _alone_note(shown)
    if len(runs) > 1:
        reason = f"{passed_runs}/{len(runs)} runs passed (min_pass {min_pass}); {reason}"
    result = _with_reply(base, shown.reply, status, reason, judged.failed)
    return dataclasses.replace(
        result,
        runs_passed=passed_runs,
        flaky=0 < passed_runs < len(runs),
        leak_at=judged.leak_at,
        run=shown_at,
        isolated=any(r.alone for r in runs),
    )


def _alone_note(run: ProbeRun) -> str:
    """What the reason adds when ``run`` was judged on a run of its own."""
    first = run.crowded
    if first is None:
        return ""
    seen = cast(Judged, first.verdict).reason if first.verdict is not None else "no verdict"
    return (
        " (judged on an isolated re-run: with other mutations in flight, the agent went down "
        f"under it: {seen})"
    )


def _with_severity(result: MutationResult, severities: dict[str, Severity]) -> MutationResult:
    """``result`` with the highest severity of the invariants it failed."""
    failed = [severities[i] for i in result.failed_invariants if i in severities]
    if not failed:
        return result
    worst = max(failed, key=lambda s: (s.weight, s is Severity.CRITICAL))
    return dataclasses.replace(result, severity=worst.value)


def _with_reply(
    base: MutationResult,
    reply: Reply | None,
    status: Status,
    reason: str,
    failed: tuple[str, ...],
) -> MutationResult:
    if reply is None:
        return dataclasses.replace(base, status=status, reason=reason, failed_invariants=failed)
    output = reply.output if reply.output is not None else (reply.raw or None)
    return dataclasses.replace(
        base,
        status=status,
        reason=reason,
        failed_invariants=failed,
        output=output[:OUTPUT_CAP] if output is not None else None,
        http_status=reply.status,
        latency_ms=round(reply.latency_ms, 3),
        error=reply.error.value if reply.error is not None else None,
    )


def _shape_fields(shape: RequestShape | None) -> dict[str, object] | None:
    """The fields of ``shape`` that differ from the defaults (None without a shape)."""
    if shape is None:
        return None
    return {
        f.name: getattr(shape, f.name)
        for f in dataclasses.fields(shape)
        if getattr(shape, f.name) != f.default
    }
