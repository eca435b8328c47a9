"""How the action's step judges its run (SPEC §8, §14): its ``fail-on`` rule, and the delta
against the ``baseline`` input's baseline, or why there is none.

- ``baseline: auto``: the base branch's newest successful run of this workflow, its report
  artifact read through :mod:`flakestorm.github.baseline_source` (the REST reads), with the
  score's trend over the base branch's last runs;
- ``baseline: file:PATH``: a blessed baseline committed in the repository
  (:mod:`flakestorm.baseline.blessed`).

No baseline is a notice, never a failure; a baseline file that cannot be read as a blessed
baseline is a config error (exit 2, every report still written). :func:`judge_step` reads what
it needs and returns the :class:`~flakestorm.baseline.judgement.Judgement` with the notes for
the log (what was compared, in order); the rest are pure builders.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from flakestorm.baseline import blessed
from flakestorm.baseline.delta import Delta, FailOn, compare, same_config
from flakestorm.baseline.judgement import Judgement
from flakestorm.github import baseline_source as source
from flakestorm.github.notes import TITLE, Level, Note
from flakestorm.github.settings import BaselineFile, BaselineMode, Settings
from flakestorm.reporters import delta as delta_report
from flakestorm.reporters.escape import log_line
from flakestorm.results import clock
from flakestorm.results.model import RunResult
from flakestorm.results.trend import Trend, trend_of

__all__ = [
    "Judged",
    "delta_notes",
    "judge_step",
    "no_baseline",
    "of_blessed",
    "of_found",
    "trend_of_history",
]

Judged = tuple[Judgement, list[Note]]
"""How the step judged its run, and what the log says of it."""


def judge_step(
    settings: Settings, env: Mapping[str, str], api: source.Api, result: RunResult, root: Path
) -> Judged:
    """How the step judges ``result`` by ``settings`` (``env``: this workflow run's
    ``GITHUB_*``; ``api``: the REST reads; ``root``: the workspace a baseline file is in)."""
    unjudged = Judgement(settings.fail_on)
    if settings.baseline is BaselineMode.OFF:
        return unjudged, []
    if result.stop_reason == "interrupted":  # cancelled: report now, nothing to compare
        return unjudged, [Note("flakestorm: baseline: not compared (the run was cancelled)")]
    if result.shard is not None:  # a part of the run: the merge job compares the whole
        return unjudged, [
            Note(f"flakestorm: baseline: shard {result.shard} is compared by the merge job")
        ]
    if isinstance(settings.baseline, BaselineFile):
        return _blessed(settings.fail_on, root, settings.baseline, result)
    return _auto(settings, env, api, result)


def _blessed(fail_on: FailOn, root: Path, file: BaselineFile, result: RunResult) -> Judged:
    """``baseline: file:PATH``: a missing file is a notice, as no baseline is; one that cannot
    be read as a blessed baseline a config error."""
    try:
        baseline = blessed.load(root / file.path)
    except blessed.BaselineFileError as exc:
        reason = str(exc).replace(str(root) + "/", "")
        if isinstance(exc, blessed.MissingBaseline):
            return no_baseline(fail_on, reason)
        error = Judgement(fail_on, error=f"the baseline file {reason}")
        return error, [Note(f"flakestorm: baseline: {log_line(reason, 1500)}")]
    return of_blessed(fail_on, baseline, result)


def _auto(settings: Settings, env: Mapping[str, str], api: source.Api, result: RunResult) -> Judged:
    """``baseline: auto``: the base branch's newest successful run of this workflow."""
    query = source.query_of(env, settings.baseline_branch, settings.baseline_artifact)
    if isinstance(query, source.NoBaseline):
        return _none(settings.fail_on, query)
    found = source.find_baseline(api, query)
    if isinstance(found, source.Baseline) and not same_config(found.result, result):
        found = source.NoBaseline(
            f"the baseline run {found.run.id} ran {found.result.config_path}, this run "
            f"{result.config_path}: give each config its own `baseline-artifact`"
        )
    if isinstance(found, source.NoBaseline):
        return _none(settings.fail_on, found)
    history = source.find_history(api, query, result.config_digest, known=found)
    trend, notes = trend_of_history(history, result, query.branch)
    judged, compared = of_found(settings.fail_on, found, result, trend)
    return judged, notes + compared


def _none(fail_on: FailOn, none: source.NoBaseline) -> Judged:
    """No baseline found: a log line when there is none by design (a push to the base
    branch), else the notice."""
    if none.expected:
        return Judgement(fail_on), [
            Note(f"flakestorm: baseline: none: {log_line(none.reason, 400)}")
        ]
    return no_baseline(fail_on, none.reason)


def no_baseline(fail_on: FailOn, reason: str) -> Judged:
    """No baseline to compare with: a notice (never a failure), saying why and what
    ``fail-on: regression`` makes of it."""
    if fail_on is FailOn.REGRESSION:
        reason += (
            " — fail-on: regression has nothing to compare with, so no failure counts "
            "as new (only an infrastructure error fails this step)"
        )
    notice = Note(
        f"flakestorm: no baseline: {log_line(reason, 1500)}", Level.NOTICE, f"{TITLE}: no baseline"
    )
    return Judgement(fail_on, missing=reason), [notice]


def of_blessed(fail_on: FailOn, baseline: blessed.Blessed, result: RunResult) -> Judged:
    """``result`` judged against a blessed baseline: its warnings (stale, another config),
    then the comparison."""
    today = clock.today()
    notes = [
        Note(f"flakestorm: {log_line(warning, 1500)}", Level.WARNING, f"{TITLE}: baseline")
        for warning in baseline.warnings(today, result.config_digest)
    ]
    judged = Judgement(
        fail_on=fail_on,
        delta=_shown(compare(baseline.index, result)),
        against=baseline.label,
        age=baseline.age_text(today, result.config_digest),
    )
    return judged, notes + delta_notes(judged)


def of_found(
    fail_on: FailOn, found: source.Baseline, result: RunResult, trend: Trend | None
) -> Judged:
    """``result`` judged against the base branch's run ``found`` (with the score's
    ``trend``)."""
    judged = Judgement(
        fail_on=fail_on,
        delta=_shown(compare(found.result, result)),
        against=found.run.label,
        age=source.age_text(found.run.created_at, datetime.now(timezone.utc)),
        url=found.run.url,
        trend=trend,
    )
    return judged, delta_notes(judged)


def trend_of_history(
    history: source.History | source.NoBaseline, result: RunResult, branch: str
) -> tuple[Trend | None, list[Note]]:
    """The score over the base branch's last runs and this one (SPEC §14); None, with a log
    line, when they could not be read."""
    if isinstance(history, source.NoBaseline):
        return None, [Note(f"flakestorm: trend: not shown: {log_line(history.reason, 400)}")]
    trend = trend_of(history.points, result, branch, history.skipped)
    return trend, [Note(f"flakestorm: trend: {trend.headline()}")]


def delta_notes(judged: Judgement) -> list[Note]:
    """The comparison ``judged`` made, as the log shows it."""
    compared = delta_report.compared_of(judged)
    if compared is None:
        return []
    return [
        Note(line if line.startswith(" ") else f"flakestorm: baseline: {line}")
        for line in delta_report.terminal_lines(compared)
    ]


def _shown(delta: Delta) -> Delta:
    """``delta`` with only the changes a report shows."""
    return Delta(tuple(c for c in delta.changes if c.change.shown))
