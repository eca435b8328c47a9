"""The ``flakestorm`` command line: the only place that maps errors to exit codes.

Exit codes (SPEC §5, :class:`flakestorm.errors.ExitCode`)::

    0  passed / the command did what was asked
    1  the gate failed (a critical cell failed, or the score is below min_score)
    2  config or usage error: nothing ran (every config problem is printed, no traceback)
    3  infrastructure error (agent never ready, proxy unreachable, harness errors), and also
       an internal error: an unexpected exception, printed with its traceback and a request
       to report it (it is not the user's fault, and the run did not happen)

Every command is a subcommand of :data:`main`, a :class:`FlakestormGroup`; its ``invoke`` is
the one place that turns a :class:`~flakestorm.errors.FlakestormError` into its message on
stderr and its ``exit_code``, and anything else into exit 3. Commands only raise.

Start-up is kept fast: this module imports only click and :mod:`flakestorm.errors` at import
time; pydantic, yaml and the rest are imported inside the commands that need them.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flakestorm import __version__
from flakestorm.errors import ConfigError, ExitCode, FlakestormError, UsageError
from flakestorm.redaction import Redactor
from flakestorm.reports import REPORTS

if TYPE_CHECKING:
    from flakestorm.loader import LoadedConfig

DEFAULT_CONFIG = "flakestorm.yaml"

INTERNAL_ERROR = ExitCode.INFRASTRUCTURE_ERROR
"""Exit code of an unexpected exception (a bug in flakestorm)."""

BUG_REPORT = (
    "error: internal error: this is a bug in flakestorm, please report it at "
    "https://github.com/flakestorm/flakestorm/issues (with the traceback above)"
)


# --------------------------------------------------------------------------- error mapping


def report_error(exc: FlakestormError) -> ExitCode:
    """Print ``exc`` for the user (stderr) and return its exit code."""
    if isinstance(exc, ConfigError):
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        files = ", ".join(dict.fromkeys(p.file for p in exc.problems)) or DEFAULT_CONFIG
        count = len(exc.problems)
        click.echo(f"error: {count} problem{'s' if count != 1 else ''} in {files}", err=True)
    else:
        # messages can quote what an agent, a proxy or an embeddings server sent: defuse them
        # so a CI log never reads them as workflow commands
        from flakestorm.reporters.terminal import safe

        for i, line in enumerate(str(exc).splitlines() or [""]):
            click.echo(("error: " if i == 0 else "  ") + safe(line, 4000), err=True)
    return exc.exit_code


class FlakestormGroup(click.Group):
    """A click group whose commands' errors become messages and exit codes (see module doc)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own usage errors (exit 2), --help, ctrl-c
        except FlakestormError as exc:
            code = report_error(exc)
        except Exception:
            traceback.print_exc()
            click.echo(BUG_REPORT, err=True)
            code = INTERNAL_ERROR
        raise click.exceptions.Exit(int(code))


# --------------------------------------------------------------------------- commands


@click.group(cls=FlakestormGroup)
@click.version_option(__version__, prog_name="flakestorm")
def main() -> None:
    """flakestorm: chaos engineering and behavioural contracts for AI agents."""


config_option = click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_CONFIG,
    show_default=True,
    help="The config file.",
)


def load(config_path: Path) -> LoadedConfig:
    """Load the config, or raise a usage error that says how to create one."""
    if not config_path.exists():
        raise UsageError(
            f"{config_path}: no such file (create one with `flakestorm init`, "
            "or pass -c/--config FILE)"
        )
    from flakestorm.loader import load_config

    return load_config(config_path)


@main.command()
@config_option
def validate(config_path: Path) -> None:
    """Check the config and summarise what a run would do.

    Runs nothing: prints the agent, the contract matrix, how many agent invocations a
    contract run makes, the configured phases and any warnings. Exit 2 on a config error.
    """
    from flakestorm.preview import summary

    loaded = load(config_path)
    masked = Redactor(loaded.secrets)
    click.echo(masked(f"ok: {config_path} is valid"))
    for label, value in summary(loaded.config):
        click.echo(masked(f"  {label + ':':<13}{value}"))
    for warning in loaded.warnings:
        click.echo(masked(f"warning: {warning}"), err=True)


@main.group()
def contract() -> None:
    """Behavioural contracts: the invariants × scenarios matrix."""


contract.add_command(validate, "validate")


# --------------------------------------------------------------------------- contract run / score


def _run_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option(
                "-c",
                "--config",
                "config_path",
                default="flakestorm.yaml",
                show_default=True,
                type=click.Path(dir_okay=False),
                help="The flakestorm config file.",
            ),
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
            click.option(
                "--seed",
                type=int,
                default=None,
                help="Seed for every random decision (overrides advanced.seed).",
            ),
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
        ]
    ):
        function = option(function)
    return function


class _Progress:
    """A progress bar on a terminal; a line per finished scenario otherwise (CI logs)."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._tty = enabled and sys.stderr.isatty()
        self._lock = threading.Lock()
        self._total = 0
        self._done = 0

    def __call__(self, event: Any) -> None:
        from flakestorm.executor import CellFinished, RunPlanned, ScenarioFinished
        from flakestorm.reporters.terminal import scenario_line

        if not self._enabled:
            return
        with self._lock:
            if isinstance(event, RunPlanned):
                self._total = event.cells
            elif self._tty and isinstance(event, CellFinished):
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


def _run(
    config_path: str,
    overrides: Any,
    progress: bool,
    ci: bool,
    phases: tuple[str, ...] = (),
    profile: str | None = None,
) -> Any:
    """Load, run with Ctrl-C/SIGTERM stopping cleanly, write the reports; return the result."""
    from flakestorm.reports import write_reports
    from flakestorm.runner import (
        output_dir,
        run_ci,
        run_contract_phase,
        run_phases,
    )
    from flakestorm.stopping import stopping_on_signals

    loaded = load(Path(config_path))
    for warning in loaded.warnings:
        click.echo(Redactor(loaded.secrets)(f"warning: {warning}"), err=True)
    stop = threading.Event()
    run: Callable[..., Any] = run_ci if ci else run_contract_phase
    if phases:

        def run(loaded: Any, overrides: Any, **kwargs: Any) -> Any:
            return run_phases(loaded, phases, overrides, chaos_profile=profile, **kwargs)

    def stopping() -> None:
        click.echo("\nstopping: finishing invocations in flight (Ctrl-C again to abort)", err=True)

    with stopping_on_signals(stop, stopping, abort_on_repeat=True):
        result = run(
            loaded,
            overrides,
            stop=stop,
            on_event=_Progress(progress),
            on_notice=(lambda text: click.echo(text, err=True)) if progress else None,
        )
    out = output_dir(loaded, overrides)
    write_reports(result, out, loaded.config.output.formats)
    return result, out


def _conclude(result: Any, out: Path) -> None:
    """Print the matrix and verdict, where the reports are, and exit with the run's code."""
    from flakestorm.reporters import terminal

    click.echo(terminal.render(result), nl=False)
    click.echo(f"Reports: {out}/")
    sys.exit(result.exit_code)


@contract.command("run")
@_run_options
def contract_run(
    config_path: str,
    min_score: float | None,
    concurrency: int | None,
    seed: int | None,
    output_dir: str | None,
    record: str | None,
) -> None:
    """Run every invariant under every scenario and print the matrix."""
    from flakestorm.runner import Overrides

    overrides = Overrides(concurrency, seed, min_score, output_dir, record=record)
    result, out = _run(config_path, overrides, progress=True, ci=False)
    _conclude(result, out)


@main.command("run")
@_run_options
@click.option("--chaos", is_flag=True, help="Apply the top-level chaos (or --chaos-profile).")
@click.option("--chaos-only", is_flag=True, help="Run only the chaos phase (needs --chaos).")
@click.option(
    "--chaos-profile",
    default=None,
    metavar="NAME",
    help="A built-in chaos profile instead of the config's chaos section: api_outage, "
    "degraded_llm, hostile_tools, high_latency, cascading_failure, indirect_injection, "
    "model_version_drift.",
)
def run_command(
    config_path: str,
    min_score: float | None,
    concurrency: int | None,
    seed: int | None,
    output_dir: str | None,
    record: str | None,
    chaos: bool,
    chaos_only: bool,
    chaos_profile: str | None,
) -> None:
    """Run the golden prompts under chaos and score them (the chaos-only phase)."""
    from flakestorm.runner import Overrides

    if (chaos_only or chaos_profile) and not chaos:
        raise UsageError("--chaos-only and --chaos-profile need --chaos")
    if not chaos_only:
        raise UsageError(
            "`flakestorm run` without --chaos-only includes the mutation phase, which this "
            "version cannot run yet: use `flakestorm run --chaos --chaos-only` (golden prompts "
            "under chaos), `flakestorm contract run`, or `flakestorm ci`"
        )
    overrides = Overrides(concurrency, seed, min_score, output_dir, record=record)
    result, out = _run(
        config_path, overrides, progress=True, ci=False, phases=("chaos",), profile=chaos_profile
    )
    _conclude(result, out)


@main.command("ci")
@_run_options
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
    config_path: str,
    min_score: float | None,
    concurrency: int | None,
    seed: int | None,
    output_dir: str | None,
    record: str | None,
    agent_url: str | None,
    proxy_url: str | None,
    ready_timeout_ms: int | None,
) -> None:
    """Run every configured phase, write every report, exit with the gate's code."""
    from flakestorm.runner import Overrides

    overrides = Overrides(
        concurrency, seed, min_score, output_dir, agent_url, proxy_url, ready_timeout_ms, record
    )
    result, out = _run(config_path, overrides, progress=True, ci=True)
    _conclude(result, out)


@contract.command("score")
@_run_options
def contract_score(
    config_path: str,
    min_score: float | None,
    concurrency: int | None,
    seed: int | None,
    output_dir: str | None,
    record: str | None,
) -> None:
    """Run the contract and print only the resilience score; exit with the gate's code."""
    from flakestorm.runner import Overrides

    overrides = Overrides(concurrency, seed, min_score, output_dir, record=record)
    result, _ = _run(config_path, overrides, progress=False, ci=False)
    contract = result.phases.get("contract")
    score = contract.score.score if contract is not None else None
    click.echo("n/a" if score is None else f"{score:.2f}")
    sys.exit(result.exit_code)


@main.command()
def schema() -> None:
    """Print the JSON Schema of flakestorm.yaml."""
    from flakestorm.schema import render_schema

    click.echo(render_schema(), nl=False)


@main.command()
@click.option("--github", is_flag=True, help="Also write .github/workflows/flakestorm.yml.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@click.option(
    "--path",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The directory to write into.",
)
def init(github: bool, force: bool, directory: Path) -> None:
    """Write a starter flakestorm.yaml (and with --github a workflow).

    Existing files are kept unless --force is given.
    """
    from flakestorm.starter import starter_files

    targets = {directory / name: text for name, text in starter_files(github).items()}
    existing = [str(path) for path in targets if path.exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exists (use --force to overwrite)")
    for path, text in targets.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path} ({exc.strerror})") from None
        click.echo(f"wrote {path}")
    click.echo(
        "next: set agent.endpoint (or AGENT_URL), then run `flakestorm validate`"
        + (" and commit the workflow" if github else "")
    )


DEFAULT_REPORT_FORMATS = ("junit", "markdown", "html", "json")


@main.command()
@click.argument("results_json", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-f",
    "--format",
    "formats",
    type=click.Choice(list(REPORTS)),
    multiple=True,
    help="A format to write (repeatable). Default: junit, markdown, html and json.",
)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The directory to write into (default: the directory of RESULTS_JSON).",
)
def report(results_json: Path, formats: tuple[str, ...], output_dir: Path | None) -> None:
    """Render reports from a results.json written by a run.

    Files: junit.xml, summary.md, report.html, results.json, comment.md (the PR comment body,
    without a previous score).
    """
    import json

    from flakestorm.reports import write_report
    from flakestorm.results import ResultsError, from_document

    try:
        document = json.loads(results_json.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{results_json}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{results_json}: not UTF-8 text (expected a results.json)") from None
    except ValueError as exc:
        raise UsageError(f"{results_json}: not JSON ({exc}); expected a results.json") from None
    if not isinstance(document, dict):
        raise UsageError(f"{results_json}: not a results document (expected a JSON object)")
    try:
        result = from_document(document)
    except ResultsError as exc:
        raise UsageError(f"{results_json}: {exc}") from None
    out = output_dir if output_dir is not None else results_json.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out} ({exc.strerror})") from None
    for name in dict.fromkeys(formats or DEFAULT_REPORT_FORMATS):
        try:
            path = write_report(result, out, name)
        except OSError as exc:
            raise UsageError(f"cannot write {exc.filename} ({exc.strerror})") from None
        click.echo(f"wrote {path}")


# --------------------------------------------------------------------------- proxy


@main.command("proxy")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: any."
)
@click.option(
    "--llm-upstream",
    metavar="URL|mock|cassette:PATH",
    help="Where LLM calls go (default: each provider's public API, or the config's).",
)
@click.option(
    "--tool",
    "tool_routes",
    multiple=True,
    metavar="NAME=URL",
    help="A tool route /tools/NAME/... -> URL (repeatable; adds to the config's).",
)
@click.option(
    "--record",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record real upstream exchanges to this cassette file.",
)
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Take llm_upstream, tools and token from this config's `proxy` section.",
)
def proxy(
    host: str,
    port: int,
    llm_upstream: str | None,
    tool_routes: tuple[str, ...],
    record: Path | None,
    config_path: Path | None,
) -> None:
    """Run the chaos proxy until Ctrl-C (SIGINT) or SIGTERM.

    Point the agent's OPENAI_BASE_URL at <url>/llm/openai/v1, ANTHROPIC_BASE_URL at
    <url>/llm/anthropic, tools at <url>/tools/NAME, and HTTP_PROXY/HTTPS_PROXY at <url>.
    Control calls (under /_flakestorm/) need `Authorization: Bearer $FLAKESTORM_PROXY_TOKEN`
    when that variable (or proxy.token) is set.
    """
    import os

    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.chaos.proxy.serving import parse_tools
    from flakestorm.chaos.proxy.upstreams.cassette import resolve_cassette
    from flakestorm.preview import without_userinfo
    from flakestorm.stopping import stopping_on_signals

    token = os.environ.get("FLAKESTORM_PROXY_TOKEN") or None
    tools: dict[str, str] = {}
    if config_path is not None:
        loaded = load(config_path)
        section = loaded.config.proxy
        if section is not None:
            tools.update(section.tools)
            token = token or section.token
            upstream = section.llm_upstream
            llm_upstream = llm_upstream or resolve_cassette(upstream, loaded.base_dir)
    tools.update(parse_tools(tool_routes, "--tool"))
    chaos = ChaosProxy(host, port, llm_upstream, tools, token=token, record=record)
    stop = threading.Event()
    with stopping_on_signals(stop), chaos:
        routes = ", ".join(sorted(tools)) or "none"
        llm = without_userinfo(llm_upstream) if llm_upstream else "provider APIs"
        click.echo(f"flakestorm proxy listening on {chaos.url} (llm: {llm}; tools: {routes})")
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
