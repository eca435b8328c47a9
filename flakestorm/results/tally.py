"""What the scores and the reports need of a phase's items besides the items themselves,
counted once (SPEC §9).

A :class:`Tally` is kept beside each :class:`~flakestorm.results.spool.Spool` and counts every item
as
it is written (an item written again under its index is taken out first): statuses, the score's
weights, the per-type table of a mutation phase, the time of the JUnit cases, and the indexes
of the items the reports list (failed or errored, judged on an isolated re-run), and each
cell's place in the matrix and its mark (:class:`CellMark`). It holds the counts, per type, per
failed item its id and what decides whether it failed critically, and per cell a few shared
strings and flags, never the items (their texts, invocations and calls), so a run's memory stays
small beside its size. Scores and reports take a phase's tally from :func:`tally_of`, instead of
reading the whole spool again: a tuple of items (a phase read back from ``results.json``, a
merged run) is counted in one pass. A matrix is drawn from the marks, and a report that shows
some cells reads only those (by index).
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from flakestorm.results.model import CellResult, MutationResult, Status


@functools.cache
def _severity_weight(severity: str) -> int:
    # imported here: the config package loads pydantic, which the CLI's start-up leaves out
    from flakestorm.config import Severity

    return Severity(severity).weight


def seconds(item: CellResult | MutationResult) -> float:
    """The item's time as its JUnit case has it: its invocations' latency, in seconds."""
    if isinstance(item, MutationResult):
        return round(item.latency_ms / 1000.0, 6)
    return round(sum(p.latency_ms for p in item.prompts) / 1000.0, 6)


class CellMark(NamedTuple):
    """What a matrix shows of a cell: its row and column, its status and whether it is flaky;
    and whether it has notes (a report lists those of the cells that did not fail)."""

    invariant_id: str
    scenario: str
    status: Status
    flaky: bool
    noted: bool


@dataclass
class TypeCount:
    """One mutation type: its first index (the table's order), the weight of its last,
    mutations, scored, passed."""

    first: int
    last: int
    weight: float
    items: int = 0
    scored: int = 0
    passed: int = 0


@dataclass
class Tally:
    """The counts of a phase's items (see the module docstring)."""

    statuses: Counter[str] = field(default_factory=Counter)
    flaky: int = 0
    scored: int = 0
    weights: Counter[float] = field(default_factory=Counter)
    """The scored items per score weight…"""
    passed_weights: Counter[float] = field(default_factory=Counter)
    """…and the passed ones (counts, so a sum does not depend on the order items came in)."""
    microseconds: int = 0
    """The items' :func:`seconds`, summed exactly."""
    missed: dict[int, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """Scored items that did not pass, by index: their id, and what makes them critical (a
    cell's severity, a mutation's failed invariants)."""
    errored: dict[int, bool] = field(default_factory=dict)
    """The indexes of those of them that errored (the others failed)."""
    isolated: dict[int, bool] = field(default_factory=dict)
    """Mutations judged on an isolated re-run, by index: whether they passed."""
    types: dict[str, TypeCount] = field(default_factory=dict)
    cells: dict[int, CellMark] = field(default_factory=dict)
    """Each cell's :class:`CellMark`, by index (its strings shared between cells)."""
    leaks: int = 0
    """The cells' replies that failed a leak invariant (``leak_at``)."""

    @classmethod
    def of(cls, items: Sequence[Any]) -> Tally:
        """``items`` counted in one pass."""
        tally = cls()
        for position, item in enumerate(items):
            tally.add(item, at=position)
        return tally

    def add(self, item: CellResult | MutationResult, sign: int = 1, at: int | None = None) -> None:
        """Count ``item`` in (``sign`` -1: out again), under its index or ``at`` (its position
        in a sequence counted whole, whose items need not have indexes of their own)."""
        key = item.index if at is None else at
        status = item.status
        self.statuses[status.value] += sign
        self.flaky += sign * item.flaky
        self.microseconds += sign * round(seconds(item) * 1_000_000)
        keys: tuple[str, ...]  # what makes it critical when it failed
        if isinstance(item, MutationResult):
            self._type(item, key, sign)
            mark(self.isolated, key, item.isolated, status is Status.PASSED, sign)
            weight: float = item.weight
            keys = item.failed_invariants
        else:
            weight, keys = _severity_weight(item.severity), (item.severity,)
            self._cell(item, key, sign)
        if not status.scored:
            return
        self.scored += sign
        self.weights[weight] += sign
        if status is Status.PASSED:
            self.passed_weights[weight] += sign
            return
        mark(self.missed, key, True, (item.id, keys), sign)
        mark(self.errored, key, status is Status.ERRORED, True, sign)

    def _cell(self, cell: CellResult, key: int, sign: int) -> None:
        self.leaks += sign * sum(p.leak_at is not None for p in cell.prompts)
        if sign < 0:
            self.cells.pop(key, None)
            return
        self.cells[key] = CellMark(
            sys.intern(cell.invariant_id),
            sys.intern(cell.scenario),
            cell.status,
            cell.flaky,
            bool(cell.notes),
        )

    def _type(self, mutation: MutationResult, key: int, sign: int) -> None:
        kind = self.types.setdefault(mutation.type, TypeCount(key, key, 0))
        kind.first = min(kind.first, key)
        if key >= kind.last:
            kind.last, kind.weight = key, mutation.weight
        kind.items += sign
        kind.scored += sign * mutation.status.scored
        kind.passed += sign * (mutation.status is Status.PASSED)
        if not kind.items:
            del self.types[mutation.type]

    @property
    def total(self) -> float:
        """The score's weight of the scored items…"""
        return sum(weight * n for weight, n in sorted(self.weights.items()))

    @property
    def earned(self) -> float:
        """…and of the passed ones."""
        return sum(weight * n for weight, n in sorted(self.passed_weights.items()))

    @property
    def count(self) -> int:
        """How many items there are."""
        return sum(self.statuses.values())

    def failed(self) -> list[int]:
        """The indexes of the failed and errored items, in order."""
        return sorted(self.missed)

    def critical(self, critical: Sequence[str]) -> tuple[str, ...]:
        """The ids of the items that failed critically: a cell of ``critical`` severity, a
        mutation that failed an invariant of ``critical``, in index order."""
        return tuple(
            ident
            for _, (ident, keys) in sorted(self.missed.items())
            if any(key in critical for key in keys)
        )


def tally_of(items: Sequence[Any]) -> Tally:
    """The tally of a phase's ``items``: kept beside them when they are spooled, else counted
    now."""
    kept: Tally | None = getattr(items, "tally", None)
    return kept if kept is not None else Tally.of(items)


def mark(marks: dict[int, Any], index: int, marked: bool, value: Any, sign: int) -> None:
    """``marks[index] = value`` when ``marked`` (``sign`` -1: taken out again)."""
    if not marked:
        return
    if sign > 0:
        marks[index] = value
    else:
        marks.pop(index, None)
