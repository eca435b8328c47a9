"""``flakestorm merge``: the shards of a run (``--shard K/N``) merged into the run's result,
reports and exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from flakestorm.cli.app import main, output_option


@main.command("merge")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_option(
    "output_dir", "The directory to write the run's reports into.", directory=True, required=True
)
@click.option(
    "--min-score",
    type=click.FloatRange(0, 100),
    default=None,
    help="Fail when the score is below this (overrides the shards' min_score).",
)
def merge_command(paths: tuple[Path, ...], output_dir: Path, min_score: float | None) -> None:
    """Merge the shards' results.json (files, or directories searched for them) into the
    run's verdict: every report in OUTPUT, and the gate's exit code.

    The shards must be 1..N of one run (same config digest and seed); otherwise nothing is
    written and the exit code is 2, with what is missing or foreign.
    """
    from flakestorm.engine.merge import leaving_nothing, merge, output_formats, read_shards
    from flakestorm.reporters import terminal
    from flakestorm.reporters.registry import write_reports

    with leaving_nothing(output_dir):  # the items are spooled in the report directory
        shards = read_shards(paths, output_dir)
        result = merge(shards, min_score)
    write_reports(result, output_dir, output_formats(shards))
    click.echo(f"merged {len(shards)} shards", err=True)
    click.echo(terminal.render(result), nl=False)
    click.echo(f"Reports: {output_dir}/")
    sys.exit(result.exit_code)
