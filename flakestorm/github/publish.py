"""The edge where a step's outcome reaches GitHub: the builders of ``flakestorm/github/`` make
the data (the judgement, outputs, annotations, the comment, the summary and the log's lines),
and this writes it through :class:`~flakestorm.github.client.GitHub`, in the order the run's
page shows it.

- :func:`config_read`: the config's secrets masked (before anything else is printed) and its
  problems on their lines;
- :func:`attempt`: the run (or the merge) done, then :func:`publish` of its result, or
  :func:`publish_error` of what ended it;
- :func:`publish`: a result judged, its reports written, and everything the step tells GitHub
  of it; returns the step's exit code;
- :func:`publish_error`: an error that ended the step before there was a result.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from flakestorm.config import OutputFormat
from flakestorm.errors import ConfigError, ExitCode, FlakestormError, Problem
from flakestorm.github import baseline_step, pr_comment, verdict
from flakestorm.github.annotations import (
    config_annotations,
    more_failed,
    more_known,
    run_annotations,
)
from flakestorm.github.client import GitHub
from flakestorm.github.notes import Level
from flakestorm.github.outputs import failed_outputs, outputs_of
from flakestorm.github.step import Step
from flakestorm.loader import LoadedConfig
from flakestorm.redaction import active
from flakestorm.reporters.delta import compared_of
from flakestorm.reporters.public import public
from flakestorm.reporters.registry import write_reports
from flakestorm.reporters.view import run_verdict
from flakestorm.results.model import RunResult

__all__ = ["attempt", "config_problems", "config_read", "publish", "publish_error"]

Work = Callable[[], tuple[RunResult, Iterable[OutputFormat] | None]]
"""A run or a merge: its result and the report formats it asks for (None: the defaults)."""


def config_read(step: Step, gh: GitHub, loaded: LoadedConfig) -> list[str]:
    """The secrets of the config ``loaded`` (and the proxy token), masked in the rest of the
    job's log, then its warnings on their lines; returns the secrets."""
    secrets = step.secrets(loaded.secrets)
    for secret in secrets:
        gh.add_mask(secret)
    config_problems(step, gh, (), loaded.warnings)
    return secrets


def attempt(step: Step, gh: GitHub, out_dir: Path, work: Work) -> int:
    """``work()``'s result published to ``out_dir``, or its error (with the failed outputs):
    the step's exit code."""
    try:
        result, formats = work()
    except Exception as exc:  # a bug too: reported as one, exit 3
        return publish_error(step, gh, exc, out_dir)
    return publish(step, gh, result, out_dir, formats)


def publish(
    step: Step,
    gh: GitHub,
    result: RunResult,
    out_dir: Path,
    formats: Iterable[OutputFormat] | None,
) -> int:
    """``result`` judged, its reports written to ``out_dir`` (``formats``; None: the
    defaults), and told to GitHub; the step's exit code."""
    settings = step.settings
    # judged first, then written once: every report in the directory states the step's
    # verdict (its exit code's; under fail-on: regression, with the run's own gate beside
    # it) and leads with the delta, as the summary, the comment and the outputs do
    judged, notes = baseline_step.judge_step(settings, step.env, gh, result, step.root)
    gh.say(notes)
    if judged.matters:
        result = replace(result, step=judged.document(result))
    compared = compared_of(judged)
    shown = run_verdict(result)
    written = write_reports(result, out_dir, formats)
    gh.append_summary(verdict.summary_of(result, written, settings.redact.public))
    gh.set_outputs(outputs_of(result, shown, compared, step.relative(out_dir)).items())
    # the log is world-readable on a public repository too
    logged = public(result).result if settings.redact.public else result
    gh.say([verdict.result_error(result)])
    told = run_annotations(logged, shown, compared, step.config_name)
    gh.annotate_all(Level.WARNING, told.warnings, more_known)
    gh.annotate_all(Level.ERROR, told.errors, more_failed)
    sticky = pr_comment.sticky_of(result, shown, settings, step.config_name)
    if isinstance(sticky, pr_comment.Sticky):
        outcome = gh.sticky_comment(sticky.marker, sticky.render, create=sticky.create)
        gh.say([pr_comment.outcome_note(outcome)])
    else:
        gh.say([sticky])
    gh.say(verdict.verdict_notes(result, shown, step.relative(out_dir)))
    return shown.code


def publish_error(step: Step, gh: GitHub, exc: Exception, out_dir: Path) -> int:
    """An error that ended the step before it had a result (``exc``, raised by the run or the
    merge): told to GitHub, with the failed outputs; its exit code."""
    if isinstance(exc, ConfigError):
        config_problems(step, gh, exc.problems, exc.warnings)
        return int(ExitCode.CONFIG_ERROR)
    if isinstance(exc, FlakestormError):
        gh.annotate(Level.ERROR, verdict.run_error(exc))
    else:
        gh.log(verdict.INTERNAL_ERROR_LOG)
        gh.untrusted("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        gh.annotate(Level.ERROR, verdict.INTERNAL_ERROR)
    gh.set_outputs(failed_outputs(step.relative(out_dir)).items())
    if not isinstance(exc, FlakestormError):
        return int(ExitCode.INFRASTRUCTURE_ERROR)
    if exc.exit_code is ExitCode.INFRASTRUCTURE_ERROR:
        summary, line = verdict.error_verdict(exc, active()(str(exc)))  # the run's redactor
        gh.append_summary(summary)
        gh.say([line])
    return int(exc.exit_code)


def config_problems(
    step: Step, gh: GitHub, errors: Iterable[Problem], warnings: Iterable[Problem]
) -> None:
    """The config's problems, each on its line: its errors, then its warnings."""
    name = step.config_name
    for annotation in config_annotations(list(errors), name, "config error"):
        gh.annotate(Level.ERROR, annotation)
    for annotation in config_annotations(list(warnings), name, "config warning"):
        gh.annotate(Level.WARNING, annotation)
