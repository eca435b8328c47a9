"""One run, end to end: config -> agent up -> phases -> scores -> :class:`RunResult`.

Nothing here prints or exits: notices go to ``on_notice``, progress to ``on_event``, and the
caller writes reports and maps the result to an exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from flakestorm import __version__
from flakestorm.agents import Agent
from flakestorm.agents.factory import build_agent
from flakestorm.agents.process import AgentProcess
from flakestorm.agents.readiness import wait_ready
from flakestorm.agents.reset import build_resetter
from flakestorm.config import AgentType, Config, Proxy
from flakestorm.errors import Problem, UsageError
from flakestorm.executor import Event, Executor, Options
from flakestorm.invariants import build_checker
from flakestorm.loader import LoadedConfig
from flakestorm.phases.contract import prepare, run_contract
from flakestorm.results import RunResult, Status
from flakestorm.scoring import exit_code, overall


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


UNAVAILABLE_PHASES = {
    "mutations": "the mutation phase",
    "replays": "the replay phase",
    "chaos": "the chaos-only phase",
}
"""Config sections whose phase this version cannot run yet: `ci` refuses them, never skips."""


def run_ci(
    loaded: LoadedConfig,
    overrides: Overrides = Overrides(),
    stop: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> RunResult:
    """Run every configured phase, score them together and apply the gate."""
    config = loaded.config
    unavailable = [
        f"`{section}` ({what})"
        for section, what in UNAVAILABLE_PHASES.items()
        if getattr(config, section) is not None
    ]
    if unavailable:
        raise UsageError(
            f"{loaded.path.name} configures {', '.join(unavailable)}, which this version of "
            "flakestorm cannot run yet; remove the section(s) to run the other phases "
            "(flakestorm never skips a configured phase silently)"
        )
    if config.contract is None:
        raise UsageError(f"{loaded.path.name} configures no phase to run (add a `contract`)")
    return run_contract_phase(loaded, overrides, stop, on_event, on_notice)


def run_contract_phase(
    loaded: LoadedConfig,
    overrides: Overrides = Overrides(),
    stop: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> RunResult:
    """Run the config's contract against its agent and score it."""
    loaded = apply_overrides(loaded, overrides)
    config = loaded.config
    notice = on_notice or (lambda text: None)
    if config.contract is None:
        raise UsageError(
            f"{loaded.path.name} has no `contract` section: nothing for `contract run` to do"
        )
    plan = prepare(config.contract, config.golden_prompts)
    stop = stop or threading.Event()
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.perf_counter()
    out_dir = output_dir(loaded, overrides)
    advanced = config.advanced
    options = Options(
        concurrency=overrides.concurrency or advanced.concurrency,
        repeat=advanced.repeat,
        min_pass=advanced.effective_min_pass,
        max_invocations=advanced.max_invocations,
    )
    with _agent_up(loaded, out_dir, notice) as agent:
        resetter = build_resetter(config.agent, loaded.base_dir, _locator(loaded))
        checker = build_checker(advanced)
        try:
            executor = Executor(agent, checker, resetter, options, stop, on_event)
            lines = {
                inv.id: loaded.line_of(("contract", "invariants", i))
                for i, inv in enumerate(config.contract.invariants)
            }
            outcome = run_contract(
                plan, executor, config.golden_prompts, resetter is not None, lines
            )
        finally:
            checker.close()
    min_score = overrides.min_score if overrides.min_score is not None else config.scoring.min_score
    weights = config.scoring.weights.as_dict()
    verdict = overall(
        {"contract": outcome.score.score}, weights, min_score, outcome.score.critical_failures
    )
    stop_reason = executor.stop_reason
    errored = sum(1 for c in outcome.cells if c.status is Status.ERRORED)
    code = exit_code(verdict, errored, interrupted=stop_reason == "interrupted")
    return RunResult(
        flakestorm_version=__version__,
        config_path=str(loaded.path),
        config_digest=loaded.digest,
        seed=advanced.seed,
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - t0, 3),
        complete=stop_reason is None,
        stop_reason=stop_reason,
        invocations=executor.invocations,
        contract=outcome,
        overall=verdict,
        exit_code=int(code),
        warnings=tuple(str(w) for w in loaded.warnings),
    )


def _locator(loaded: LoadedConfig) -> Callable[[str, str], Problem]:
    """Point a problem found while building the agent (``agent.endpoint``) at its line."""

    def locate(field: str, message: str) -> Problem:
        path = tuple(field.split("."))
        return Problem(loaded.path.name, loaded.line_of(path), 1, field, message)

    return locate


@contextlib.contextmanager
def _agent_up(
    loaded: LoadedConfig, out_dir: Path, notice: Callable[[str], None]
) -> Iterator[Agent]:
    """The agent, started (``agent.start``) and ready; stopped and closed afterwards."""
    config: Config = loaded.config
    with contextlib.ExitStack() as stack:
        if config.agent.type is AgentType.HTTP and config.agent.start is not None:
            process = stack.enter_context(
                AgentProcess(config.agent, loaded.base_dir, out_dir / "agent.log")
            )
            if process.already_running:
                notice(f"agent already answers at {config.agent.endpoint}: not starting it")
            else:
                log = out_dir / "agent.log"
                notice(f"started the agent: {config.agent.start.command} (log: {log})")
        elif config.agent.type is AgentType.HTTP:
            wait_ready(config.agent)
        agent = build_agent(config.agent, loaded.base_dir, _locator(loaded))
        close = getattr(agent, "close", None)
        if callable(close):
            stack.callback(close)
        yield agent
