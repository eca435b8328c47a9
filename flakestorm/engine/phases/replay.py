"""The replay phase: recorded sessions played back against the agent (SPEC §7).

Each session (``replays.sessions``, resolved by :mod:`flakestorm.loader.replays`) is one
invocation of the agent with the session's input, while its recorded tool responses (and LLM
replies) are served on the fault channel — the proxy's replay upstream for an http agent, the
wrappers for a python agent — from a :class:`~flakestorm.chaos.faults.recording.Recording` on the
active scenario. Sessions run one at a time (the channel serves one recording at a time), each
after a reset when one is configured. ``replays.sources`` are imported from LangSmith when the
phase is planned (:mod:`flakestorm.replay.langsmith`, credentials from the environment) and
replayed after the listed sessions.

The reply is checked against every invariant of the session's contract — or, when the input
is a probe of some invariants, against those the contract checks it with: the invariants
listing it, and those without probes when it is a golden prompt too (a session exported from
a probe cell turns green once the agent is fixed). ``when`` is evaluated
as a scenario with tool faults when a recorded tool status is not 2xx, and LLM faults when a
recorded LLM reply is an error; ``behavior_unchanged`` compares with the session's
``expected_output``, and is skipped without one.

The outcome has one cell per session (rows = sessions, one column ``replay``), so every report
shows it without knowing the phase: the cell passes when every applicable invariant held, and
fails otherwise; its prompts are the invariants' verdicts, its severity the highest of the
invariants that failed (of all, when it passed), its calls what the agent called now, and its
notes how those calls diverged from the recorded ones; a session no invariant applies to is
skipped (not scored). A call with nothing recorded (a replay
miss) makes the session ERRORED naming the call, as does a failed reset. Score:
``100 × passed sessions / sessions`` (errored sessions count as failed, and exit 3).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flakestorm.agents import Call, Reply
from flakestorm.agents.http import takes_context
from flakestorm.chaos.delivery.interactions import Interaction
from flakestorm.chaos.delivery.proof import CALM, prove
from flakestorm.chaos.faults.decisions import ActiveScenario, FaultBook
from flakestorm.chaos.faults.recording import MISS_PREFIX, Recording
from flakestorm.checks.invariants import Observation
from flakestorm.config import (
    AgentType,
    Config,
    ContractInvariant,
    InvariantType,
    OnMiss,
    Scenario,
    Severity,
    checks_turn,
    turns_of,
)
from flakestorm.engine.events import CellFinished, ScenarioFinished
from flakestorm.engine.executor import Executor
from flakestorm.engine.phases.phase import (
    PhaseContext,
    PhaseName,
    PhasePlan,
    PhaseRequest,
    SectionPhase,
)
from flakestorm.engine.prompt_result import judged_reply
from flakestorm.errors import ConfigError, HarnessError, Problem, UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.loader.replays import ReplaySession, resolve_imported, resolve_sessions
from flakestorm.replay.divergence import divergence
from flakestorm.replay.langsmith import import_sessions
from flakestorm.results.model import (
    CallRecord,
    CellResult,
    InvariantInfo,
    PhaseOutcome,
    PhaseScore,
    PromptResult,
    ScenarioInfo,
    Status,
)
from flakestorm.results.scoring import judged, score_cells
from flakestorm.results.spool import CELLS, Spool
from flakestorm.results.tally import tally_of
from flakestorm.structure.paths import ConfigPath, format_path

COLUMN = "replay"
"""The one column of the replay matrix (rows are sessions)."""
CONTEXT_HEAD = "Context:"


@dataclass(frozen=True)
class ReplayPlan:
    """The sessions to replay, in config order (their ``index`` is stable for sharding)."""

    sessions: tuple[ReplaySession, ...]
    on_miss: OnMiss

    @property
    def cells(self) -> Sequence[object]:
        return self.sessions

    @property
    def scenarios(self) -> Sequence[Scenario]:
        return ()


class ReplayPhase(SectionPhase):
    kind = PhaseName.REPLAY

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> ReplayPlan:
        config = loaded.config
        replays = config.replays
        if replays is None:
            raise UsageError(f"{loaded.path.name} has no `replays` section")

        locate = _locator(loaded)
        sessions, problems = resolve_sessions(config, loaded.base_dir, locate)
        if problems:  # the loader reported them already, unless a file changed since
            raise ConfigError(problems)
        for i, source in enumerate(replays.sources):
            imported = import_sessions(
                os.environ,
                project=source.project,
                run_id=source.run_id,
                contract=source.contract,
            )
            more, problems = resolve_imported(
                config, loaded.base_dir, locate, i, imported, sessions
            )
            if problems:
                raise ConfigError(problems)
            sessions += more
        if not sessions:
            raise UsageError(f"{loaded.path.name}: replays.sessions lists no session")
        # a shard's part (--shard K/N), dealt by the sessions' stable index
        return ReplayPlan(tuple(request.deal(sessions)), replays.on_miss)

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome:
        assert isinstance(plan, ReplayPlan)
        return run_sessions(plan, context)

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        return score_sessions(outcome)


def _locator(loaded: LoadedConfig) -> Callable[[ConfigPath, str], Problem]:
    def locate(path: ConfigPath, message: str) -> Problem:
        return Problem(loaded.path.name, loaded.line_of(path), 1, format_path(path), message)

    return locate


def run_sessions(plan: ReplayPlan, context: PhaseContext) -> PhaseOutcome:
    """Replay every session of ``plan``, one at a time (see the module doc)."""
    executor = context.executor
    # each replayed session goes to disk (memory stays flat in the number of sessions)
    spool = Spool(CELLS, context.spool_dir, context.loaded.redactor)
    rows = []
    for done, replay in enumerate(plan.sessions, 1):
        cell = _replay(replay, plan, context)
        spool.add(cell)
        # the session's row states the severity its cell was judged with (a failed session:
        # the highest of the invariants it failed), as the cell does
        rows.append(dataclasses.replace(_info(replay), severity=cell.severity))
        executor.announce(CellFinished(cell, done, len(plan.sessions)))
    cells = spool.items
    executor.announce(ScenarioFinished(COLUMN, cells))
    if context.channel is not None:
        context.channel.activate(ActiveScenario(CALM, context.loaded.config.advanced.seed))
    return PhaseOutcome(
        phase=PhaseName.REPLAY.value,
        name=PhaseName.REPLAY.value,
        invariants=tuple(rows),
        scenarios=(ScenarioInfo(COLUMN, ()),),
        cells=cells,
        score=score_sessions_of(cells),
        rows="session",
    )


def _info(replay: ReplaySession) -> InvariantInfo:
    session = replay.session
    severities = [i.severity for i in replay.contract.invariants]
    return InvariantInfo(
        id=session.id,
        type="session",
        severity=_highest(severities).value,
        when="always",
        negate=False,
        description=session.name or session.expected_failure,
        line=replay.line,
    )


def _highest(severities: Sequence[Severity]) -> Severity:
    order = list(Severity)
    return min(severities, key=order.index) if severities else Severity.MEDIUM


def _active_name(replay: ReplaySession) -> str:
    return f"replay:{replay.id}"


def _replay(replay: ReplaySession, plan: ReplayPlan, context: PhaseContext) -> CellResult:
    session = replay.session
    executor, channel = context.executor, context.channel
    name = _active_name(replay)
    base = CellResult(
        index=replay.index,
        invariant_id=session.id,
        scenario=COLUMN,
        severity=_info(replay).severity,
        status=Status.NOT_RUN,
        reason="",
    )
    steps = session.steps
    if context.stop.is_set():
        return dataclasses.replace(base, reason="the run stopped before this session")
    try:
        executor.reset()
    except HarnessError as exc:
        return dataclasses.replace(base, status=Status.ERRORED, reason=str(exc))
    earlier: set[int] = set()
    if channel is not None:
        earlier = {i.seq for i in channel.interactions(name)}
    elif any(step.tool_responses or step.llm_responses for step in steps):
        return dataclasses.replace(
            base,
            status=Status.ERRORED,
            reason="no fault channel to serve the recorded responses through",
        )
    replies = _sent(replay, plan, context, base.id)
    seen: list[Interaction] = []
    if channel is not None:
        seen = [i for i in channel.interactions(name) if i.seq not in earlier]
    if len(replies) < len(steps):
        if executor.lost is not None:  # the agent went down under an earlier one
            return dataclasses.replace(base, status=Status.ERRORED, reason=executor.lost)
        return dataclasses.replace(
            base, reason="the run stopped before this session (interrupted or out of budget)"
        )
    calls: tuple[CallRecord, ...] = ()
    if channel is not None:
        book = FaultBook(ActiveScenario(name, 0))
        proven, _ = prove([base], seen, book, channel, ScenarioInfo(name, ()))
        calls = proven[0].calls
    return _judged(replay, plan, context, base, replies, seen, calls)


def _sent(
    replay: ReplaySession, plan: ReplayPlan, context: PhaseContext, cell_id: str
) -> list[tuple[str, Reply]]:
    """Each step of the session sent, with its own recording on the channel: a conversation's
    turns in order, in one session. Fewer replies than steps: the run stopped (or the agent
    went down) before the rest."""
    session, channel, executor = replay.session, context.channel, context.executor
    config = context.loaded.config
    name = _active_name(replay)
    conversation = session.turns is not None
    sid = executor.session_of(f"{cell_id}#0/c0") if conversation else ""
    replies: list[tuple[str, Reply]] = []
    for k, step in enumerate(session.steps):
        # the cell's calls are attributed to it (delivery.prove)
        turn_id = f"{cell_id}#0.{k}.{k + 1}" if conversation else f"{cell_id}#0.0"
        if channel is not None:
            recording = Recording.build(
                session.id, step.tool_responses, step.llm_responses, plan.on_miss
            )
            channel.activate(
                ActiveScenario(name, config.advanced.seed, cell_id=turn_id, replay=recording)
            )
        prompt, context_text = _input(replay, config, step.input if k else None)
        if k:
            context_text = ""
        call = Call(cell_id=turn_id, scenario=name, context=context_text, session=sid)
        reply = executor.invoke(prompt, call)
        if reply is None:
            break
        replies.append((prompt, reply))
    return replies


def _judged(
    replay: ReplaySession,
    plan: ReplayPlan,
    context: PhaseContext,
    base: CellResult,
    replies: list[tuple[str, Reply]],
    seen: list[Interaction],
    calls: tuple[CallRecord, ...],
) -> CellResult:
    """The session's verdict: errored by a replay miss or the checker, skipped when no
    invariant applies, else failed or passed by the contract's invariants."""
    session, config = replay.session, context.loaded.config
    steps = session.steps
    notes = tuple(divergence(session.all_tool_responses, calls))
    misses = [i.upstream_error for i in seen if (i.upstream_error or "").startswith(MISS_PREFIX)]
    golden = [turn for p in config.golden_prompts for turn in turns_of(p)]
    prompts = _conversation_verdicts(replay, replies, context.executor, golden)
    if isinstance(prompts, str):
        return dataclasses.replace(
            base, status=Status.ERRORED, reason=prompts, calls=calls, notes=notes
        )
    if misses:
        shown = "; ".join(m.removeprefix(MISS_PREFIX) for m in misses[:3] if m)
        live_hint = plan.on_miss is not OnMiss.LIVE
        return dataclasses.replace(
            base,
            status=Status.ERRORED,
            reason=f"replay miss: {shown}"
            + (" (replays.on_miss: live sends such calls upstream)" if live_hint else ""),
            prompts=prompts,
            calls=calls,
            notes=notes,
        )
    if not prompts:
        return dataclasses.replace(
            base,
            status=Status.SKIPPED,
            reason="no invariant of the contract applies to this session (their when)",
            calls=calls,
            notes=notes,
        )
    failed = [p for p in prompts if not p.passed]
    severity = {i.id: i.severity for i in replay.contract.invariants}
    if failed:
        ids = [p.reason.split(":", 1)[0] for p in failed]
        worst = _highest([severity[i] for i in ids if i in severity])
        reason = f"{len(dict.fromkeys(ids))} invariant(s) failed: " + "; ".join(
            p.reason if p.turn is None else f"turn {p.turn}/{len(steps)}: {p.reason}"
            for p in failed
        )
        status, cell_severity = Status.FAILED, worst.value
    else:
        held = len({p.reason.split(":", 1)[0] for p in prompts})  # a turn's each, once
        on = f" on {len(steps)} turns" if session.turns is not None else ""
        reason = f"all {held} applicable invariant(s) held{on}"
        status, cell_severity = Status.PASSED, base.severity
    return dataclasses.replace(
        base,
        status=status,
        severity=cell_severity,
        reason=reason,
        prompts=prompts,
        calls=calls,
        notes=notes,
        runs_passed=int(status is Status.PASSED),
        runs_total=1,
    )


def _input(replay: ReplaySession, config: Config, later: str | None = None) -> tuple[str, str]:
    """The prompt to send and the context for ``{context}`` (SPEC §7): the session's context
    goes into ``{context}`` of an http agent's request template when it has one, else it is
    prepended to the input (``Context: ...``, a blank line, the input). ``later``: a later
    turn of a conversation, sent as it is (the context went with the first)."""
    if later is not None:
        return later, ""
    session = replay.session
    value = session.context
    if value is None:
        return session.first_input, ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    agent = config.agent
    if agent.type is AgentType.HTTP and takes_context(agent.request_template):
        return session.first_input, text
    return f"{CONTEXT_HEAD} {text}\n\n{session.first_input}", ""


def _checking(replay: ReplaySession, golden_prompts: Sequence[str]) -> list[ContractInvariant]:
    """The invariants that check the session: all of them, unless its input is a probe (an
    exported probe cell); then those the contract checks it with — the invariants listing it,
    and those without probes when it is a golden prompt too."""
    # the invariants on calls (SPEC §15) are judged in the matrices, not on replayed sessions
    invariants = [i for i in replay.contract.invariants if not i.type.reads_calls]
    text = replay.session.first_input
    if not any(text in i.probes for i in invariants if i.probes):
        return invariants
    golden = text in golden_prompts
    return [i for i in invariants if (text in i.probes if i.probes else golden)]


def _conversation_verdicts(
    replay: ReplaySession,
    replies: Sequence[tuple[str, Reply]],
    executor: Executor,
    golden_prompts: Sequence[str],
) -> tuple[PromptResult, ...] | str:
    """The verdicts on a session's replies: a one-turn session's, or each turn of a
    conversation's, by the invariants whose ``turn`` selects it (SPEC §12)."""
    steps = replay.session.steps
    if replay.session.turns is None:
        prompt, reply = replies[0]
        return _verdicts(replay, prompt, reply, executor, golden_prompts)
    out: list[PromptResult] = []
    for k, (prompt, reply) in enumerate(replies):
        number, of = k + 1, len(replies)
        found = _verdicts(replay, prompt, reply, executor, golden_prompts, (number, of))
        if isinstance(found, str):
            return found
        out += [
            dataclasses.replace(p, prompt=steps[k].input, conversation=0, turn=number)
            for p in found
        ]
    return tuple(out)


def _verdicts(
    replay: ReplaySession,
    prompt: str,
    reply: Reply,
    executor: Executor,
    golden_prompts: Sequence[str],
    turn: tuple[int, int] | None = None,
) -> tuple[PromptResult, ...] | str:
    """Every applicable invariant's verdict on the reply (a HarnessError's message when one
    cannot be judged); ``turn`` (number, of): only the invariants checking that turn."""
    session = replay.session
    out = []
    for invariant in _checking(replay, golden_prompts):
        if turn is not None and not checks_turn(invariant.turn, *turn):
            continue
        if not invariant.when.applies_to(
            session.has_tool_faults,
            session.has_llm_faults,
            session.has_tool_faults or session.has_llm_faults,
        ):
            continue
        checked: ContractInvariant = invariant
        baseline = None
        if invariant.type is InvariantType.BEHAVIOR_UNCHANGED:
            if session.expected_output is None:
                continue
            checked = invariant.model_copy(update={"baseline": "auto"})
            baseline = session.expected_output
        try:
            verdict = executor.check(checked, Observation(prompt, reply, baseline))
        except HarnessError as exc:
            return f"{invariant.id}: {exc}"
        reason = f"{invariant.id}: {verdict.reason}"
        out.append(judged_reply(session.first_input, prompt, 0, reply, verdict, reason))
    return tuple(out)


def score_sessions_of(cells: Sequence[CellResult]) -> PhaseScore:
    cell_score = score_cells(cells)  # cells per status
    by_status = cell_score.counts
    scored = tally_of(cells).scored  # counted as they were spooled: not read again
    passed = by_status[Status.PASSED.value]
    critical = cell_score.critical_failures
    counts = dict(by_status) | {"sessions": scored, "sessions_passed": passed}
    return judged(
        PhaseScore(
            score=round(100.0 * passed / scored, 2) if scored else None,
            passed=not critical,
            critical_failures=critical,
            counts=counts,
            summary=f"{passed} of {scored} sessions passed",
        )
    )


def score_sessions(outcome: PhaseOutcome) -> PhaseScore:
    """The replay score: ``100 × passed sessions / sessions`` (errored count as failed)."""
    return score_sessions_of(outcome.cells)
