"""The score's trend (SPEC §14): where the score has been going over the last runs on the base
branch, and this run after them, as a sparkline and a short table (pure).

A run of another config (another digest) is marked in the table and left out of the
sparkline: its score is not comparable. Runs whose report could not be read (an expired or
missing artifact) are counted, not shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from flakestorm.results.model import RunResult

BARS = "▁▂▃▄▅▆▇█"
MAX_POINTS = 20
"""Earlier runs a trend shows at most (and the action reads)."""


@dataclass(frozen=True)
class TrendPoint:
    """One run of the trend."""

    at: str
    """``YYYY-MM-DD`` (UTC), when the run started."""
    commit: str
    """Its commit, short (7 characters); ``""`` unknown."""
    score: float | None
    verdict: str
    """``PASS``, ``FAIL`` or ``ERROR``: the run's own gate."""
    other_config: bool = False
    """Run with another config (digest) than this run: marked, not mixed."""
    current: bool = False
    """This run."""

    def document(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_document(cls, d: Mapping[str, Any]) -> TrendPoint:
        score = d["score"]
        if score is not None and type(score) not in (int, float):
            raise TypeError(f"score {score!r} is not a number")
        return cls(
            at=str(d["at"]),
            commit=str(d["commit"]),
            score=score,
            verdict=str(d["verdict"]),
            other_config=bool(d.get("other_config", False)),
            current=bool(d.get("current", False)),
        )


@dataclass(frozen=True)
class Trend:
    """The runs of a trend, oldest first, this run last."""

    points: tuple[TrendPoint, ...]
    branch: str = ""
    """Where the earlier runs come from (``main``); ``""`` for local files."""
    skipped: int = 0
    """Earlier runs whose report could not be read (expired or missing artifact)."""

    @property
    def comparable(self) -> tuple[TrendPoint, ...]:
        """The points with a score of this run's config."""
        return tuple(p for p in self.points if not p.other_config and p.score is not None)

    def sparkline(self) -> str:
        """One bar per comparable run, scaled between the lowest and highest score shown."""
        scores = [p.score for p in self.comparable if p.score is not None]
        if not scores:
            return ""
        low, high = min(scores), max(scores)
        if high - low < 1e-9:
            return BARS[len(BARS) // 2] * len(scores)
        steps = len(BARS) - 1
        return "".join(BARS[round((s - low) / (high - low) * steps)] for s in scores)

    def headline(self) -> str:
        """``Score over the last 18 runs on main: ▇▇▆▅▄▃ 96.00 → 88.00``."""
        earlier = len(self.points) - sum(p.current for p in self.points)
        where = f" on {self.branch}" if self.branch else ""
        scores = [p.score for p in self.comparable if p.score is not None]
        span = f" {scores[0]:.2f} → {scores[-1]:.2f}" if len(scores) > 1 else ""
        text = f"Score over the last {earlier} run{'s' if earlier != 1 else ''}{where} and this one"
        extras = []
        if self.skipped:
            extras.append(f"{self.skipped} without a readable report")
        others = sum(p.other_config for p in self.points)
        if others:
            extras.append(f"{others} of another config, marked †")
        tail = f" ({'; '.join(extras)})" if extras else ""
        return f"{text}: {self.sparkline()}{span}{tail}"

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(date, commit, score, verdict) per point, oldest first."""
        out = []
        for p in self.points:
            score = "n/a" if p.score is None else f"{p.score:.2f}"
            commit = "this run" if p.current else (p.commit or "—")
            out.append((p.at, commit, score + (" †" if p.other_config else ""), p.verdict))
        return out

    def document(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "skipped": self.skipped,
            "points": [p.document() for p in self.points],
        }

    @classmethod
    def from_document(cls, d: Mapping[str, Any]) -> Trend:
        return cls(
            points=tuple(TrendPoint.from_document(p) for p in d["points"]),
            branch=str(d.get("branch", "")),
            skipped=int(d.get("skipped", 0)),
        )


def verdict_of(result: RunResult) -> str:
    """``PASS``, ``FAIL`` or ``ERROR``: a run's own gate, by its exit code."""
    return {0: "PASS", 1: "FAIL"}.get(result.exit_code, "ERROR")


def point_of(result: RunResult, *, commit: str, digest: str, current: bool = False) -> TrendPoint:
    """``result`` as a point of the trend of a run whose config digest is ``digest``."""
    return TrendPoint(
        at=result.started_at[:10],
        commit=commit[:7],
        score=result.overall.score,
        verdict=verdict_of(result),
        other_config=result.config_digest != digest,
        current=current,
    )


def trend_of(
    earlier: Sequence[TrendPoint], current: RunResult | None, branch: str = "", skipped: int = 0
) -> Trend:
    """The trend of ``earlier`` points (oldest first) and ``current`` (the run), the last
    :data:`MAX_POINTS` earlier ones."""
    ordered = list(earlier)[-MAX_POINTS:]
    if current is not None:
        ordered.append(point_of(current, commit="", digest=current.config_digest, current=True))
    return Trend(tuple(ordered), branch, skipped)
