"""The commands that run phases: ``contract run``, ``contract score``, ``run`` and ``ci``, and the
pieces every running command shares (:func:`run_options`, :func:`execute`, :func:`conclude`)."""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flakestorm.cli.app import (
    StopsCleanly,
    config_option,
    contract,
    load,
    main,
    report_error,
    seed_option,
    starting_up,
)
from flakestorm.errors import ExitCode, FlakestormError, UsageError

if TYPE_CHECKING:
    from flakestorm.engine.runner import Overrides


OVERRIDDEN = ("min_score", "concurrency", "seed", "record", "output_dir", "shard")
"""The options of :func:`run_options` that override the config: fields of
:class:`~flakestorm.engine.runner.Overrides` by the same names."""


def run_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options every running command takes: ``-c/--config`` and the values that override
    the config. The command is called with ``config_path`` and ``overrides`` (an
    :class:`~flakestorm.engine.runner.Overrides`, made by keyword) besides its own options."""

    @functools.wraps(function)
    def command(**options: Any) -> Any:
        values = {name: options.pop(name) for name in OVERRIDDEN}
        with starting_up():  # the engine's import is start-up, as reading the config is
            from flakestorm.engine.runner import Overrides

        return function(overrides=Overrides(**values), **options)

    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        config_option,
        click.option(
            "--min-score",
            type=click.FloatRange(0, 100),
            default=None,
            help="Fail when the score is below this (overrides scoring.min_score).",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(1, 256),
            default=None,
            help="Invocations in flight at once (overrides advanced.concurrency).",
        ),
        seed_option(),
        click.option(
            "--record",
            type=click.Path(dir_okay=False),
            default=None,
            help="Record the real LLM and tool exchanges into this cassette file "
            "(replay with proxy.llm_upstream: cassette:PATH).",
        ),
        click.option(
            "--output",
            "output_dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Report directory (overrides output.dir).",
        ),
        click.option(
            "--shard",
            default=None,
            metavar="K/N",
            callback=_shard,
            help="Run only shard K of N: every N-th cell from the K-th, in every phase "
            "(combine the shards' results.json with `flakestorm merge`).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _shard(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from flakestorm.results.shards import Shard, ShardError

    if value is None:
        return None
    try:
        return Shard.parse(value)
    except ShardError as exc:
        raise click.BadParameter(str(exc)) from None


class Progress:
    """A progress bar on a terminal; a line per finished scenario otherwise (CI logs)."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._tty = enabled and sys.stderr.isatty()
        self._lock = threading.Lock()
        self._total = 0
        self._done = 0

    def __call__(self, event: Any) -> None:
        from flakestorm.engine.events import (
            CellFinished,
            ProbeFinished,
            RunPlanned,
            ScenarioFinished,
        )
        from flakestorm.reporters.terminal import scenario_line

        if not self._enabled:
            return
        with self._lock:
            if isinstance(event, RunPlanned):
                self._total = event.cells
            elif self._tty and isinstance(event, (CellFinished, ProbeFinished)):
                # one bar for the whole run, across scenarios and phases
                self._done += 1
                total = max(self._total, self._done)
                width = 30
                filled = int(width * self._done / total)
                bar = "#" * filled + "." * (width - filled)
                click.echo(f"\r[{bar}] {self._done}/{total} cells", err=True, nl=False)
                if self._done == total:
                    click.echo("", err=True)
            elif not self._tty and isinstance(event, ScenarioFinished):
                click.echo(scenario_line(event.name, event.results), err=True)
            elif not self._tty and isinstance(event, ProbeFinished) and event.done == event.total:
                sent = "" if event.sent == event.total else f"{event.sent} of "
                click.echo(f"mutation: {sent}{event.total} mutations sent", err=True)


def execute(
    config_path: Path,
    overrides: Overrides,
    progress: bool,
    ci: bool,
    phases: tuple[str, ...] = (),
    profile: str | None = None,
) -> Any:
    """Load, run with Ctrl-C/SIGTERM stopping cleanly, write the reports; return the result.
    The signals are taken over before the config is read: a signal from then on (or one that
    came during start-up) still writes every report, its cells ``not_run``, and exits 3."""
    from flakestorm.stopping import GRACE_S, Stop, stopping_on_signals

    def stopping() -> None:
        click.echo(
            f"\nstopping: invocations in flight get {GRACE_S:g} s to finish, then the reports are "
            "written (Ctrl-C again: write them now)",
            err=True,
        )

    stop = Stop()
    with stopping_on_signals(stop, stopping), _cancelled_exits_3(stop):
        with starting_up():  # start-up: the engine's import and the config's read
            from flakestorm.engine.runner import (
                output_dir,
                run_ci,
                run_contract_phase,
                run_phases,
            )
            from flakestorm.reporters.registry import write_reports

            loaded = load(config_path)
        redact = loaded.redactor  # the one redaction function, for every line printed
        for warning in loaded.warnings:
            click.echo(redact(f"warning: {warning}"), err=True)
        run: Callable[..., Any] = run_ci if ci else run_contract_phase
        if phases:

            def run(loaded: Any, overrides: Any, **kwargs: Any) -> Any:
                return run_phases(loaded, phases, overrides, chaos_profile=profile, **kwargs)

        out = output_dir(loaded, overrides)
        try:
            result = run(
                loaded,
                overrides,
                stop=stop,
                on_event=Progress(progress),
                on_notice=(lambda text: click.echo(redact(text), err=True)) if progress else None,
            )
        except FlakestormError as exc:
            if exc.exit_code is not ExitCode.INFRASTRUCTURE_ERROR:
                raise
            # the run could not start or finish: the error, then the verdict line that says so
            from flakestorm.reporters.terminal import error_verdict_line

            report_error(exc, redact)
            click.echo(error_verdict_line(exc.cause, redact(str(exc))))
            sys.exit(int(exc.exit_code))
        write_reports(result, out, loaded.config.output.formats)
    return result, out


@contextmanager
def _cancelled_exits_3(stop: threading.Event) -> Iterator[None]:
    """A config or usage error (exit 2) of a run a signal had already stopped is said, and the
    run exits 3: a cancelled run always exits 3 (SPEC §5)."""
    try:
        yield
    except FlakestormError as exc:
        if not stop.is_set() or exc.exit_code is ExitCode.INFRASTRUCTURE_ERROR:
            raise
        report_error(exc)
        click.echo("error: interrupted: the run was cancelled (exit 3)", err=True)
        sys.exit(int(ExitCode.INFRASTRUCTURE_ERROR))


def conclude(result: Any, out: Path) -> None:
    """Print the matrix and verdict, where the reports are, and exit with the run's code."""
    from flakestorm.reporters import terminal

    click.echo(terminal.render(result), nl=False)
    click.echo(f"Reports: {out}/")
    if result.shard is not None:
        click.echo(
            f"This is shard {result.shard} of the run (its part only): merge the "
            f"{result.shard.total} shards' results.json with `flakestorm merge PATHS... -o DIR` "
            "for the run's verdict.",
            err=True,
        )
    sys.exit(result.exit_code)


@contract.command("run", cls=StopsCleanly)
@run_options
def contractexecute(config_path: Path, overrides: Overrides) -> None:
    """Run every invariant under every scenario and print the matrix."""
    result, out = execute(config_path, overrides, progress=True, ci=False)
    conclude(result, out)


@main.command("run", cls=StopsCleanly)
@run_options
@click.option("--chaos", is_flag=True, help="Apply the top-level chaos (or --chaos-profile).")
@click.option("--chaos-only", is_flag=True, help="Run only the chaos phase (needs --chaos).")
@click.option(
    "--chaos-profile",
    default=None,
    metavar="NAME",
    help="A built-in chaos profile instead of the config's chaos section: api_outage, "
    "degraded_llm, hostile_tools, high_latency, cascading_failure, indirect_injection, "
    "model_version_drift, flaky_dependency, healing_outage.",
)
def run_command(
    config_path: Path,
    overrides: Overrides,
    chaos: bool,
    chaos_only: bool,
    chaos_profile: str | None,
) -> None:
    """Run the mutation phase (--chaos adds the chaos-only phase, --chaos-only runs only that)
    and score it."""
    if (chaos_only or chaos_profile) and not chaos:
        raise UsageError("--chaos-only and --chaos-profile need --chaos")
    phases = ("chaos",) if chaos_only else ("mutation", "chaos") if chaos else ("mutation",)
    result, out = execute(
        config_path, overrides, progress=True, ci=False, phases=phases, profile=chaos_profile
    )
    conclude(result, out)


@main.command("ci", cls=StopsCleanly)
@run_options
@click.option("--agent-url", default=None, help="The agent's endpoint (overrides agent.endpoint).")
@click.option("--proxy-url", default=None, help="The chaos proxy (overrides proxy.url).")
@click.option(
    "--ready-timeout",
    "ready_timeout_ms",
    type=click.IntRange(1),
    default=None,
    help="How long to wait for the agent, ms (overrides agent.ready_timeout).",
)
def ci(
    config_path: Path,
    overrides: Overrides,
    agent_url: str | None,
    proxy_url: str | None,
    ready_timeout_ms: int | None,
) -> None:
    """Run every configured phase, write every report, exit with the gate's code."""
    overrides = dataclasses.replace(
        overrides, agent_url=agent_url, proxy_url=proxy_url, ready_timeout_ms=ready_timeout_ms
    )
    result, out = execute(config_path, overrides, progress=True, ci=True)
    conclude(result, out)


@contract.command("score", cls=StopsCleanly)
@run_options
def contract_score(config_path: Path, overrides: Overrides) -> None:
    """Run the contract and print only the resilience score; exit with the gate's code."""
    result, _ = execute(config_path, overrides, progress=False, ci=False)
    contract = result.phases.get("contract")
    score = contract.score.score if contract is not None else None
    click.echo("n/a" if score is None else f"{score:.2f}")
    sys.exit(result.exit_code)
