"""``flakestorm replay``: run recorded sessions (``run``), turn a run's failures into sessions
(``export``), and import sessions from LangSmith (``import langsmith``). See ``docs/replay.md``."""

from __future__ import annotations

from pathlib import Path

import click

from flakestorm.cli.app import main
from flakestorm.cli.run import conclude, execute, run_options


@main.group()
def replay() -> None:
    """Replay recorded sessions: reproduce incidents with the tool responses the agent saw."""


@replay.command("run")
@run_options
def replay_run(
    config_path: str,
    min_score: float | None,
    concurrency: int | None,
    seed: int | None,
    output_dir: str | None,
    record: str | None,
) -> None:
    """Replay every session of `replays` and check it against its contract."""
    from flakestorm.runner import Overrides

    overrides = Overrides(concurrency, seed, min_score, output_dir, record=record)
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
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory the session files are written to.",
)
def replay_export(report: Path, out_dir: Path) -> None:
    """Write one session file per failed or errored cell of a run."""
    from flakestorm.replay.export import export_sessions, read_results

    result = read_results(report)
    written, notes = export_sessions(result, out_dir)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for path in written:
        click.echo(str(path))
    click.echo(f"{len(written)} session file(s) written to {out_dir}/", err=True)
