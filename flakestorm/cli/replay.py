"""``flakestorm replay``: run recorded sessions (``run``), turn a run's failures into sessions
(``export``), and import sessions from LangSmith (``import langsmith``). See ``docs/replay.md``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flakestorm.cli.app import StopsCleanly, main, output_option
from flakestorm.cli.run import conclude, execute, run_options

if TYPE_CHECKING:
    from flakestorm.engine.runner import Overrides


_sessions_dir = output_option(
    "out_dir", "Directory the session files are written to.", directory=True, required=True
)
"""``-o/--output``: where ``export`` and ``import`` write session files."""


def _written(paths: list[Path], out_dir: Path, notes: Iterable[str] = ()) -> None:
    """Each session file written, on stdout; then ``notes`` and how many, on stderr."""
    for path in paths:
        click.echo(str(path))
    for note in notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"{len(paths)} session file(s) written to {out_dir}/", err=True)


@main.group()
def replay() -> None:
    """Replay recorded sessions: reproduce incidents with the tool responses the agent saw."""


@replay.command("run", cls=StopsCleanly)
@run_options
def replay_run(config_path: Path, overrides: Overrides) -> None:
    """Replay every session of `replays` and check it against its contract."""
    result, out = execute(config_path, overrides, progress=True, ci=False, phases=("replay",))
    conclude(result, out)


@replay.command("export")
@click.option(
    "--from-report",
    "report",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The results.json of a run.",
)
@_sessions_dir
@click.option(
    "-c",
    "--config",
    "config_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The run's config: the values it takes from the environment are redacted too (the "
    "run already redacted them in results.json).",
)
def replay_export(report: Path, out_dir: Path, config_path: Path | None) -> None:
    """Write one session file per failed or errored cell of a run."""
    from flakestorm.cli.app import load
    from flakestorm.cli.report import read_results
    from flakestorm.replay.export import export_sessions

    result = read_results(report)
    secrets = load(config_path).secrets if config_path is not None else frozenset()
    written, notes = export_sessions(result, out_dir, secrets)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    _written(written, out_dir)


@replay.group("import")
def import_group() -> None:
    """Import recorded sessions from a tracing system."""


@import_group.command("langsmith")
@click.option("--project", default=None, help="A LangSmith project: its root runs.")
@click.option("--run", "run_id", default=None, help="One root run, by id.")
@click.option(
    "--thread",
    default=None,
    help="A thread of the project (its metadata session_id, conversation_id or thread_id): "
    "imported as one conversation session, a turn per root run.",
)
@click.option("--filter", "filter_", default=None, help="A LangSmith filter (FQL) on the runs.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many runs.")
@click.option(
    "--input-key",
    default=None,
    help="The root run's input that becomes the session's input (default: its only input, "
    "else `input`).",
)
@click.option("--with-llm", is_flag=True, help="Record the LLM runs as llm_responses too.")
@click.option("--contract", default=None, help="The contract the sessions are verified against.")
@_sessions_dir
def import_langsmith(
    project: str | None,
    run_id: str | None,
    thread: str | None,
    filter_: str | None,
    limit: int | None,
    input_key: str | None,
    with_llm: bool,
    contract: str | None,
    out_dir: Path,
) -> None:
    """Write a session file per LangSmith root run (credentials: LANGSMITH_API_KEY and
    LANGSMITH_ENDPOINT from the environment)."""
    import os

    from flakestorm.replay.export import write_sessions
    from flakestorm.replay.langsmith import import_sessions

    sessions = import_sessions(
        os.environ,
        project=project,
        run_id=run_id,
        filter=filter_,
        limit=limit,
        input_key=input_key,
        with_llm=with_llm,
        contract=contract,
        thread=thread,
    )
    secrets = [v for k, v in os.environ.items() if k == "LANGSMITH_API_KEY"]
    kept: list[Path] = []
    written = write_sessions(sessions, out_dir, secrets, kept)
    notes = (f"{path} already exists: kept (delete it to import again)" for path in kept)
    _written(written, out_dir, notes)
