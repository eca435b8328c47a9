"""``flakestorm report``: every report rendered again from a ``results.json``.

A report never modifies its input: a file it would write that is the ``results.json`` it reads
(or one of ``--history``'s) is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import click

from flakestorm.cli.app import main, output_option
from flakestorm.errors import UsageError
from flakestorm.reporters.registry import REPORTS
from flakestorm.results.model import RunResult

DEFAULT_REPORT_FORMATS = ("junit", "markdown", "html", "json")


def read_results(results_json: Path) -> RunResult:
    """The run result in a ``results.json`` file, its cells and mutations read as a stream
    into spools (:mod:`flakestorm.results.stream`: a large file is not held in memory); a
    :class:`UsageError` saying what is wrong."""
    from flakestorm.baseline.judgement import judgement_of
    from flakestorm.results.model import ResultsError
    from flakestorm.results.stream import NotJson, read_streamed

    try:
        with results_json.open(encoding="utf-8") as file:
            result = read_streamed(file)
        judgement_of(result)  # the step's verdict, checked before any report states it
    except OSError as exc:
        raise UsageError(f"{results_json}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{results_json}: not UTF-8 text (expected a results.json)") from None
    except NotJson as exc:
        raise UsageError(f"{results_json}: not JSON ({exc}); expected a results.json") from None
    except RecursionError:
        raise UsageError(
            f"{results_json}: not JSON (nested too deeply); expected a results.json"
        ) from None
    except ResultsError as exc:
        raise UsageError(f"{results_json}: {exc}") from None
    return result


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
@output_option(
    "output_dir",
    "The directory to write into (default: the directory of RESULTS_JSON).",
    directory=True,
)
@click.option(
    "--history",
    "history",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Earlier runs' results.json (a file, or a directory searched for them; repeatable): "
    "the score's trend over them and this run, printed and drawn in the reports.",
)
def report(
    results_json: Path,
    formats: tuple[str, ...],
    output_dir: Path | None,
    history: tuple[Path, ...],
) -> None:
    """Render reports from a results.json written by a run.

    Files: junit.xml, summary.md, report.html, results.json, comment.md (the PR comment body,
    without a previous score). With --history, the summary, the comment and the HTML report
    show the score's trend over those runs and this one.
    """
    from flakestorm.reporters.registry import write_report

    result = read_results(results_json)
    files = _history_files(history) if history else []
    if history:
        result = _with_trend(result, results_json, files)
    out = output_dir if output_dir is not None else results_json.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out} ({exc.strerror})") from None
    inputs = _identities([results_json, *files])
    for name in dict.fromkeys(formats or DEFAULT_REPORT_FORMATS):
        target = out / REPORTS[name].file_name
        if _identities([target]) & inputs:
            click.echo(f"kept {target}: it is an input of this report, never rewritten")
            continue
        try:
            path = write_report(result, out, name)
        except OSError as exc:
            raise UsageError(f"cannot write {exc.filename} ({exc.strerror})") from None
        click.echo(f"wrote {path}")


def _history_files(history: Iterable[Path]) -> list[Path]:
    """The ``results.json`` files ``--history`` names: each file given, and each found in a
    directory given, once."""
    files = [
        f
        for path in history
        for f in (sorted(path.rglob("results.json")) if path.is_dir() else [path])
    ]
    if not files:
        raise UsageError(f"--history: no results.json in {', '.join(map(str, history))}")
    return list(dict.fromkeys(files))


def _identities(paths: Iterable[Path]) -> set[tuple[int, int]]:
    """(device, inode) of each of ``paths`` that exists: one file however it is named."""
    found = set()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        found.add((st.st_dev, st.st_ino))
    return found


def _with_trend(result: RunResult, results_json: Path, files: list[Path]) -> RunResult:
    """``result`` with the trend of the earlier runs in ``files`` in its step (SPEC §14),
    printed as it is drawn. A file that cannot be read as a results.json is skipped and
    counted, as the action skips a run without a readable report; a run is one run (its
    config digest and start time), however many files hold it, this one included."""
    import dataclasses

    from flakestorm.baseline.delta import FailOn
    from flakestorm.baseline.judgement import Judgement, judgement_of
    from flakestorm.reporters.delta import trend_markdown
    from flakestorm.results.trend import point_of, trend_of

    this = _identities([results_json])
    others = [path for path in files if not _identities([path]) & this]
    if not others:
        raise UsageError(f"--history: no results.json besides {results_json}")
    seen = {(result.config_digest, result.started_at): results_json}
    earlier: list[RunResult] = []
    unreadable: list[str] = []
    for path in others:
        try:
            run = read_results(path)
        except UsageError as exc:
            unreadable.append(str(exc))
            continue
        key = (run.config_digest, run.started_at)
        if key in seen:
            click.echo(
                f"--history: {path} holds the run of {seen[key]} (its config digest and "
                "start time): counted once"
            )
            continue
        seen[key] = path
        earlier.append(run)
    if unreadable:
        click.echo(f"--history: skipped {len(unreadable)} unreadable:")
        for line in unreadable:
            click.echo(f"  {line}")
    earlier.sort(key=lambda r: r.started_at)
    points = [point_of(r, commit="", digest=result.config_digest) for r in earlier]
    trend = trend_of(points, result, skipped=len(unreadable))
    judged = judgement_of(result) or Judgement(FailOn.ANY)
    step = dataclasses.replace(judged, trend=trend).document(result)
    click.echo(trend_markdown(trend).rstrip("\n"))
    return dataclasses.replace(result, step=step)
