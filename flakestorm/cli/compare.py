"""``flakestorm compare BASE.json HEAD.json`` (or ``--baseline file:PATH HEAD.json``, a blessed
baseline, SPEC §14): the cell-by-cell delta of two runs (SPEC §8).

Prints the headline (``1 new failure vs base.json, 2 fixed``), one line per changed cell, then
the verdict line, which the exit code follows: under ``--fail-on any`` (default) HEAD's own
verdict and exit code; under ``regression`` FAIL (1) when a cell newly fails against BASE, else
PASS (0), with HEAD's own gate named when it says otherwise
(``Verdict: PASS — fail-on: regression: no new failures vs base.json (the run's own gate: FAIL,
1 known failure)``). HEAD's infrastructure error stays an ERROR (3). A ``--baseline`` file that
is missing or cannot be read as a blessed baseline is a usage error (2), saying where.
"""

from __future__ import annotations

from pathlib import Path

import click

from flakestorm.baseline.delta import FailOn, compare, same_config
from flakestorm.cli.app import main
from flakestorm.cli.baseline import read_blessed
from flakestorm.cli.report import read_results
from flakestorm.errors import UsageError
from flakestorm.reporters.delta import Compared, terminal_lines
from flakestorm.reporters.escape import log_line
from flakestorm.reporters.terminal import verdict_line
from flakestorm.reporters.view import step_verdict
from flakestorm.results import clock


@main.command(name="compare")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--baseline",
    "baseline_spec",
    metavar="file:PATH",
    default=None,
    help="Compare HEAD.json against a blessed baseline (`flakestorm baseline bless`) instead "
    "of a BASE.json.",
)
@click.option(
    "--fail-on",
    type=click.Choice([f.value for f in FailOn]),
    default=FailOn.ANY.value,
    show_default=True,
    help="any: HEAD's own gate decides the exit code; regression: only new failures fail.",
)
def compare_command(paths: tuple[Path, ...], baseline_spec: str | None, fail_on: str) -> None:
    """Compare two results.json files (or a run and a blessed baseline) cell by cell: new
    failures, fixed, still failing, new and removed cells.

    `compare BASE.json HEAD.json`, or `compare --baseline file:PATH HEAD.json` against a
    blessed baseline (`flakestorm baseline bless`).

    A cell repeated at least 5 times on both sides counts as a new failure when, and only
    when, a one-sided Fisher exact test on its pass counts gives p < 0.05 (also when it was
    already failing as flaky).
    """
    wanted = 1 if baseline_spec is not None else 2
    if len(paths) != wanted:
        usage = (
            "--baseline file:PATH HEAD.json" if baseline_spec is not None else "BASE.json HEAD.json"
        )
        raise UsageError(f"compare takes {usage} ({len(paths)} file(s) given)")
    head_json = paths[-1]
    head = read_results(head_json)
    rule = FailOn(fail_on)
    if baseline_spec is not None:
        blessed = read_blessed(baseline_spec)
        base_name, head_name = log_line(blessed.label, 200), log_line(head_json.name, 200)
        for warning in blessed.warnings(clock.today(), head.config_digest):
            click.echo(f"warning: {log_line(warning, 600)}", err=True)
        delta = compare(blessed.index, head)
        age = blessed.age_text(clock.today(), head.config_digest)
    else:
        base = read_results(paths[0])
        base_name, head_name = _names(paths[0], head_json)
        if not same_config(base, head):
            click.echo(
                f"warning: {base_name} ran {log_line(base.config_path, 200)} and {head_name} "
                f"ran {log_line(head.config_path, 200)}: cells of different configs are matched by "
                "id (the action refuses such a baseline)",
                err=True,
            )
        delta = compare(base, head)
        age = f"started {base.started_at}"
    compared = Compared(delta=delta, against=base_name, age=age, fail_on=rule)
    for line in terminal_lines(compared):
        click.echo(line)
    shown = step_verdict(head, rule, delta, base_name)
    click.echo(verdict_line(head, shown))
    raise click.exceptions.Exit(shown.code)


def _names(base: Path, head: Path) -> tuple[str, str]:
    """How the two inputs are named in what ``compare`` says: their file names, or, when
    those are the same (``main/results.json`` and ``pr/results.json``), their paths."""
    if base.name != head.name:
        return log_line(base.name, 200), log_line(head.name, 200)
    return log_line(str(base), 200), log_line(str(head), 200)
