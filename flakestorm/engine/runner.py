"""One run, end to end: config -> agent up -> phases -> scores -> :class:`RunResult`.

Nothing here prints or exits: notices go to ``on_notice`` (with the config's secrets masked:
the in-process proxy's address, the started agent, and every 10 s while the agent is not
ready yet, what was tried and the last error), progress to ``on_event``, and the caller writes
reports and maps the result to an exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flakestorm import __version__
from flakestorm.agents import NO_CALL, Agent, Call, Reply
from flakestorm.agents.console import AgentConsole
from flakestorm.agents.factory import build_agent
from flakestorm.agents.process import LOG_NAME, AgentProcess
from flakestorm.agents.readiness import ReadyAgain
from flakestorm.agents.reset import build_resetter
from flakestorm.agents.source import no_session, sessions_of
from flakestorm.chaos.channels.channel import Channel
from flakestorm.chaos.channels.choice import ChannelChoice, open_channel
from flakestorm.checks.invariants import build_checker
from flakestorm.config import AgentType, Config, Conversation
from flakestorm.engine.events import Event, RunPlanned
from flakestorm.engine.executor import MISREAD, Executor, Options, Resetter
from flakestorm.engine.judging import calibrate, health, run_checker
from flakestorm.engine.overrides import Overrides as Overrides
from flakestorm.engine.overrides import apply_overrides as apply_overrides
from flakestorm.engine.overrides import output_dir as output_dir
from flakestorm.engine.phases.phase import Phase, PhaseContext, PhaseName, PhasePlan, PhaseRequest
from flakestorm.engine.phases.registry import PHASES
from flakestorm.engine.revival import Reviver
from flakestorm.engine.run_plan import PHASE_ORDER, Command, RunPlan, plan_run
from flakestorm.engine.unsent import announced_errored, errored
from flakestorm.errors import ConfigError, InfrastructureError, Problem, UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.redaction import Redactor, redacting
from flakestorm.results import acceptance, clock
from flakestorm.results.model import PhaseOutcome, RunResult, redact
from flakestorm.results.scoring import score_run
from flakestorm.results.shards import config_document, digest_of
from flakestorm.stopping import Stop


def configured_phases(loaded: LoadedConfig) -> list[str]:
    """The phases ``ci`` runs: every registered phase whose section is configured. A section
    whose phase this version cannot run yet is refused, never skipped."""
    config = loaded.config
    unavailable = [
        f"`{name.section}` (the {name.value} phase)"
        for name in PhaseName
        if name.value not in PHASES and name.configured(config)
    ]
    if unavailable:
        raise UsageError(
            f"{loaded.path.name} configures {', '.join(unavailable)}, which this version of "
            "flakestorm cannot run yet; remove the section(s) to run the other phases "
            "(flakestorm never skips a configured phase silently)"
        )
    names = [name for name, phase in PHASES.items() if phase.configured(config)]
    if not names:
        raise UsageError(
            f"{loaded.path.name} configures no phase to run "
            "(add a `contract`, `chaos`, `mutations` or `replays` section)"
        )
    return names


def run_ci(loaded: LoadedConfig, overrides: Overrides | None = None, **how: Any) -> RunResult:
    """Run every configured phase, score them together and apply the gate (``how``: the
    ``stop``, ``on_event`` and ``on_notice`` of :func:`run_phases`)."""
    return run_phases(loaded, configured_phases(loaded), overrides, ci=True, **how)


def run_contract_phase(
    loaded: LoadedConfig, overrides: Overrides | None = None, **how: Any
) -> RunResult:
    """Run the config's contract against its agent and score it (``how``: as for
    :func:`run_ci`)."""
    if loaded.config.contract is None:
        raise UsageError(
            f"{loaded.path.name} has no `contract` section: nothing for `contract run` to do"
        )
    return run_phases(loaded, [PhaseName.CONTRACT.value], overrides, **how)


def run_phases(
    loaded: LoadedConfig,
    names: Sequence[str],
    overrides: Overrides | None = None,
    chaos_profile: str | None = None,
    stop: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
    ci: bool = False,
) -> RunResult:
    """Run the phases ``names`` against one agent, in report order, and score them together.
    ``chaos_profile`` replaces the top-level chaos with a built-in one; ``ci``: the command is
    ``ci`` (every configured phase), which the plan records with its total. The command is
    planned first (:func:`planned`: usage errors exit 2 before anything runs), then the plan
    is executed (:func:`execute`)."""
    overrides = overrides or Overrides()
    loaded = apply_overrides(loaded, overrides)
    run = planned(loaded, names, overrides, chaos_profile, ci)
    return execute(run, stop or Stop(), on_event, on_notice)


@dataclass
class PlannedRun:
    """A command planned: its phases and their work (each phase's own plan: cells, mutations,
    sessions), the run's plan (:class:`~flakestorm.engine.run_plan.RunPlan`), and what the run
    adds to the result as it goes."""

    loaded: LoadedConfig
    overrides: Overrides
    phases: list[Phase]
    work: dict[str, PhasePlan]
    plan: RunPlan
    options: Options
    started: datetime.datetime = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc)
    )
    t0: float = dataclasses.field(default_factory=time.perf_counter)
    warnings: list[str] = dataclasses.field(default_factory=list)
    """The run's own warnings, in the order they arose."""

    @property
    def out_dir(self) -> Path:
        return output_dir(self.loaded, self.overrides)


def execute(
    run: PlannedRun,
    stop: threading.Event,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> RunResult:
    """Execute ``run``'s plan: the agent up on the plan's channel, isolated as the plan says,
    each phase run in report order, then scored together and the gate applied."""
    loaded, out_dir = run.loaded, run.out_dir
    notice = _redacting(on_notice, loaded.redactor)
    if on_event is not None:
        on_event(RunPlanned(sum(len(plan.cells) for plan in run.work.values())))
    with contextlib.ExitStack() as stack:
        stack.enter_context(_kept_if_used(out_dir))
        stack.enter_context(redacting(loaded.redactor))
        if stop.is_set():  # stopped during start-up: nothing is started, judged nor sent
            return _result(run, _not_started(run, on_event), stopped=True)
        checker = run_checker(loaded, run.work)
        stack.callback(checker.close)
        try:  # the judges agree with their examples before the agent is called
            calibrate(loaded, checker)
            up = _agent_up(
                loaded, out_dir, notice, run.plan.channel, run.overrides.record, stop, run.warnings
            )
            agent, channel, reviver = stack.enter_context(up)
        except InfrastructureError as exc:  # never ready, no proxy, no judge: reports say why
            outcomes = _not_started(run, on_event, exc.cause)
            return _result(run, outcomes, not_started=exc, judges=health(checker))
        resetter = _isolated(run, agent)
        if resetter is not None:
            stack.callback(getattr(resetter, "close", lambda: None))
        begin = channel.begin if channel is not None else None
        executor = Executor(
            agent, checker, resetter, run.options, stop, on_event, reviver, begin=begin
        )
        context = PhaseContext(
            loaded=loaded,
            executor=executor,
            channel=channel,
            first=True,
            stop=stop,
            notice=notice,
            plan=run.plan,
            spool_dir=out_dir,
        )
        outcomes = _run_each(run.phases, run.work, context)
        # the interaction log is bounded: what it could not keep is said, not hidden
        lost = channel.lost() if channel is not None else None
        if lost is not None:
            run.warnings.append(lost)
        judges = health(checker)
    if executor.misread is not None:  # one located error, not a column of failed cells
        run.warnings.insert(0, str(_locator(loaded)("agent.response_path", _misread(executor))))
    return _result(run, outcomes, executor, judges=judges)


def _run_each(
    phases: Sequence[Phase],
    plans: dict[str, PhasePlan],
    context: PhaseContext,
    finish: Callable[[PhaseOutcome], PhaseOutcome] = lambda outcome: outcome,
) -> dict[str, PhaseOutcome]:
    """Each phase run in report order in ``context`` (``first`` for the first only), its
    outcome ``finish``ed, then scored."""
    config = context.loaded.config
    outcomes: dict[str, PhaseOutcome] = {}
    for phase in phases:
        ran = phase.run(plans[phase.name], dataclasses.replace(context, first=not outcomes))
        outcome = finish(ran)
        outcomes[phase.name] = dataclasses.replace(outcome, score=phase.score(outcome, config))
    return outcomes


class _NoAgent:
    """The agent of a run that could not start: nothing is ever sent to it."""

    def invoke(self, prompt: str, call: Call = NO_CALL) -> Reply:
        raise AssertionError("a run that could not start sends nothing")


def _not_started(
    run: PlannedRun,
    on_event: Callable[[Event], None] | None,
    cause: str | None = None,
) -> dict[str, PhaseOutcome]:
    """Each phase's outcome when the run could not start (the agent never became ready, the
    proxy is unreachable): its cells, mutations and sessions, none sent, each errored by
    ``cause``, so every report (JUnit's errored cases included) shows what the run would have
    done and why it could not, the cause stated once with how many items it touched; progress
    announces them errored, as the reports show them. Without ``cause`` (a run stopped during
    start-up) they stay ``not_run``."""
    loaded = run.loaded
    stopped = threading.Event()
    stopped.set()
    checker = build_checker(loaded.config.advanced)
    if cause is not None and on_event is not None:
        on_event = announced_errored(on_event, cause)
    try:
        context = PhaseContext(
            loaded=loaded,
            executor=Executor(_NoAgent(), checker, None, run.options, stopped, on_event),
            channel=None,
            first=True,
            stop=stopped,
            notice=lambda text: None,
            plan=run.plan,
            spool_dir=run.out_dir,
        )
        return _run_each(run.phases, run.work, context, lambda outcome: errored(outcome, cause))
    finally:
        checker.close()


def planned(
    loaded: LoadedConfig,
    names: Sequence[str],
    overrides: Overrides | None = None,
    chaos_profile: str | None = None,
    ci: bool = False,
) -> PlannedRun:
    """The command that runs the phases ``names`` of ``loaded`` (overrides applied), planned:
    each phase's work (usage errors exit 2 before anything runs) and the run's plan
    (:func:`flakestorm.engine.run_plan.plan_run`, as ``validate`` makes it): the channel,
    sessions, reset and how each phase's scenarios run, which :func:`execute` executes."""
    config = loaded.config
    overrides = overrides or Overrides()
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        raise UsageError(f"unknown phase(s): {', '.join(unknown)} (known: {', '.join(PHASES)})")
    phases = [phase for name, phase in PHASES.items() if name in names]
    order = tuple(phase.name for phase in phases)
    sessions = sessions_of(config.agent, loaded.base_dir)
    request = PhaseRequest(chaos_profile=chaos_profile, shard=overrides.shard, sessions=sessions)
    work = {phase.name: phase.plan(loaded, request) for phase in phases}
    others = {name: p for name, p in work.items() if name not in PHASE_ORDER}
    command = Command(
        order,
        chaos_profile,
        record=overrides.record is not None,
        ci=ci,
        others=tuple(s for p in others.values() for s in p.scenarios),
        channel_wanted=any(getattr(p, "needs_channel", False) for p in others.values()),
    )
    plan = plan_run(config, loaded.base_dir, command)
    return PlannedRun(loaded, overrides, phases, work, plan, _options(config, overrides))


def _options(config: Config, overrides: Overrides) -> Options:
    advanced = config.advanced
    return Options(
        concurrency=overrides.concurrency or advanced.concurrency,
        repeat=advanced.repeat,
        min_pass=advanced.effective_min_pass,
        max_invocations=advanced.max_invocations,
        session_seed=advanced.seed if config.agent.session is not None else None,
        trace_seed=advanced.seed,
    )


def _isolated(run: PlannedRun, agent: Agent) -> Resetter | None:
    """How cells are kept apart, as the plan says: a session per cell (no global reset, so
    cells run concurrently; a python agent taking ``session_id`` is given one, SPEC §12), or a
    reset before each (its resetter, returned). An agent whose source did not say whether it
    takes ``session_id`` is planned again with what the imported callable takes (``run`` then
    holds that plan); a conversation with neither is refused at its line, as ``validate``
    refuses it when the agent's source decides it (:mod:`flakestorm.agents.source`)."""
    loaded = run.loaded
    config = loaded.config
    takes = _imported_sessions(loaded, run.plan, agent)
    if run.plan.sessions is None:
        run.plan = plan_run(config, loaded.base_dir, run.plan.command, imported_sessions=takes)
    if run.plan.sessions and run.options.session_seed is None:
        run.options = dataclasses.replace(run.options, session_seed=config.advanced.seed)
    resetter = None
    if run.plan.reset:
        resetter = build_resetter(config.agent, loaded.base_dir, _locator(loaded))
    if config.conversations and not run.plan.sessions and resetter is None:
        raise ConfigError(
            [
                Problem(
                    loaded.path.name,
                    *loaded.locations.get(("golden_prompts", i), (1, 1)),
                    f"golden_prompts[{i}]",
                    no_session(config.agent.endpoint),
                )
                for i, prompt in enumerate(config.golden_prompts)
                if isinstance(prompt, Conversation)
            ]
        )
    return resetter


def _result(
    run: PlannedRun,
    outcomes: dict[str, PhaseOutcome],
    executor: Executor | None = None,
    not_started: InfrastructureError | None = None,
    judges: Sequence[str] = (),
    stopped: bool = False,
) -> RunResult:
    """The run's result: the phases scored together and the gate applied (redacted), with the
    plan it executed. ``not_started``: why the run could not start (no executor sent
    anything); ``judges``: the health line of each judge the run asked; ``stopped``: the run
    was stopped before it started (a signal during start-up)."""
    loaded, overrides, phases = run.loaded, run.overrides, run.phases
    config = loaded.config
    min_score = overrides.min_score if overrides.min_score is not None else config.scoring.min_score
    stop_reason = executor.stop_reason if executor is not None else None
    if not_started is not None:
        stop_reason = not_started.cause
    if stopped:
        stop_reason = "interrupted"
    acceptances = acceptance.judge(config.accepted, outcomes, clock.today())
    verdict, code = score_run(
        outcomes,
        config.scoring.weights.as_dict() | {p.name: p.weight(config) for p in phases},
        min_score,
        interrupted=stop_reason in ("interrupted", MISREAD) or not_started is not None,
        acceptances=acceptances,
    )
    document = config_document(config, loaded.secrets)
    result = RunResult(
        flakestorm_version=__version__,
        config_path=str(loaded.path),
        config_digest=digest_of(document),
        seed=config.advanced.seed,
        started_at=run.started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - run.t0, 3),
        complete=stop_reason is None,
        stop_reason=stop_reason,
        invocations=executor.invocations if executor is not None else 0,
        phases=outcomes,
        overall=verdict,
        exit_code=int(code),
        warnings=tuple(str(w) for w in loaded.warnings) + tuple(run.warnings),
        shard=overrides.shard,
        config=document if overrides.shard is not None else None,
        error=str(not_started) if not_started is not None else None,
        accepted=acceptances if config.accepted else None,
        judges=tuple(judges) or None,
        plan=run.plan.as_json(tuple(str(w) for w in loaded.warnings)),
    )
    return redact(result, loaded.secrets)


def _misread(executor: Executor) -> str:
    assert executor.misread is not None
    found = executor.misread.removeprefix("agent.response_path ")
    return (
        f"{found}: the agent answered, and the config reads its reply wrong; the run stopped "
        "at its first reply (fix agent.response_path, or remove it to take the answer from "
        "the usual keys)"
    )


def _imported_sessions(loaded: LoadedConfig, plan: RunPlan, agent: Agent) -> bool:
    """Whether the imported agent takes ``session_id``. A callable whose source takes it
    (the plan says so) but whose imported form does not (a decorator that changed its
    signature) is refused at ``agent.endpoint``."""
    config = loaded.config
    takes = bool(getattr(agent, "takes_session", False))
    if plan.sessions and not takes and config.agent.type is AgentType.PYTHON:
        raise ConfigError(
            [
                _locator(loaded)(
                    "agent.endpoint",
                    f'the source of "{config.agent.endpoint}" takes `session_id`, but the '
                    "callable imported does not accept it (a decorator that changes its "
                    "signature? keep it with functools.wraps and pass **kwargs through)",
                )
            ]
        )
    return takes


@contextlib.contextmanager
def _kept_if_used(directory: Path) -> Iterator[None]:
    """Remove ``directory`` afterwards when the run made it (the phases' spools are in it) and
    left nothing in it: the spools' files are unlinked as they are made, so a run whose
    reports are not written (a library call, a test) leaves no empty report directory behind.
    Writing the reports makes it again."""
    made = not directory.exists()
    try:
        yield
    finally:
        if made:
            with contextlib.suppress(OSError):  # not empty (agent.log): kept
                directory.rmdir()


def _redacting(on_notice: Callable[[str], None] | None, masked: Redactor) -> Callable[[str], None]:
    """The notice callback, given each notice with the config's secrets ``masked`` (a notice
    can quote the agent's address or command, which may come from the environment)."""
    if on_notice is None:
        return lambda text: None
    return lambda text: on_notice(masked(text))


def _reused(endpoint: str, env: Mapping[str, str]) -> str:
    """What the run says when ``agent.start`` found a process already answering at
    ``endpoint``: reused, and (when the run has a proxy ``env`` to give it) without it, so its
    calls bypass the proxy and no fault can reach them."""
    if not env:
        return f"agent already answers at {endpoint}: not starting it"
    return (
        f"Warning: a process already answers at {endpoint}, so agent.start was not run and "
        "that process was reused without the chaos proxy's environment (OPENAI_BASE_URL, "
        "HTTP_PROXY, FLAKESTORM_PROXY_URL…): its tool and LLM calls bypass the proxy, so "
        "faults cannot reach them. Stop it and run again, or start it with that environment."
    )


def _locator(loaded: LoadedConfig) -> Callable[[str, str], Problem]:
    """Point a problem found while building the agent (``agent.endpoint``) at its line."""

    def locate(field: str, message: str) -> Problem:
        path = tuple(
            int(part) if part.isdigit() else part
            for part in re.split(r"\.|\[|\]\.?", field)
            if part
        )
        return Problem(loaded.path.name, loaded.line_of(path), 1, field, message)

    return locate


@contextlib.contextmanager
def _agent_up(
    loaded: LoadedConfig,
    out_dir: Path,
    notice: Callable[[str], None],
    choice: ChannelChoice,
    record: str | None = None,
    stop: threading.Event | None = None,
    warnings: list[str] | None = None,
) -> Iterator[tuple[Agent, Channel | None, Reviver | None]]:
    """The channel ``choice`` names opened, the agent started (``agent.start``, with the
    proxy's environment) and ready, and what brings an http agent back when a request brought
    it down (its process restarted, or a wait for readiness); everything stopped and closed
    afterwards. A ``stop`` while waiting for readiness ends the wait (the run then reports its
    cells ``not_run``). Warnings for the run's report (a route of the config overriding the
    proxy service's) are appended to ``warnings``."""
    config: Config = loaded.config
    agent_config = config.agent
    with contextlib.ExitStack() as stack:
        console = None
        if agent_config.type is AgentType.PYTHON:  # its prints and logging: per invocation
            console = stack.enter_context(AgentConsole(out_dir / LOG_NAME))
        opened = stack.enter_context(
            open_channel(
                config, loaded.base_dir, choice, _locator(loaded), notice, record, warnings
            )
        )
        reviver: Reviver | None = None
        if agent_config.type is AgentType.HTTP and agent_config.start is not None:
            log = out_dir / LOG_NAME
            process = stack.enter_context(
                AgentProcess(
                    agent_config,
                    loaded.base_dir,
                    log,
                    extra_env=opened.env,
                    stop=stop,
                    on_waiting=lambda waiting: notice(waiting.line()),
                    on_restart=notice,
                )
            )
            reviver = process
            if process.already_running:
                reused = _reused(agent_config.endpoint, opened.env)
                notice(reused)
                if opened.env and warnings is not None:
                    warnings.append(reused)
            else:
                notice(f"started the agent: {agent_config.start.command} (log: {log})")
        elif agent_config.type is AgentType.HTTP:
            reviver = ReadyAgain(agent_config, stop, lambda waiting: notice(waiting.line()))
            reviver.revive()
        agent = build_agent(agent_config, loaded.base_dir, _locator(loaded), console)
        stack.callback(agent.close)
        yield agent, opened.channel, reviver
