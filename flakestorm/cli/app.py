"""The command line's root: the ``flakestorm`` group, and the one place that maps errors to
exit codes.

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

A reader of the output may leave early (``flakestorm mutations preview | head``): from then on
what is printed is dropped (:class:`ReaderMayLeave`), so the command still finishes — a run
writes its reports and keeps its exit code — instead of dying in a ``BrokenPipeError``.

A signal (SIGINT, SIGTERM) is handled from the process's first instruction
(:mod:`flakestorm.__main__`, :class:`~flakestorm.stopping.StartUp`): a run's command
(:class:`StopsCleanly`) takes it over before it reads the config and writes every report; any
other command ends at it, exit 3 (:meth:`LazyGroup.resolve_command` tells which it is).

Start-up is kept fast: the package imports only click, :mod:`flakestorm.errors` and
:mod:`flakestorm.stopping` at import time; a command's module is imported only when that
command runs (:class:`LazyGroup`, whose table gives ``--help`` each command's line), and
pydantic, yaml and the engine inside the commands that need them.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

import click

from flakestorm import __version__
from flakestorm.errors import ConfigError, ExitCode, FlakestormError, UsageError
from flakestorm.stopping import start_up

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


def report_error(exc: FlakestormError, redact: Callable[[str], str] = str) -> ExitCode:
    """Print ``exc`` for the user (stderr), through ``redact`` (a
    :class:`~flakestorm.redaction.Redactor` of the config's secrets, when one is loaded), and
    return its exit code."""
    if isinstance(exc, ConfigError):
        for line in exc.lines():
            click.echo(line, err=True)
        files = ", ".join(dict.fromkeys(p.file for p in exc.problems)) or DEFAULT_CONFIG
        count, warned = len(exc.problems), len(exc.warnings)
        also = f" (and {warned} warning{'s' if warned != 1 else ''})" if warned else ""
        click.echo(f"error: {count} problem{'s' if count != 1 else ''} in {files}{also}", err=True)
    else:
        # messages can quote what an agent, a proxy or an embeddings server sent: defuse them
        # so a CI log never reads them as workflow commands
        from flakestorm.reporters.escape import log_line

        for i, line in enumerate(redact(str(exc)).splitlines() or [""]):
            click.echo(("error: " if i == 0 else "  ") + log_line(line, 4000), err=True)
    return exc.exit_code


class ReaderMayLeave:
    """A text stream (stdout, stderr) whose reader may go away: after the first
    ``BrokenPipeError`` everything written to it is dropped, and its descriptor points at
    ``os.devnull`` so the interpreter's last flush succeeds too."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):  # no descriptor (a test's stream): nothing to flush
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class StopsCleanly(click.Command):
    """A command that stops cleanly on SIGINT or SIGTERM, at any moment: the runs, which take
    the signals over before they read the config and then write every report. A signal during
    any other command ends it, exit 3 (:class:`~flakestorm.stopping.StartUp`)."""


class LazyGroup(click.Group):
    """A click group whose commands are imported when one is run (or its help is asked for),
    not when the group is: ``lazy`` maps a command's name to the module of this package that
    registers it and its one-line help, which ``--help`` lists without importing anything. A
    test keeps the table true to the commands."""

    lazy: ClassVar[Mapping[str, tuple[str, str]]] = {}
    """A command's name -> (its module in ``flakestorm.cli``, the first paragraph of its help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            importlib.import_module(f"flakestorm.cli.{self.lazy[cmd_name][0]}")
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        early = start_up()
        if early is not None and not isinstance(command, (click.Group, StopsCleanly)):
            early.abrupt()  # a signal from now on (or one already received) ends the command
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            if loaded is not None and loaded.hidden:
                continue
            limit = formatter.width - 6 - max(len(n) for n in self.list_commands(ctx))
            if loaded is not None:
                rows.append((name, loaded.get_short_help_str(limit)))
            else:  # worded as click words the command's help in one line
                words = click.Command(name, help=self.lazy[name][1])
                rows.append((name, words.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


LazyGroup.group_class = LazyGroup  # its groups' groups are lazy too (and know their commands)


class FlakestormGroup(LazyGroup):
    """A click group whose commands' errors become messages and exit codes (see module doc)."""

    lazy: ClassVar[Mapping[str, tuple[str, str]]] = {
        "baseline": (
            "baseline",
            "A committed baseline: bless a run, then compare runs against it.",
        ),
        "ci": ("run", "Run every configured phase, write every report, exit with the gate's code."),
        "compare": (
            "compare",
            "Compare two results.json files (or a run and a blessed baseline) cell by cell: new "
            "failures, fixed, still failing, new and removed cells.",
        ),
        "init": (
            "project",
            "Write a starter flakestorm.yaml (and with --github the README's workflow).",
        ),
        "merge": (
            "merge",
            "Merge the shards' results.json (files, or directories searched for them) into the "
            "run's verdict: every report in OUTPUT, and the gate's exit code.",
        ),
        "mcp-stdio": ("mcp_stdio", "Relay a stdio MCP server, with the run's faults on its tools."),
        "migrate": (
            "migrate",
            "Rewrite a flakestorm 1.x / 2.0.0 config (and its replay session files) in today's "
            "form.",
        ),
        "mutations": ("mutations", "The mutation phase's mutations."),
        "proxy": ("proxy", "Run the chaos proxy until Ctrl-C (SIGINT) or SIGTERM."),
        "replay": (
            "replay",
            "Replay recorded sessions: reproduce incidents with the tool responses the agent saw.",
        ),
        "report": ("report", "Render reports from a results.json written by a run."),
        "run": (
            "run",
            "Run the mutation phase (--chaos adds the chaos-only phase, --chaos-only runs only "
            "that) and score it.",
        ),
        "schema": ("project", "Print the JSON Schema of flakestorm.yaml."),
        "validate": ("project", "Check the config and summarise what a run would do."),
    }

    def invoke(self, ctx: click.Context) -> Any:
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = ReaderMayLeave(sys.stdout), ReaderMayLeave(sys.stderr)
        try:
            return self._invoke(ctx)
        finally:
            sys.stdout, sys.stderr = streams

    def _invoke(self, ctx: click.Context) -> Any:
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


# --------------------------------------------------------------------------- the groups


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
    help="The flakestorm config file.",
)


def output_option(
    name: str, help: str, *, directory: bool, allow_dash: bool = False, **settings: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``-o/--output``, passed as ``name``: a directory, or else a file (``-`` for stdout when
    ``allow_dash``); ``settings`` are click's (``required``, ``default``, ...)."""
    kind = click.Path(
        file_okay=not directory, dir_okay=directory, allow_dash=allow_dash, path_type=Path
    )
    return click.option("-o", "--output", name, type=kind, help=help, **settings)


def seed_option(note: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--seed``, which overrides ``advanced.seed`` (``note`` ends its help)."""
    return click.option(
        "--seed",
        type=int,
        default=None,
        help=f"Seed for every random decision (overrides advanced.seed){note}.",
    )


def load(config_path: Path) -> LoadedConfig:
    """Load the config, or raise a usage error that says how to create one."""
    if not config_path.exists():
        raise UsageError(
            f"{config_path}: no such file (create one with `flakestorm init`, "
            "or pass -c/--config FILE)"
        )
    with starting_up():
        from flakestorm.loader import load_config

        return load_config(config_path)


@contextmanager
def starting_up() -> Iterator[None]:
    """A command's start-up: reading its config and importing what runs it.

    Python's cyclic garbage collector is paused meanwhile: the config models, the checks'
    registries and the config itself are tens of thousands of objects that live as long as the
    process, and the collector would scan them over and over as they are made (a twentieth of
    ``validate``'s time). After, what was made is frozen (:func:`gc.freeze`: never scanned
    again, what is left of it freed by reference counts as usual) and the collector runs again
    for what the command makes next.

    And pydantic loads no plugins for flakestorm's own models: it would otherwise scan the
    entry points of every installed package when they are built (a cost that grows with the
    environment), and nothing observes them. A python agent's own models, built later, get
    their plugins as usual (pydantic reads the setting each time); a value the user set is
    kept."""
    was = gc.isenabled()
    gc.disable()
    plugins = os.environ.get(_PLUGINS)
    if plugins is None:
        os.environ[_PLUGINS] = "__all__"
    try:
        yield
    finally:
        if plugins is None:
            os.environ.pop(_PLUGINS, None)
        if was:
            gc.freeze()
            gc.enable()


_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


class ContractGroup(LazyGroup):
    lazy: ClassVar[Mapping[str, tuple[str, str]]] = {
        "run": ("run", "Run every invariant under every scenario and print the matrix."),
        "score": (
            "run",
            "Run the contract and print only the resilience score; exit with the gate's code.",
        ),
        "validate": ("project", "Check the config and summarise what a run would do."),
    }


@main.group(cls=ContractGroup)
def contract() -> None:
    """Behavioural contracts: the invariants × scenarios matrix."""
