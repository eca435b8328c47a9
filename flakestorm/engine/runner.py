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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flakestorm import __version__
from flakestorm.agents import Agent
from flakestorm.agents.factory import build_agent
from flakestorm.agents.process import AgentProcess
from flakestorm.agents.readiness import ReadyAgain
from flakestorm.agents.reset import build_resetter
from flakestorm.agents.source import no_session
from flakestorm.chaos.delivery import Channel, ProxyChannel, WrapperChannel
from flakestorm.chaos.faults import LLM_REQUEST_ATTACKS, TOOL_RESULT_ATTACKS
from flakestorm.checks.invariants import build_checker
from flakestorm.config import AgentType, Config, Conversation, Proxy, Scenario, ToolDelivery
from flakestorm.engine.events import Event, RunPlanned
from flakestorm.engine.executor import Executor, Options
from flakestorm.engine.phases.phase import PhaseContext, PhaseName, PhaseRequest
from flakestorm.engine.phases.registry import PHASES
from flakestorm.engine.revival import Reviver
from flakestorm.errors import ConfigError, Problem, UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.redaction import Redactor, redacting
from flakestorm.results.model import PhaseOutcome, RunResult, redact
from flakestorm.results.scoring import score_run
from flakestorm.results.shards import Shard, config_document, digest_of
from flakestorm.stopping import Stop

if TYPE_CHECKING:
    from flakestorm.chaos.wrappers.wrapping import Wrapping


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
    if overrides.proxy_url is not None:
        proxy = config.proxy or Proxy()
        update["proxy"] = proxy.model_copy(update={"url": overrides.proxy_url})
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
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        raise UsageError(f"unknown phase(s): {', '.join(unknown)} (known: {', '.join(PHASES)})")
    phases = [phase for name, phase in PHASES.items() if name in names]
    request = PhaseRequest(chaos_profile=chaos_profile, shard=overrides.shard)
    plans = {phase.name: phase.plan(loaded, request) for phase in phases}
    stop = stop or Stop()
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.perf_counter()
    out_dir = output_dir(loaded, overrides)
    advanced = config.advanced
    options = Options(
        concurrency=overrides.concurrency or advanced.concurrency,
        repeat=advanced.repeat,
        min_pass=advanced.effective_min_pass,
        max_invocations=advanced.max_invocations,
        session_seed=advanced.seed if config.agent.session is not None else None,
        trace_seed=advanced.seed,
    )
    scenarios = [s for plan in plans.values() for s in plan.scenarios]
    chaos = any(s.needs_delivery for s in scenarios) or any(
        getattr(plan, "needs_channel", False) for plan in plans.values()
    )
    if chaos and config.agent.type is AgentType.PYTHON:
        _check_python_delivery(config, scenarios)
    outcomes: dict[str, PhaseOutcome] = {}
    if on_event is not None:
        on_event(RunPlanned(sum(len(plan.cells) for plan in plans.values())))
    run_warnings: list[str] = []
    with (
        _kept_if_used(out_dir),
        redacting(Redactor(loaded.secrets)),
        _agent_up(loaded, out_dir, notice, chaos, overrides.record, stop, run_warnings) as (
            agent,
            channel,
            reviver,
        ),
    ):
        # a session isolates each cell: no global reset, so cells run concurrently; a python
        # agent taking `session_id` (and no reset_function) is given one (SPEC §12)
        sessions = config.agent.session is not None or (
            getattr(agent, "takes_session", False) and config.agent.reset_function is None
        )
        if sessions and options.session_seed is None:
            options = dataclasses.replace(options, session_seed=advanced.seed)
        resetter = (
            None if sessions else build_resetter(config.agent, loaded.base_dir, _locator(loaded))
        )
        if config.conversations and not sessions and resetter is None:
            # what `validate` says when the agent's source decides it (agents/source.py)
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
        checker = build_checker(advanced)
        try:
            begin = channel.begin if channel is not None else None
            executor = Executor(
                agent, checker, resetter, options, stop, on_event, reviver, begin=begin
            )
            for phase in phases:
                context = PhaseContext(
                    loaded=loaded,
                    executor=executor,
                    channel=channel,
                    has_reset=resetter is not None,
                    first=not outcomes,
                    stop=stop,
                    notice=notice,
                    has_session=sessions,
                    spool_dir=out_dir,
                )
                outcome = phase.run(plans[phase.name], context)
                outcomes[phase.name] = dataclasses.replace(
                    outcome, score=phase.score(outcome, config)
                )
            # the interaction log is bounded: what it could not keep is said, not hidden
            lost = channel.lost() if channel is not None else None
            if lost is not None:
                run_warnings.append(lost)
        finally:
            checker.close()
            close_resetter = getattr(resetter, "close", None)
            if callable(close_resetter):
                close_resetter()
    min_score = overrides.min_score if overrides.min_score is not None else config.scoring.min_score
    weights = config.scoring.weights.as_dict() | {p.name: p.weight(config) for p in phases}
    stop_reason = executor.stop_reason
    verdict, code = score_run(
        outcomes, weights, min_score, interrupted=stop_reason == "interrupted"
    )
    document = config_document(config, loaded.secrets)
    result = RunResult(
        flakestorm_version=__version__,
        config_path=str(loaded.path),
        config_digest=digest_of(document),
        seed=advanced.seed,
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - t0, 3),
        complete=stop_reason is None,
        stop_reason=stop_reason,
        invocations=executor.invocations,
        phases=outcomes,
        overall=verdict,
        exit_code=int(code),
        warnings=tuple(str(w) for w in loaded.warnings) + tuple(run_warnings),
        shard=overrides.shard,
        config=document if overrides.shard is not None else None,
    )
    return redact(result, loaded.secrets)


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


def proxy_env(proxy_url: str, agent_endpoint: str) -> dict[str, str]:
    """The environment an agent started by flakestorm gets so its traffic goes through the
    chaos proxy: LLM SDK base URLs, ``HTTP_PROXY``/``HTTPS_PROXY`` for everything else (HTTPS
    as ``CONNECT`` tunnels; not for the agent's own address), and ``FLAKESTORM_PROXY_URL`` for
    ``/tools/<name>`` routes."""
    host = urllib.parse.urlsplit(agent_endpoint).hostname or "127.0.0.1"
    no_proxy = ",".join(dict.fromkeys([host, "localhost"]))
    return {
        "FLAKESTORM_PROXY_URL": proxy_url,
        "OPENAI_BASE_URL": f"{proxy_url}/llm/openai/v1",
        "ANTHROPIC_BASE_URL": f"{proxy_url}/llm/anthropic",
        "HTTP_PROXY": proxy_url,
        "http_proxy": proxy_url,
        "HTTPS_PROXY": proxy_url,
        "https_proxy": proxy_url,
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


def _check_python_delivery(config: Config, scenarios: Sequence[Scenario]) -> None:
    """A python agent's faults need something to wrap; say what is missing (exit 2)."""
    agent = config.agent
    has_tools = bool(
        agent.tools or agent.tool_registry or python_routes(config) or python_mcp(config)
    )
    for scenario in scenarios:
        llm_side = scenario.llm_faults or any(
            a.type in LLM_REQUEST_ATTACKS for a in scenario.context_attacks
        )
        if llm_side and agent.llm is None:
            raise UsageError(
                f"scenario {scenario.name!r} has LLM faults, but the python agent names no "
                "`agent.llm` callable to wrap: set agent.llm to the module:attr the agent calls "
                "its LLM through (LLM faults are never skipped silently)"
            )
        tool_side = any(a.type in TOOL_RESULT_ATTACKS for a in scenario.context_attacks)
        if (scenario.tool_faults or tool_side) and not has_tools:
            raise UsageError(
                f"scenario {scenario.name!r} has tool faults or tool-result attacks, but the "
                "python agent names no `agent.tools` or `agent.tool_registry` to wrap, nor "
                "`proxy.tools` whose HTTP calls to fault"
            )


def python_routes(config: Config) -> dict[str, str]:
    """The tools whose HTTP calls a python agent's clients are routed through the in-process
    proxy for (SPEC §10): ``proxy.tools``; none for an http agent. A tool also named in
    ``agent.tools`` (or its registry) by the same name takes its faults at the HTTP level,
    unless ``agent.tool_delivery`` is ``callable`` (then its URL is not routed)."""
    if config.agent.type is not AgentType.PYTHON or config.proxy is None:
        return {}
    return dict(config.proxy.tools)


def python_mcp(config: Config) -> dict[str, str]:
    """The MCP servers (``proxy.mcp``, streamable HTTP) whose calls a python agent's clients
    are routed through the in-process proxy for; none for an http agent."""
    if config.agent.type is not AgentType.PYTHON or config.proxy is None:
        return {}
    return dict(config.proxy.mcp_routes)


def _routed_in_process(
    loaded: LoadedConfig,
    routes: dict[str, str],
    wrapping: Wrapping,
    record: str | None,
    stack: contextlib.ExitStack,
    notice: Callable[[str], None],
) -> Channel:
    """The in-process proxy for a python agent's HTTP tool calls, the process's HTTP clients
    routed through it for ``routes``, and the channel over it and the wrappers."""
    from flakestorm.chaos.delivery import InProcessChannel
    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.chaos.proxy.upstreams.cassette import resolve_cassette
    from flakestorm.chaos.routing import Router, Routing

    proxy_config = loaded.config.proxy or Proxy()
    if proxy_config.url:
        raise UsageError(
            f"proxy.url ({proxy_config.url}) is for http agents: a python agent's HTTP tool "
            "calls (proxy.tools) go through a proxy flakestorm runs in process; remove proxy.url"
        )
    proxy = ChaosProxy(
        "127.0.0.1",
        0,
        llm_upstream=resolve_cassette(proxy_config.llm_upstream, loaded.base_dir),
        tools=routes,
        mcp=python_mcp(loaded.config),
        token=proxy_config.token,
        log=wrapping.log,
        record=record,
    )
    stack.enter_context(proxy)
    routing = stack.enter_context(Routing(Router(proxy.url, routes, proxy.mcp)))
    routed = [*routes, *(f"MCP server {name}" for name in proxy.mcp)]
    notice(
        f"chaos proxy (in-process) listening on {proxy.url}: the HTTP calls of "
        f"{', '.join(routed)} through {', '.join(routing.libraries)} are routed through it"
    )
    return InProcessChannel(wrapping, proxy, routes, proxy_config.mcp)


@contextlib.contextmanager
def _agent_up(
    loaded: LoadedConfig,
    out_dir: Path,
    notice: Callable[[str], None],
    chaos: bool,
    record: str | None = None,
    stop: threading.Event | None = None,
    warnings: list[str] | None = None,
) -> Iterator[tuple[Agent, Channel | None, Reviver | None]]:
    """The agent, started (``agent.start``) and ready, the channel its faults go through
    (``chaos``: some scenario needs one), and what brings an http agent back when a request
    brought it down (its process restarted, or a wait for readiness); everything stopped and
    closed afterwards. A ``stop`` while waiting for readiness ends the wait (the run then
    reports its cells ``not_run``). Warnings for the run's report (a route of the config
    overriding the proxy service's) are appended to ``warnings``."""
    warnings = warnings if warnings is not None else []
    from flakestorm.chaos.proxy.control import ProxyControl
    from flakestorm.chaos.proxy.upstreams.cassette import resolve_cassette

    config: Config = loaded.config
    agent_config = config.agent
    with contextlib.ExitStack() as stack:
        channel: Channel | None = None
        reviver: Reviver | None = None
        extra_env: dict[str, str] = {}
        routes = python_routes(config)
        if record is not None and (
            (agent_config.type is not AgentType.HTTP and not routes)
            or (config.proxy is not None and config.proxy.url)
        ):
            raise UsageError(
                "--record needs the in-process proxy: an http agent, or a python agent with "
                "proxy.tools, and no proxy.url (to record through a proxy service, start it "
                "with `flakestorm proxy --record`)"
            )
        if agent_config.type is AgentType.HTTP and (
            chaos or config.proxy is not None or record is not None
        ):
            proxy_config = config.proxy or Proxy()
            if proxy_config.url:
                control = ProxyControl(proxy_config.url, proxy_config.token)
                stack.callback(control.close)
                control.health()  # ProxyUnreachable (exit 3) with how to fix it
                control.reset()
                # the config is the one source of truth for the service's routes (SPEC §9)
                llm_upstream = resolve_cassette(proxy_config.llm_upstream, loaded.base_dir)
                pushed = proxy_config.tools, llm_upstream, proxy_config.mcp_routes
                for warning in control.route(*pushed):
                    warnings.append(warning)
                    notice(f"warning: {warning}")
            else:
                from flakestorm.chaos.proxy.server import ChaosProxy

                proxy = ChaosProxy(
                    "127.0.0.1",
                    0,
                    llm_upstream=resolve_cassette(proxy_config.llm_upstream, loaded.base_dir),
                    tools=proxy_config.tools,
                    mcp=proxy_config.mcp_routes,
                    token=proxy_config.token,
                    record=record,
                )
                stack.enter_context(proxy)
                notice(f"chaos proxy (in-process) listening on {proxy.url}")
                control = ProxyControl(proxy.url, proxy_config.token)
                stack.callback(control.close)
            extra_env = proxy_env(control.url, agent_config.endpoint)
            channel = ProxyChannel(control, proxy_config.mcp)
        if agent_config.type is AgentType.HTTP and agent_config.start is not None:
            log = out_dir / "agent.log"
            process = stack.enter_context(
                AgentProcess(
                    agent_config,
                    loaded.base_dir,
                    log,
                    extra_env=extra_env,
                    stop=stop,
                    on_waiting=lambda waiting: notice(waiting.line()),
                    on_restart=notice,
                )
            )
            reviver = process
            if process.already_running:
                notice(f"agent already answers at {agent_config.endpoint}: not starting it")
            else:
                notice(f"started the agent: {agent_config.start.command} (log: {log})")
        elif agent_config.type is AgentType.HTTP:
            reviver = ReadyAgain(agent_config, stop, lambda waiting: notice(waiting.line()))
            reviver.revive()
        if agent_config.type is AgentType.PYTHON and (chaos or (routes and record)):
            from flakestorm.chaos.interactions import InteractionLog
            from flakestorm.chaos.wrappers.wrapping import Wrapping

            at_http = agent_config.tool_delivery in (None, ToolDelivery.HTTP)
            wrapping = stack.enter_context(
                Wrapping(
                    agent_config,
                    loaded.base_dir,
                    InteractionLog(),
                    _locator(loaded),
                    routed=routes if at_http else (),
                )
            )
            channel = WrapperChannel(wrapping)
            # tool_delivery: callable — a wrapped tool's URL is not routed
            routes = {k: v for k, v in routes.items() if at_http or not wrapping.wraps(k)}
            if routes or python_mcp(config):
                channel = _routed_in_process(loaded, routes, wrapping, record, stack, notice)
        agent = build_agent(agent_config, loaded.base_dir, _locator(loaded))
        stack.callback(agent.close)
        yield agent, channel, reviver
