"""The cell-by-cell delta between a baseline run and this run, and the gate on it.

Cells are matched by their phase (the key in ``RunResult.phases``: ``contract``, ``chaos``,
``mutation``, ``replay``…) and their stable id (``CellResult.id``: ``invariant[scenario]``, or
whatever id a phase gives its items), so a renamed contract still matches, and a phase added
later needs nothing here. A mutation's id (``type#prompt.variant``) numbers its golden prompt
by position, so mutations are matched by type, golden prompt *text* and variant instead (what
the mutation is made from, SPEC §6): a pull request that adds, removes or reorders golden
prompts does not turn a known failure into a new one or a fixed one. Reports show the run's
own id (the baseline's for a removed mutation).

A cell is *failing* when FAILED or ERRORED, *passing* when PASSED; SKIPPED and NOT_RUN cells
are not verdicts and compare as neither. In the baseline only FAILED is a known failure: an
ERRORED cell there is no known state (flakestorm could not carry it out: a judge that was down)
and compares as neither, so a cell that errored in the baseline and fails now is a new failure,
never "still failing" (``baseline bless`` refuses such a run).

==================  =======================================================================
change              when
==================  =======================================================================
``new failure``     failing now, not a known failure in the baseline; for a cell repeated
                    at least :data:`MIN_REPEAT` times on both sides, failing now and significantly
                    worse than in the baseline (the one-sided Fisher exact test on its pass
                    counts gives p < :data:`ALPHA`), even when it already failed there as
                    flaky (4/5 before, 0/5 now)
``within noise``    failing now, passing in the baseline, but not significantly worse
                    (repeated cells only): a flaky cell does not block a merge
``still failing``   failing now, a known failure in the baseline (repeated cells: and not
                    significantly worse)
``fixed``           a known failure in the baseline, passing now
``new``             not in the baseline (a new invariant, scenario, mutation or session)
``removed``         in the baseline only
``unchanged``       anything else (passing in both, skipped, not run)
==================  =======================================================================

``fail-on: regression`` (:class:`FailOn`) gates on new failures only; a run's infrastructure
error (exit 3) stays an error whatever the delta.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from flakestorm.baseline.fisher import fisher_one_sided
from flakestorm.errors import ExitCode
from flakestorm.results.model import CellResult, MutationResult, RunResult, Status

__all__ = [
    "ALPHA",
    "MIN_REPEAT",
    "CellChange",
    "Change",
    "Delta",
    "FailOn",
    "Key",
    "Seen",
    "compare",
    "index_of",
    "items_of",
    "mutation_identity",
    "same_config",
]

MIN_REPEAT = 5
"""Runs a cell needs on both sides before a failure must be significant to count as new."""

ALPHA = 0.05
"""The significance level of the Fisher test for repeated cells."""

_FAILING = (Status.FAILED, Status.ERRORED)
_KNOWN_FAILURE = Status.FAILED
"""A baseline's failing status: an errored baseline cell is no known state."""


class Change(str, enum.Enum):
    """How a cell changed since the baseline."""

    NEW_FAILURE = "new failure"
    WITHIN_NOISE = "within noise"
    STILL_FAILING = "still failing"
    FIXED = "fixed"
    NEW = "new"
    REMOVED = "removed"
    UNCHANGED = "unchanged"

    @property
    def shown(self) -> bool:
        """Whether reports list the cells with this change (all but unchanged)."""
        return self is not Change.UNCHANGED


@dataclass(frozen=True)
class CellChange:
    """One cell of either run, and how it changed."""

    phase: str
    cell_id: str
    change: Change
    base: Status | None
    """The baseline's status (None: not in the baseline)."""
    head: Status | None
    """This run's status (None: not in this run)."""
    severity: str
    p_value: float | None = None
    """The Fisher test's p-value, for a repeated cell that fails now."""
    base_runs: tuple[int, int] = (0, 0)
    """(passed, total) runs in the baseline."""
    head_runs: tuple[int, int] = (0, 0)

    @property
    def key(self) -> str:
        return f"{self.phase}:{self.cell_id}"


@dataclass(frozen=True)
class Delta:
    """The cells that changed (every change but ``unchanged``), in this run's report order
    then the removed ones; the unchanged cells are only counted, so a delta holds what moved,
    not every cell of two large runs."""

    changes: tuple[CellChange, ...]
    unchanged: int = 0
    """How many cells did not change."""

    def of(self, change: Change) -> tuple[CellChange, ...]:
        return tuple(c for c in self.changes if c.change is change)

    @property
    def new_failures(self) -> int:
        return len(self.of(Change.NEW_FAILURE))

    @property
    def fixed(self) -> int:
        return len(self.of(Change.FIXED))

    def counts(self) -> dict[Change, int]:
        """Cells per change, every change present (zero included)."""
        counts = {change: len(self.of(change)) for change in Change}
        counts[Change.UNCHANGED] += self.unchanged
        return counts

    def headline(self, against: str) -> str:
        """``2 new failures vs main @ abc1234, 1 fixed`` (``against`` is what was compared)."""
        counts = self.counts()
        parts = [f"{_plural(counts[Change.NEW_FAILURE], 'new failure')} vs {against}"]
        for change in (Change.FIXED, Change.STILL_FAILING, Change.WITHIN_NOISE):
            if counts[change]:
                parts.append(f"{counts[change]} {change.value}")
        for change in (Change.NEW, Change.REMOVED):
            if counts[change]:
                parts.append(f"{_plural(counts[change], change.value + ' cell')}")
        return ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _identity(item: CellResult | MutationResult) -> str:
    """What matches an item across runs: a cell's id; a mutation's type, golden prompt and
    variant (its id without the prompt's position)."""
    if isinstance(item, MutationResult):
        return mutation_identity(item.id, item.type, item.original)
    return item.id


def mutation_identity(mutation_id: str, kind: str, original: str) -> str:
    """A mutation's identity (:func:`_identity`) from its id, type and golden prompt."""
    variant = mutation_id.rpartition(".")[2]
    return "\0".join(("mutation", kind, original, variant))


def items_of(
    result: RunResult,
) -> Iterator[tuple[tuple[str, str], str, CellResult | MutationResult]]:
    """((phase, identity), id, cell) for every cell and mutation, read one at a time; a
    repeated id in one phase gets ``#2``, ``#3``…, and so does a repeated identity (a golden
    prompt listed twice)."""
    for phase, outcome in result.phases.items():
        ids: dict[str, int] = {}
        identities: dict[str, int] = {}
        for items in (outcome.cells, outcome.mutations):
            for cell in items:
                ids[cell.id] = ids.get(cell.id, 0) + 1
                cell_id = cell.id if ids[cell.id] == 1 else f"{cell.id}#{ids[cell.id]}"
                identity = _identity(cell)
                identities[identity] = identities.get(identity, 0) + 1
                if identities[identity] > 1:
                    identity = f"{identity}#{identities[identity]}"
                yield (phase, identity), cell_id, cell


@dataclass(frozen=True, slots=True)
class Seen:
    """What the delta needs of a baseline cell: its id, status, severity and pass counts (an
    index of the baseline holds these, not its cells)."""

    cell_id: str
    status: Status
    severity: str
    runs_passed: int
    runs_total: int


Key = tuple[str, str]
"""(phase, identity): what matches an item across runs."""


def index_of(result: RunResult) -> dict[Key, Seen]:
    """What the delta needs of a baseline run, by item (:class:`Seen`)."""
    return {
        key: Seen(cell_id, cell.status, cell.severity, cell.runs_passed, cell.runs_total)
        for key, cell_id, cell in items_of(result)
    }


def compare(
    base: RunResult | Mapping[Key, Seen],
    head: RunResult,
    *,
    min_repeat: int = MIN_REPEAT,
    alpha: float = ALPHA,
) -> Delta:
    """The delta of ``head`` against ``base`` (a run, or an index of one: a blessed baseline,
    :mod:`flakestorm.baseline.blessed`), cell by cell: the baseline indexed by cell
    (:class:`Seen`), this run's cells read one at a time."""
    before = dict(base) if isinstance(base, Mapping) else index_of(base)
    changes: list[CellChange] = []
    unchanged = 0
    for key, cell_id, cell in items_of(head):
        change = _change(key[0], cell_id, before.pop(key, None), cell, min_repeat, alpha)
        if change.change.shown:
            changes.append(change)
        else:
            unchanged += 1
    for key, old in before.items():  # the cells no longer there
        changes.append(_change(key[0], old.cell_id, old, None, min_repeat, alpha))
    return Delta(tuple(changes), unchanged)


Runs = CellResult | MutationResult | Seen


def _runs(cell: Runs | None) -> tuple[int, int]:
    return (cell.runs_passed, cell.runs_total) if cell is not None else (0, 0)


def _change(
    phase: str,
    cell_id: str,
    old: Runs | None,
    new: Runs | None,
    min_repeat: int,
    alpha: float,
) -> CellChange:
    p_value: float | None = None
    if old is None:
        change = Change.NEW
    elif new is None:
        change = Change.REMOVED
    elif new.status in _FAILING:
        judged = old.status in (Status.PASSED, _KNOWN_FAILURE)
        if judged and old.runs_total >= min_repeat and new.runs_total >= min_repeat:
            # repeated on both sides: the pass counts decide, whatever the base's label (a
            # flaky cell below min_pass was already FAILED; 4/5 -> 0/5 is still a regression)
            p_value = fisher_one_sided(
                old.runs_passed,
                old.runs_total - old.runs_passed,
                new.runs_passed,
                new.runs_total - new.runs_passed,
            )
            if p_value < alpha:
                change = Change.NEW_FAILURE
            elif old.status is Status.PASSED:
                change = Change.WITHIN_NOISE
            else:
                change = Change.STILL_FAILING
        elif old.status is _KNOWN_FAILURE:
            change = Change.STILL_FAILING
        else:
            change = Change.NEW_FAILURE
    elif new.status is Status.PASSED and old.status is _KNOWN_FAILURE:
        change = Change.FIXED
    else:
        change = Change.UNCHANGED
    shown = new if new is not None else old
    assert shown is not None
    return CellChange(
        phase=phase,
        cell_id=cell_id,
        change=change,
        base=old.status if old is not None else None,
        head=new.status if new is not None else None,
        severity=shown.severity,
        p_value=p_value,
        base_runs=_runs(old),
        head_runs=_runs(new),
    )


def same_config(base: RunResult, head: RunResult) -> bool:
    """Whether two runs ran the same config file (``./a.yaml`` is ``a.yaml``): cells of
    different configs are matched by id all the same, so the action refuses such a baseline
    and ``flakestorm compare`` warns."""

    def norm(path: str) -> str:
        path = path.replace("\\", "/")
        while path.startswith("./"):
            path = path[2:]
        return path

    return norm(base.config_path) == norm(head.config_path)


class FailOn(str, enum.Enum):
    """What fails the job: ``any`` failure (the run's own gate) or only a ``regression``."""

    ANY = "any"
    REGRESSION = "regression"

    def exit_code(self, head: RunResult, delta: Delta | None) -> int:
        """The exit code of ``head`` under this rule; ``delta`` is None without a baseline.

        ``regression``: 1 when a cell newly fails, else 0; with no baseline nothing is known
        to be new, so 0 (the caller says so in a notice). An infrastructure error (3), or any
        exit code that is not the gate's (0 or 1), stays what it is.
        """
        gate = (ExitCode.PASSED, ExitCode.GATE_FAILED)
        if self is FailOn.ANY or head.exit_code not in gate:
            return int(head.exit_code)
        if delta is not None and delta.new_failures:
            return int(ExitCode.GATE_FAILED)
        return int(ExitCode.PASSED)
