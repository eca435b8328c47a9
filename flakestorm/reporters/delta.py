"""The baseline delta, rendered: the block that leads the job summary and the PR comment, and
the lines ``flakestorm compare`` prints.

The block's first line is the headline (``**2 new failures vs main @ abc1234, 1 fixed**``), then
the baseline's age and run, and a table of the cells that changed (new failures first, at most
:data:`MAX_ROWS`). Cell ids come from the baseline artifact too: everything is escaped
(:mod:`flakestorm.reporters.escape`). The verdict is not here: the heading that follows states
it (:func:`flakestorm.reporters.view.step_verdict`: under ``fail-on: regression``, the step's,
with the run's own gate beside it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.baseline.delta import CellChange, Change, Delta, FailOn
from flakestorm.baseline.judgement import Judgement, judgement_of
from flakestorm.reporters.escape import log_line, text
from flakestorm.results.model import RunResult
from flakestorm.results.trend import Trend

__all__ = [
    "MAX_ROWS",
    "Compared",
    "Row",
    "compared_of",
    "lead",
    "link",
    "markdown",
    "missing_markdown",
    "rows",
    "terminal_lines",
]

MAX_ROWS = 50
"""Changed cells listed in the block; the rest are counted."""

_ORDER = (
    Change.NEW_FAILURE,
    Change.FIXED,
    Change.WITHIN_NOISE,
    Change.STILL_FAILING,
    Change.NEW,
    Change.REMOVED,
)
_MARKS = {
    Change.NEW_FAILURE: "🔴",
    Change.FIXED: "🟢",
    Change.WITHIN_NOISE: "🟡",
    Change.STILL_FAILING: "⚫",
    Change.NEW: "🆕",
    Change.REMOVED: "➖",
}


@dataclass(frozen=True)
class Compared:
    """A delta and what it was computed against."""

    delta: Delta
    against: str
    """``main @ abc1234``."""
    age: str
    """``3 hours old``."""
    url: str | None = None
    """The baseline run's page."""
    fail_on: FailOn = FailOn.ANY
    """The rule the step is judged by."""


def compared_of(judged: Judgement) -> Compared | None:
    """The delta a step compared its run with, and against what; None when it compared none."""
    if judged.delta is None:
        return None
    return Compared(judged.delta, judged.against, judged.age, judged.url, judged.fail_on)


MAX_TREND_ROWS = 21
"""The trend's table in the job summary: every run it shows."""


def lead(result: RunResult, trend_rows: int = MAX_TREND_ROWS) -> str:
    """The block that leads ``result``'s job summary and comment: the delta its step compared
    it with (:attr:`RunResult.step`), or why there was no baseline, then the score's trend
    (its last ``trend_rows`` runs in the table); empty when it carries none."""
    judged = judgement_of(result)
    if judged is None:
        return ""
    compared = compared_of(judged)
    if compared is not None:
        block = markdown(compared)
    else:
        block = missing_markdown(judged.missing) if judged.missing else ""
    if judged.trend is not None and judged.trend.points:
        block = (
            f"{block}\n{trend_markdown(judged.trend, trend_rows)}"
            if block
            else (trend_markdown(judged.trend, trend_rows))
        )
    return block


def trend_markdown(trend: Trend, rows_shown: int = MAX_TREND_ROWS) -> str:
    """The score's trend (SPEC §14): the sparkline line, then a table of the last runs (date,
    commit, score, verdict), newest last."""
    rows = trend.rows()
    shown = rows[-rows_shown:]
    out = [f"**Score trend**: {text(trend.headline(), 400)}", ""]
    out += [
        f"<details><summary>The last {len(shown)} runs</summary>",
        "",
        "| date | commit | score | verdict |",
        "|---|---|---|---|",
    ]
    out += [f"| {text(d, 20)} | {text(c, 20)} | {text(sc, 20)} | {v} |" for d, c, sc, v in shown]
    out += ["", "</details>", ""]
    return "\n".join(out)


def _status(change: CellChange, base: bool) -> str:
    status = change.base if base else change.head
    runs = change.base_runs if base else change.head_runs
    if status is None:
        return "—"
    shown = status.value
    if runs[1] > 1:
        shown += f" ({runs[0]}/{runs[1]})"
    return shown


def _sorted(delta: Delta) -> list[CellChange]:
    return [c for change in _ORDER for c in delta.of(change)]


@dataclass(frozen=True)
class Row:
    """A changed cell as the block lists it (``cell_id`` and ``phase`` untrusted: escape)."""

    mark: str
    change: str
    cell_id: str
    phase: str
    base: str
    now: str
    note: str


def rows(compared: Compared) -> tuple[list[Row], int]:
    """The changed cells the block lists (new failures first, at most :data:`MAX_ROWS`), and
    how many more there are."""
    changed = _sorted(compared.delta)
    listed = [
        Row(
            mark=_MARKS[change.change],
            change=change.change.value,
            cell_id=change.cell_id,
            phase=change.phase,
            base=_status(change, True),
            now=_status(change, False),
            note=f"Fisher p = {change.p_value:.3f}" if change.p_value is not None else "",
        )
        for change in changed[:MAX_ROWS]
    ]
    return listed, len(changed) - len(listed)


def link(compared: Compared) -> str | None:
    """The baseline run's page, when it is an ``https://`` URL."""
    url = compared.url
    return url if url is not None and url.startswith("https://") else None


def markdown(compared: Compared) -> str:
    """The block for the job summary and the PR comment."""
    delta = compared.delta
    url = link(compared)
    run = f" ([run]({url.replace(')', '%29').replace(' ', '%20')}))" if url else ""
    out = [
        f"**{text(delta.headline(compared.against), 300)}**",
        "",
        f"Baseline: {text(compared.against, 120)}, {compared.age}{run}.",
    ]
    listed, more = rows(compared)
    if listed:
        out += [
            "",
            f"<details{' open' if delta.new_failures else ''}><summary>Changed cells</summary>",
            "",
            "| | change | cell | phase | baseline | now | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in listed:
            out.append(
                f"| {row.mark} | {row.change} | {text(row.cell_id, 160)} "
                f"| {text(row.phase, 40)} | {row.base} | {row.now} | {row.note} |"
            )
        if more:
            out.append("")
            out.append(f"… and {more} more changed cells.")
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def missing_markdown(reason: str) -> str:
    """The line that says there is no baseline (a notice, never a failure)."""
    return f"> [!NOTE]\n> No baseline to compare with: {text(reason, 600)}\n"


def terminal_lines(compared: Compared) -> Sequence[str]:
    """The delta for a terminal or the log: the headline, then one line a changed cell."""
    lines = [log_line(compared.delta.headline(compared.against), 300)]
    for change in _sorted(compared.delta):
        note = f" (Fisher p = {change.p_value:.3f})" if change.p_value is not None else ""
        lines.append(
            f"  {change.change.value.upper():<14} {log_line(change.phase, 40)}: "
            f"{log_line(change.cell_id, 160)}  {_status(change, True)} -> {_status(change, False)}"
            f"{note}"
        )
    return lines
