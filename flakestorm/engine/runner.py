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
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from flakestorm import __version__
from flakestorm.agents import NO_CALL, Agent, Call, Reply
from flakestorm.agents.console import AgentConsole
from flakestorm.agents.factory import build_agent
from flakestorm.agents.process import LOG_NAME, AgentProcess
from flakestorm.agents.readiness import ReadyAgain
from flakestorm.agents.reset import build_resetter
from flakestorm.agents.source import no_session, sessions_of
from flakestorm.chaos.channels import Channel
from flakestorm.chaos.choice import ChannelChoice, choose, open_channel, undeliverable
from flakestorm.checks.invariants import build_checker
from flakestorm.config import AgentType, Config, Conversation, Proxy
from flakestorm.engine.events import Event, RunPlanned
from flakestorm.engine.executor import MISREAD, Executor, Options, Resetter
from flakestorm.engine.judging import calibrate, health, judged_in, run_checker
from flakestorm.engine.phases.phase import Phase, PhaseContext, PhaseName, PhasePlan, PhaseRequest
from flakestorm.engine.phases.registry import PHASES
from flakestorm.engine.revival import Reviver
from flakestorm.engine.unsent import announced_errored, errored
from flakestorm.errors import ConfigError, InfrastructureError, Problem, UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.redaction import Redactor, redacting
from flakestorm.results import acceptance, clock
from flakestorm.results.model import PhaseOutcome, RunResult, redact
from flakestorm.results.scoring import score_run
from flakestorm.results.shards import Shard, config_document, digest_of
from flakestorm.stopping import Stop


@dataclass(frozen=True)
class Overrides:
    """Command-line (or action input) values that win over the config."""

    concurrency: int | None = None
    seed: int | None = None
    min_score: float | None = None
    output_dir: str | None = None
    agent_url: str | None = None
    """Replaces ``agent.endpoint`` (http agents), e.g. a service container's address in CI."""
    proxy_url: str | None = None
    """Replaces ``proxy.url``."""
    ready_timeout_ms: int | None = None
    """Replaces ``agent.ready_timeout``."""
    record: str | None = None
    """Record the real LLM and tool exchanges of the run into this cassette file."""
    shard: Shard | None = None
    """Run only this part of every phase's items (``--shard K/N``)."""
    proxy_token: str | None = None
    """Replaces ``proxy.token`` (the proxy service's control API token)."""


def _rebase(url: str, old_endpoint: str, new_endpoint: str) -> str:
    """``url`` moved from ``old_endpoint``'s origin to ``new_endpoint``'s (other URLs,
    and paths relative to the endpoint, are kept)."""
    old = urllib.parse.urlsplit(old_endpoint)
    target = urllib.parse.urlsplit(url)
    if (target.scheme, target.netloc) != (old.scheme, old.netloc) or not target.netloc:
        return url
    new = urllib.parse.urlsplit(new_endpoint)
    return urllib.parse.urlunsplit(target._replace(scheme=new.scheme, netloc=new.netloc))


def output_dir(loaded: LoadedConfig, overrides: Overrides) -> Path:
    """Where reports go: ``--output``, else ``output.dir`` (relative to the working directory)."""
    return Path(overrides.output_dir or loaded.config.output.dir)


def apply_overrides(loaded: LoadedConfig, overrides: Overrides) -> LoadedConfig:
    """``loaded`` with the overrides written into its config (the config stays immutable)."""
    config = loaded.config
    agent_update: dict[str, object] = {}
    if overrides.agent_url is not None:
        if config.agent.type is not AgentType.HTTP:
            raise UsageError("--agent-url applies to http agents; this config's agent is python")
        agent_update["endpoint"] = overrides.agent_url
        agent_update["start"] = None  # the agent runs elsewhere
        # URLs on the old endpoint's origin (health, reset) move with it
        for name in ("health_endpoint", "reset_endpoint"):
            value = getattr(config.agent, name)
            if value is not None:
                agent_update[name] = _rebase(value, config.agent.endpoint, overrides.agent_url)
    if overrides.ready_timeout_ms is not None:
        agent_update["ready_timeout"] = overrides.ready_timeout_ms
    update: dict[str, object] = {}
    if agent_update:
        update["agent"] = config.agent.model_copy(update=agent_update)
    proxy_update = {
        name: value
        for name, value in (("url", overrides.proxy_url), ("token", overrides.proxy_token))
        if value is not None
    }
    if proxy_update:
        update["proxy"] = (config.proxy or Proxy()).model_copy(update=proxy_update)
    if overrides.seed is not None:
        update["advanced"] = config.advanced.model_copy(update={"seed": overrides.seed})
    if not update:
        return loaded
    return dataclasses.replace(loaded, config=config.model_copy(update=update))


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


def run_ci(
    loaded: LoadedConfig,
    overrides: Overrides = Overrides(),
    stop: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> RunResult:
    """Run every configured phase, score them together and apply the gate."""
    names = configured_phases(loaded)
    return run_phases(loaded, names, overrides, stop=stop, on_event=on_event, on_notice=on_notice)


def run_contract_phase(
    loaded: LoadedConfig,
    overrides: Overrides = Overrides(),
    stop: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> RunResult:
    """Run the config's contract against its agent and score it."""
    if loaded.config.contract is None:
        raise UsageError(
            f"{loaded.path.name} has no `contract` section: nothing for `contract run` to do"
        )
    return run_phases(
        loaded,
        [PhaseName.CONTRACT.value],
        overrides,
        stop=stop,
        on_event=on_event,
        on_notice=on_notice,
    )


def run_phases(
    loaded: LoadedConfig,
    names: Sequence[str],
    overrides: Overrides = Overrides(),
    chaos_profile: str | None = None,
    stop: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> RunResult:
    """Run the phases ``names`` against one agent, in report order, and score them together.
    ``chaos_profile`` replaces the top-level chaos with a built-in one."""
    loaded = apply_overrides(loaded, overrides)
    config = loaded.config
    notice = _redacting(on_notice, loaded.secrets)
    phases, plans, choice = _planned(loaded, names, overrides, chaos_profile)
    stop = stop or Stop()
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.perf_counter()
    out_dir = output_dir(loaded, overrides)
    options = _options(config, overrides)
    if on_event is not None:
        on_event(RunPlanned(sum(len(plan.cells) for plan in plans.values())))
    run_warnings: list[str] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(_kept_if_used(out_dir))
        stack.enter_context(redacting(Redactor(loaded.secrets)))
        if stop.is_set():  # stopped during start-up: nothing is started, judged nor sent
            outcomes = _not_started(loaded, phases, plans, options, on_event, out_dir)
            return _result(
                loaded, overrides, outcomes, phases, None, run_warnings, started, t0, stopped=True
            )
        checker = run_checker(loaded)
        stack.callback(checker.close)
        try:  # the judges agree with their examples before the agent is called
            calibrate(loaded, checker, judged_in(loaded, plans))
            up = _agent_up(loaded, out_dir, notice, choice, overrides.record, stop, run_warnings)
            agent, channel, reviver = stack.enter_context(up)
        except InfrastructureError as exc:  # never ready, no proxy, no judge: reports say why
            outcomes = _not_started(loaded, phases, plans, options, on_event, out_dir, exc.cause)
            return _result(
                loaded,
                overrides,
                outcomes,
                phases,
                None,
                run_warnings,
                started,
                t0,
                exc,
                judges=health(checker),
            )
        sessions, resetter, options = _isolation(loaded, agent, options)
        try:
            begin = channel.begin if channel is not None else None
            executor = Executor(
                agent, checker, resetter, options, stop, on_event, reviver, begin=begin
            )
            context = PhaseContext(
                loaded=loaded,
                executor=executor,
                channel=channel,
                has_reset=resetter is not None,
                first=True,
                stop=stop,
                notice=notice,
                has_session=sessions,
                spool_dir=out_dir,
            )
            outcomes = _run_each(phases, plans, context)
            # the interaction log is bounded: what it could not keep is said, not hidden
            lost = channel.lost() if channel is not None else None
            if lost is not None:
                run_warnings.append(lost)
            judges = health(checker)
        finally:
            close_resetter = getattr(resetter, "close", None)
            if callable(close_resetter):
                close_resetter()
    if executor.misread is not None:  # one located error, not a column of failed cells
        run_warnings.insert(0, str(_locator(loaded)("agent.response_path", _misread(executor))))
    return _result(
        loaded, overrides, outcomes, phases, executor, run_warnings, started, t0, judges=judges
    )


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
    loaded: LoadedConfig,
    phases: Sequence[Phase],
    plans: dict[str, PhasePlan],
    options: Options,
    on_event: Callable[[Event], None] | None,
    out_dir: Path,
    cause: str | None = None,
) -> dict[str, PhaseOutcome]:
    """Each phase's outcome when the run could not start (the agent never became ready, the
    proxy is unreachable): its cells, mutations and sessions, none sent, each errored by
    ``cause``, so every report (JUnit's errored cases included) shows what the run would have
    done and why it could not, the cause stated once with how many items it touched; progress
    announces them errored, as the reports show them. Without ``cause`` (a run stopped during
    start-up) they stay ``not_run``."""
    stopped = threading.Event()
    stopped.set()
    checker = build_checker(loaded.config.advanced)
    if cause is not None and on_event is not None:
        on_event = announced_errored(on_event, cause)
    try:
        context = PhaseContext(
            loaded=loaded,
            executor=Executor(_NoAgent(), checker, None, options, stopped, on_event),
            channel=None,
            has_reset=False,
            first=True,
            stop=stopped,
            notice=lambda text: None,
            has_session=False,
            spool_dir=out_dir,
        )
        return _run_each(phases, plans, context, lambda outcome: errored(outcome, cause))
    finally:
        checker.close()


def _planned(
    loaded: LoadedConfig,
    names: Sequence[str],
    overrides: Overrides,
    chaos_profile: str | None,
) -> tuple[list[Phase], dict[str, PhasePlan], ChannelChoice]:
    """The phases to run, each planned (usage errors exit 2 before anything runs), and the
    channel their faults take (:func:`flakestorm.chaos.choice.choose`, as ``validate``'s
    plan chooses it)."""
    config = loaded.config
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        raise UsageError(f"unknown phase(s): {', '.join(unknown)} (known: {', '.join(PHASES)})")
    phases = [phase for name, phase in PHASES.items() if name in names]
    request = PhaseRequest(chaos_profile=chaos_profile, shard=overrides.shard)
    plans = {phase.name: phase.plan(loaded, request) for phase in phases}
    scenarios = [s for plan in plans.values() for s in plan.scenarios]
    chaos = any(s.needs_delivery for s in scenarios) or any(
        getattr(plan, "needs_channel", False) for plan in plans.values()
    )
    for scenario in scenarios if chaos else ():
        lacks = undeliverable(config.agent, config.proxy, scenario)
        if lacks:  # a scenario validate could not see (--chaos-profile)
            raise UsageError(f"scenario {scenario.name!r} {lacks[0][1]}")
    return phases, plans, choose(config, chaos, record=overrides.record is not None)


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


def _isolation(
    loaded: LoadedConfig, agent: Agent, options: Options
) -> tuple[bool, Resetter | None, Options]:
    """How cells are kept apart: a session per cell (no global reset, so cells run
    concurrently; a python agent taking ``session_id`` is given one, SPEC §12), or a reset
    before each; a conversation with neither is refused at its line, as ``validate`` refuses
    it when the agent's source decides it (:mod:`flakestorm.agents.source`)."""
    config = loaded.config
    sessions = _sessions(loaded, agent)
    if sessions and options.session_seed is None:
        options = dataclasses.replace(options, session_seed=config.advanced.seed)
    resetter = None if sessions else build_resetter(config.agent, loaded.base_dir, _locator(loaded))
    if config.conversations and not sessions and resetter is None:
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
    return sessions, resetter, options


def _result(
    loaded: LoadedConfig,
    overrides: Overrides,
    outcomes: dict[str, PhaseOutcome],
    phases: Sequence[Phase],
    executor: Executor | None,
    run_warnings: list[str],
    started: datetime.datetime,
    t0: float,
    not_started: InfrastructureError | None = None,
    judges: Sequence[str] = (),
    stopped: bool = False,
) -> RunResult:
    """The run's result: the phases scored together and the gate applied (redacted).
    ``not_started``: why the run could not start (no executor sent anything); ``judges``: the
    health line of each judge the run asked; ``stopped``: the run was stopped before it
    started (a signal during start-up)."""
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
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - t0, 3),
        complete=stop_reason is None,
        stop_reason=stop_reason,
        invocations=executor.invocations if executor is not None else 0,
        phases=outcomes,
        overall=verdict,
        exit_code=int(code),
        warnings=tuple(str(w) for w in loaded.warnings) + tuple(run_warnings),
        shard=overrides.shard,
        config=document if overrides.shard is not None else None,
        error=str(not_started) if not_started is not None else None,
        accepted=acceptances if config.accepted else None,
        judges=tuple(judges) or None,
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


def _sessions(loaded: LoadedConfig, agent: Agent) -> bool:
    """Whether the agent keeps a session per cell: what its source says (the plan's answer,
    the one ``validate`` counted with), else what the imported callable takes. A callable
    whose source takes ``session_id`` but whose imported form does not (a decorator that
    changed its signature) is refused at ``agent.endpoint``."""
    config = loaded.config
    decided = sessions_of(config.agent, loaded.base_dir)
    takes = bool(getattr(agent, "takes_session", False))
    if decided is None:
        return takes and config.agent.reset_function is None
    if decided and not takes and config.agent.type is AgentType.PYTHON:
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
    return decided


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


def _redacting(
    on_notice: Callable[[str], None] | None, secrets: Iterable[str]
) -> Callable[[str], None]:
    """The notice callback, given each notice with the config's secrets masked (a notice can
    quote the agent's address or command, which may come from the environment)."""
    if on_notice is None:
        return lambda text: None
    masked = Redactor(secrets)
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
