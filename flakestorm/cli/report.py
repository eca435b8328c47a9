"""``flakestorm report``: every report rendered again from a ``results.json``."""

from __future__ import annotations

from pathlib import Path

import click

from flakestorm.cli.app import main
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
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The directory to write into (default: the directory of RESULTS_JSON).",
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
    if history:
        result = _with_trend(result, results_json, history)
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


def _with_trend(result: RunResult, results_json: Path, history: tuple[Path, ...]) -> RunResult:
    """``result`` with the trend of the earlier runs in ``history`` in its step (SPEC §14),
    printed as it is drawn."""
    import dataclasses

    from flakestorm.baseline.delta import FailOn
    from flakestorm.baseline.judgement import Judgement, judgement_of
    from flakestorm.reporters.delta import trend_markdown
    from flakestorm.results.trend import point_of, trend_of

    files = [
        f
        for path in history
        for f in (sorted(path.rglob("results.json")) if path.is_dir() else [path])
        if f.resolve() != results_json.resolve()
    ]
    if not files:
        raise UsageError(f"--history: no results.json in {', '.join(map(str, history))}")
    earlier = sorted((read_results(f) for f in files), key=lambda r: r.started_at)
    points = [point_of(r, commit="", digest=result.config_digest) for r in earlier]
    trend = trend_of(points, result)
    judged = judgement_of(result) or Judgement(FailOn.ANY)
    step = dataclasses.replace(judged, trend=trend).document(result)
    click.echo(trend_markdown(trend).rstrip("\n"))
    return dataclasses.replace(result, step=step)
