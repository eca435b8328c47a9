"""``flakestorm baseline bless RESULTS.json -o .flakestorm/baseline.json``: a committed
baseline from a run (SPEC §14, :mod:`flakestorm.baseline.blessed`), and reading one back for
``compare --baseline file:PATH``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flakestorm.cli.app import main, output_option
from flakestorm.errors import UsageError

if TYPE_CHECKING:
    from flakestorm.baseline.blessed import Blessed

DEFAULT_PATH = ".flakestorm/baseline.json"
MAX_LISTED = 10
"""Errored cells a refused bless names; the rest are counted."""
FILE_PREFIX = "file:"


@main.group()
def baseline() -> None:
    """A committed baseline: bless a run, then compare runs against it."""


@baseline.command("bless")
@click.argument("results_json", type=click.Path(dir_okay=False, path_type=Path))
@output_option(
    "output",
    "Where to write the baseline (commit it).",
    directory=False,
    default=DEFAULT_PATH,
    show_default=True,
)
@click.option(
    "--commit",
    default=None,
    help="The commit the run tested (default: $GITHUB_SHA, else `git rev-parse HEAD`).",
)
def bless_command(results_json: Path, output: Path, commit: str | None) -> None:
    """Write a small, sorted, reviewable baseline from a run's results.json: per cell its
    status, severity and reason, per mutation its status; the config digest, seed, date and
    commit. `compare --baseline file:PATH` and the action's `baseline: file:PATH` compare
    runs against it; it changes only when blessed again."""
    from flakestorm.baseline.blessed import bless, dumps, errored_items
    from flakestorm.cli.report import read_results
    from flakestorm.reporters.escape import log_line
    from flakestorm.results import clock

    result = read_results(results_json)
    if not result.complete or result.shard is not None:
        what = "a shard's part of a run" if result.shard is not None else "a run that stopped early"
        raise UsageError(
            f"{results_json}: {what} is not a baseline: bless a whole, complete run (merge "
            "the shards first)"
        )
    errored = errored_items(result)
    if errored:
        listed = ", ".join(log_line(item, 120) for item in errored[:MAX_LISTED])
        more = f" and {len(errored) - MAX_LISTED} more" if len(errored) > MAX_LISTED else ""
        raise UsageError(
            f"{results_json}: a run with errored cells is not a baseline (an errored cell is "
            f"no known state: flakestorm could not carry it out); errored: {listed}{more}. "
            "Fix what errored, run again and bless that run"
        )
    document = bless(result, on=clock.today(), commit=commit or _commit(), source=str(results_json))
    counted = sum(len(items) for items in document["phases"].values())
    if not counted:
        raise UsageError(f"{results_json}: the run has no cells or mutations: nothing to bless")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(dumps(document), encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"-o {output}: cannot write the baseline there ({exc.strerror or exc}): give a "
            "path in a directory you can write, such as .flakestorm/baseline.json"
        ) from None
    click.echo(f"blessed {results_json} as {output}: {counted} cells and mutations")


def _commit() -> str | None:
    sha = os.environ.get("GITHUB_SHA", "").strip()
    if sha:
        return sha
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def read_blessed(spec: str, base_dir: Path | None = None) -> Blessed:
    """The blessed baseline ``file:PATH`` names (relative to ``base_dir``); a
    :class:`UsageError` saying what is wrong."""
    from flakestorm.baseline.blessed import BaselineFileError, load

    if not spec.startswith(FILE_PREFIX) or not spec[len(FILE_PREFIX) :].strip():
        raise UsageError(f"baseline {spec!r}: expected file:PATH (a file `baseline bless` wrote)")
    path = Path(spec[len(FILE_PREFIX) :].strip())
    try:
        return load(path if base_dir is None or path.is_absolute() else base_dir / path)
    except BaselineFileError as exc:
        raise UsageError(str(exc)) from None
