"""Sweeps as every report shows them (SPEC §4.1, "Sweeps"): per invariant the verdict at each
value and the breaking point, the pass rate per value, and the chart's geometry. Pure; the
formats escape what they print."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.results.sweeps import SweepInfo

MARKS = {"passed": "✅", "failed": "❌", None: "➖"}
"""A value's verdict for an invariant: passed, failed (or errored), no verdict."""


def title(sweep: SweepInfo) -> str:
    """``slow-quotes: tool_faults[0].delay_ms over 250 … 2000``."""
    return f"{sweep.scenario}: {sweep.field} over {sweep.values[0]} … {sweep.values[-1]}"


def pass_rates(sweep: SweepInfo) -> list[float | None]:
    """Per value, the share of invariants that passed among those judged (None: none judged)."""
    rates: list[float | None] = []
    for i in range(len(sweep.values)):
        marks = [p.marks[i] for p in sweep.breaking if p.marks[i] is not None]
        rates.append(None if not marks else sum(m == "passed" for m in marks) / len(marks))
    return rates


def compact(sweep: SweepInfo, limit: int = 6) -> str:
    """``prices breaks at 1000; answers holds over the whole range`` (the first ``limit``
    invariants, broken ones first)."""
    points = sorted(sweep.breaking, key=lambda p: p.value is None)
    shown = [f"{p.invariant} {p.text}" for p in points[:limit]]
    if len(points) > limit:
        shown.append(f"… {len(points) - limit} more")
    return "; ".join(shown) if shown else "no invariant judged"


@dataclass(frozen=True)
class Chart:
    """An SVG line chart of the pass rate against the swept value (values evenly spaced)."""

    width: int
    height: int
    points: tuple[tuple[float, float, str, str], ...]
    """(x, y, value, pass rate as text) of each judged value."""
    ticks: tuple[tuple[float, str], ...]
    """(x, value) of every value, for the axis labels."""
    line: str
    """The polyline's ``points`` attribute."""
    left: int
    right: int
    top: int
    bottom: int


def chart(sweep: SweepInfo, width: int = 560, height: int = 200) -> Chart:
    left, right, top, bottom = 48, width - 16, 16, height - 36
    count = len(sweep.values)
    step = (right - left) / max(count - 1, 1)
    xs = [left + i * step for i in range(count)]
    points = []
    for x, value, rate in zip(xs, sweep.values, pass_rates(sweep), strict=True):
        if rate is None:
            continue
        y = bottom - rate * (bottom - top)
        points.append((round(x, 1), round(y, 1), value, f"{rate * 100:.0f}%"))
    line = " ".join(f"{x},{y}" for x, y, _, _ in points)
    ticks = tuple((round(x, 1), v) for x, v in zip(xs, sweep.values, strict=True))
    return Chart(width, height, tuple(points), ticks, line, left, right, top, bottom)


def rows(sweep: SweepInfo) -> Sequence[tuple[str, tuple[str, ...], str]]:
    """(invariant, mark per value, breaking point) per invariant."""
    return [
        (p.invariant, tuple(MARKS.get(m, "➖") for m in p.marks), p.text) for p in sweep.breaking
    ]
