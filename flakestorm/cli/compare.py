"""``flakestorm compare BASE.json HEAD.json``: the cell-by-cell delta of two runs (SPEC §8).

Prints the headline (``1 new failure vs base.json, 2 fixed``), one line per changed cell, then
the verdict line, which the exit code follows: under ``--fail-on any`` (default) HEAD's own
verdict and exit code; under ``regression`` FAIL (1) when a cell newly fails against BASE, else
PASS (0), with HEAD's own gate named when it says otherwise
(``Verdict: PASS — fail-on: regression: no new failures vs base.json (the run's own gate: FAIL,
1 known failure)``). HEAD's infrastructure error stays an ERROR (3).
"""

from __future__ import annotations

from pathlib import Path

import click

from flakestorm.baseline.delta import FailOn, compare, same_config
from flakestorm.cli.app import main
from flakestorm.cli.report import read_results
from flakestorm.reporters.delta import Compared, terminal_lines
from flakestorm.reporters.terminal import safe, verdict_line
from flakestorm.reporters.view import step_verdict


@main.command(name="compare")
@click.argument("base_json", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("head_json", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--fail-on",
    type=click.Choice([f.value for f in FailOn]),
    default=FailOn.ANY.value,
    show_default=True,
    help="any: HEAD's own gate decides the exit code; regression: only new failures fail.",
)
def compare_command(base_json: Path, head_json: Path, fail_on: str) -> None:
    """Compare two results.json files cell by cell: new failures, fixed, still failing, new
    and removed cells.

    A cell repeated at least 5 times on both sides counts as a new failure when, and only
    when, a one-sided Fisher exact test on its pass counts gives p < 0.05 (also when it was
    already failing as flaky).
    """
    base = read_results(base_json)
    head = read_results(head_json)
    base_name, head_name = _names(base_json, head_json)
    if not same_config(base, head):
        click.echo(
            f"warning: {base_name} ran {safe(base.config_path, 200)} and {head_name} "
            f"ran {safe(head.config_path, 200)}: cells of different configs are matched by id "
            "(the action refuses such a baseline)",
            err=True,
        )
    rule = FailOn(fail_on)
    delta = compare(base, head)
    compared = Compared(
        delta=delta, against=base_name, age=f"started {base.started_at}", fail_on=rule
    )
    for line in terminal_lines(compared):
        click.echo(line)
    shown = step_verdict(head, rule, delta, base_name)
    click.echo(verdict_line(head, shown))
    raise click.exceptions.Exit(shown.code)


def _names(base: Path, head: Path) -> tuple[str, str]:
    """How the two inputs are named in what ``compare`` says: their file names, or, when
    those are the same (``main/results.json`` and ``pr/results.json``), their paths."""
    if base.name != head.name:
        return safe(base.name, 200), safe(head.name, 200)
    return safe(str(base), 200), safe(str(head), 200)
