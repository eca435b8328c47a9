"""A sweep's results (SPEC §4.1, "Sweeps"): which scenarios a swept scenario ran as, and where
each invariant breaks, judged from a phase's cells (:func:`judged`), and read back from
``results.json``. Expanding a sweep into scenarios is reading the config:
:mod:`flakestorm.meaning.sweeps`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flakestorm.results.status import Status

if TYPE_CHECKING:  # a phase's outcome holds its sweeps (results.model imports this module)
    from flakestorm.results.model import PhaseOutcome


@dataclass(frozen=True)
class BreakingPoint:
    """Where one invariant breaks along a sweep (SPEC §4.1): ``value`` is the first value at
    which it fails and stays failed (None when it never breaks, or has no verdict)."""

    invariant: str
    value: str | None
    text: str
    """``breaks at 1200``, ``fails from the first value``, ``holds over the whole range``."""
    marks: tuple[str | None, ...]
    """Per value, in order: ``passed``, ``failed`` (a failed or errored cell) or None (skipped,
    not run)."""


@dataclass(frozen=True)
class SweepInfo:
    """A swept scenario (:mod:`flakestorm.meaning.sweeps`): the field it varies, its values in
    order, the scenario each value ran as, and per invariant its breaking point."""

    scenario: str
    field: str
    values: tuple[str, ...]
    scenarios: tuple[str, ...]
    breaking: tuple[BreakingPoint, ...] = ()


def sweep_from_document(d: Mapping[str, Any]) -> SweepInfo:
    return SweepInfo(
        **{
            **d,
            "values": tuple(d["values"]),
            "scenarios": tuple(d["scenarios"]),
            "breaking": tuple(
                BreakingPoint(**{**b, "marks": tuple(b["marks"])}) for b in d.get("breaking", ())
            ),
        }
    )


def breaking_point(
    invariant: str, marks: Sequence[str | None], values: Sequence[str]
) -> BreakingPoint:
    """The breaking point of ``invariant`` from its verdict at each value, in value order."""
    judged = [(v, m) for v, m in zip(values, marks, strict=True) if m is not None]
    if not judged:
        return BreakingPoint(invariant, None, "no verdict (skipped or not run)", tuple(marks))
    breaks: str | None = None
    for i, (value, mark) in enumerate(judged):
        if mark == "failed" and all(m == "failed" for _, m in judged[i:]):
            breaks = value
            break
    if breaks is None:
        return BreakingPoint(invariant, None, "holds over the whole range", tuple(marks))
    if breaks == judged[0][0]:
        return BreakingPoint(invariant, breaks, "fails from the first value", tuple(marks))
    return BreakingPoint(invariant, breaks, f"breaks at {breaks}", tuple(marks))


def judged(outcome: PhaseOutcome) -> PhaseOutcome:
    """``outcome`` with each sweep's breaking points, from its cells (one pass)."""
    if not outcome.sweeps:
        return outcome
    wanted = {name for sweep in outcome.sweeps for name in sweep.scenarios}
    marks: dict[tuple[str, str], str | None] = {}
    for cell in outcome.cells:
        if cell.scenario in wanted:
            marks[cell.invariant_id, cell.scenario] = _mark(cell.status)
    sweeps = []
    for sweep in outcome.sweeps:
        points = tuple(
            breaking_point(
                info.id, [marks.get((info.id, name)) for name in sweep.scenarios], sweep.values
            )
            for info in outcome.invariants
        )
        sweeps.append(dataclasses.replace(sweep, breaking=points))
    return dataclasses.replace(outcome, sweeps=tuple(sweeps))


def _mark(status: Status) -> str | None:
    if status is Status.PASSED:
        return "passed"
    if status in (Status.FAILED, Status.ERRORED):
        return "failed"
    return None
