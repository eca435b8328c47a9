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
from flakestorm.reporters.escape import text
from flakestorm.reporters.terminal import safe

__all__ = ["MAX_ROWS", "Compared", "markdown", "missing_markdown", "terminal_lines"]

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


def markdown(compared: Compared) -> str:
    """The block for the job summary and the PR comment."""
    delta = compared.delta
    link = ""
    if compared.url is not None and compared.url.startswith("https://"):
        link = f" ([run]({compared.url.replace(')', '%29').replace(' ', '%20')}))"
    out = [
        f"**{text(delta.headline(compared.against), 300)}**",
        "",
        f"Baseline: {text(compared.against, 120)}, {compared.age}{link}.",
    ]
    changed = _sorted(delta)
    if changed:
        out += [
            "",
            f"<details{' open' if delta.new_failures else ''}><summary>Changed cells</summary>",
            "",
            "| | change | cell | phase | baseline | now | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for change in changed[:MAX_ROWS]:
            note = f"Fisher p = {change.p_value:.3f}" if change.p_value is not None else ""
            out.append(
                f"| {_MARKS[change.change]} | {change.change.value} | {text(change.cell_id, 160)} "
                f"| {text(change.phase, 40)} | {_status(change, True)} | {_status(change, False)} "
                f"| {note} |"
            )
        if len(changed) > MAX_ROWS:
            out.append("")
            out.append(f"… and {len(changed) - MAX_ROWS} more changed cells.")
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def missing_markdown(reason: str) -> str:
    """The line that says there is no baseline (a notice, never a failure)."""
    return f"> [!NOTE]\n> No baseline to compare with: {text(reason, 600)}\n"


def terminal_lines(compared: Compared) -> Sequence[str]:
    """The delta for a terminal or the log: the headline, then one line a changed cell."""
    lines = [safe(compared.delta.headline(compared.against), 300)]
    for change in _sorted(compared.delta):
        note = f" (Fisher p = {change.p_value:.3f})" if change.p_value is not None else ""
        lines.append(
            f"  {change.change.value.upper():<14} {safe(change.phase, 40)}: "
            f"{safe(change.cell_id, 160)}  {_status(change, True)} -> {_status(change, False)}"
            f"{note}"
        )
    return lines
