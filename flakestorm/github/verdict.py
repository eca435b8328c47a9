"""What the step says of its verdict besides the reports, as data: the job summary, the verdict
lines of the log, and the errors that end a step early (no config, an error before there was a
result, a bug, a cancel)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from flakestorm.errors import FlakestormError, UsageError
from flakestorm.github.notes import TITLE, Annotation, Level, Note
from flakestorm.github.step import Step
from flakestorm.reporters.escape import log_line
from flakestorm.stopping import GRACE_S

if TYPE_CHECKING:
    from flakestorm.config import OutputFormat
    from flakestorm.reporters.view import RunVerdict
    from flakestorm.results.model import RunResult

__all__ = [
    "CANCELLED",
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_LOG",
    "cancelling",
    "error_verdict",
    "no_config",
    "result_error",
    "run_error",
    "summary_of",
    "verdict_notes",
]

INTERNAL_ERROR_LOG = "flakestorm: internal error (a bug in flakestorm, please report it):"
"""The log line before the traceback of a bug."""

INTERNAL_ERROR = Annotation(
    "internal error: this is a bug in flakestorm, please report it at "
    "https://github.com/flakestorm/flakestorm/issues with the log above",
    title=f"{TITLE}: internal error",
)

CANCELLED = Annotation("the run was cancelled: exit 3", title=f"{TITLE}: cancelled")
"""A cancelled run exits 3, whatever else ended it (a config error, say)."""


def no_config(config_name: str) -> Annotation:
    return Annotation(
        f"{config_name}: no such file (set the `config` input to your flakestorm.yaml, "
        "relative to the repository root; did you run actions/checkout first?)",
        title=f"{TITLE}: no config",
    )


def cancelling(step: Step, report_dir: Sequence[Path]) -> str:
    """The log line of the first signal (``report_dir``: where the reports go, once known)."""
    to = "".join(f" to {step.relative(path)}" for path in report_dir[:1])
    return (
        f"flakestorm: cancelled: invocations in flight get {GRACE_S:g} s, then the "
        f"partial reports are written{to}"
    )


def run_error(exc: FlakestormError) -> Annotation:
    """The error that ended the step before there was a result (an input's or the run's)."""
    level = "input" if isinstance(exc, UsageError) else "run"
    return Annotation(log_line(str(exc), 4000), title=f"{TITLE}: {level} error")


def error_verdict(exc: FlakestormError, message: str) -> tuple[str, Note]:
    """An exit-3 error before there was a result: the ERROR verdict for the job summary (which
    ``::add-mask::`` does not cover: ``message`` is the error's, redacted) and for the log,
    with the cause."""
    from flakestorm.reporters import markdown
    from flakestorm.reporters.terminal import error_verdict_line

    line = error_verdict_line(exc.cause, message).removeprefix("Verdict: ")
    return markdown.render_error(exc.cause, message), Note(f"flakestorm: {line}")


def summary_of(result: RunResult, written: Mapping[OutputFormat, Path], redact: bool) -> str:
    """The job summary of ``result``: the public-safe summary as the report directory got it
    (``written``), else rendered with ``redact``."""
    from flakestorm.config import OutputFormat
    from flakestorm.reporters import markdown

    summary_file = written.get(OutputFormat.MARKDOWN)
    if summary_file is not None and redact:
        return summary_file.read_text(encoding="utf-8")
    return markdown.render(result, redact=redact)


def result_error(result: RunResult) -> Note | None:
    """Why the run could not start, in full, once."""
    if result.error is None:
        return None
    return Note(log_line(result.error, 4000), Level.ERROR, f"{TITLE}: run error")


def verdict_notes(result: RunResult, shown: RunVerdict, report_dir: str) -> list[Note]:
    """The step's verdict line (the exit code's), the run's score and why its own gate failed,
    where the reports are, and what a shard or a cancelled run is."""
    from flakestorm.reporters.terminal import verdict_line

    score = result.overall.score
    line = f"flakestorm: {verdict_line(result, shown).removeprefix('Verdict: ')}: score "
    line += "n/a" if score is None else f"{score:.2f}"
    if result.overall.min_score:
        line += f" (min_score {result.overall.min_score:g})"
    if not result.complete:
        line += f"; the run stopped early ({log_line(str(result.stop_reason), 40)})"
    notes = [Note(line), *(Note(f"  - {log_line(r, 400)}") for r in result.overall.reasons)]
    notes.append(Note(f"flakestorm: reports in {report_dir}"))
    if result.shard is not None:
        notes.append(
            Note(
                f"flakestorm: this is shard {result.shard} (its part of the run): a job with "
                "`command: merge` gives the run's verdict"
            )
        )
    if result.stop_reason == "interrupted":
        notes.append(
            Note(
                "the run was cancelled before it finished: cells it did not finish are "
                f"not_run; the partial reports are in {report_dir}",
                Level.WARNING,
                f"{TITLE}: cancelled",
            )
        )
    return notes
