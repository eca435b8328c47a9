"""The score's trend as the HTML report draws it (SPEC §14): an inline SVG line chart, its
geometry computed here, its markup in the template (every label escaped there)."""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.results.trend import Trend

WIDTH, HEIGHT, PAD = 640, 160, 24


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    label: str
    """``2026-11-01 abc1234: 93.50 PASS`` (untrusted: the template escapes it)."""
    kind: str
    """``run``, ``current`` or ``other`` (another config: drawn apart, not on the line)."""


@dataclass(frozen=True)
class TrendChart:
    width: int
    height: int
    line: str
    """The polyline's ``points`` over the comparable runs."""
    dots: tuple[Dot, ...]
    low: str
    high: str
    title: str


def chart(trend: Trend) -> TrendChart | None:
    """The chart of ``trend``; None when no run has a score."""
    scored = [p for p in trend.points if p.score is not None]
    if not scored:
        return None
    scores = [p.score for p in scored if p.score is not None]
    low, high = min(scores), max(scores)
    span = max(high - low, 1.0)
    step = (WIDTH - 2 * PAD) / max(len(trend.points) - 1, 1)

    def y(score: float) -> float:
        return round(HEIGHT - PAD - (score - low) / span * (HEIGHT - 2 * PAD), 1)

    dots = []
    for i, p in enumerate(trend.points):
        if p.score is None:
            continue
        kind = "current" if p.current else "other" if p.other_config else "run"
        commit = "this run" if p.current else p.commit
        label = f"{p.at} {commit}: {p.score:.2f} {p.verdict}"
        if p.other_config:
            label += " (another config)"
        dots.append(Dot(round(PAD + i * step, 1), y(p.score), label, kind))
    line = " ".join(f"{d.x},{d.y}" for d in dots if d.kind != "other")
    return TrendChart(
        WIDTH, HEIGHT, line, tuple(dots), f"{low:.2f}", f"{high:.2f}", trend.headline()
    )
