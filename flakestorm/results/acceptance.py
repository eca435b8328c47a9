"""Accepted failures (SPEC §14), judged against a run: which entries accept failures this run
had, which have expired, which accept nothing any more (pure: the date is given, from
:mod:`flakestorm.results.clock`).

An entry names a contract cell (``INVARIANT[SCENARIO]``) or a mutation type. Against a run it
is, by what its items did and its date:

- ``accepted``: some of its items failed, and ``until`` is today or later: they do not fail
  the gate (the score still counts them as failed);
- ``expired``: some failed, and ``until`` has passed: they fail the gate, the reason saying
  "acceptance expired on DATE";
- ``errored``: none failed and some errored: flakestorm could not judge them, so the entry
  is not judged either (the errored items make the run exit 3 as any errored item does);
- ``passing``: its items passed, none failed or errored: "accepted but passing: remove the
  entry";
- ``absent``: none of its items ran to a verdict (another shard, a phase that did not run, a
  skipped or unfinished cell): not reported.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flakestorm.results.status import Status

if TYPE_CHECKING:  # a run's result holds its acceptances (results.model imports this module)
    from flakestorm.config import Accepted
    from flakestorm.results.model import PhaseOutcome

EXPIRED_TEXT = "acceptance expired on {until}"
CELL_PHASE = "contract"
"""The phase whose cells ``cell:`` names."""
MUTATION_PHASE = "mutation"
"""The phase whose mutations ``mutation:`` names."""


class AcceptanceState(str, enum.Enum):
    ACCEPTED = "accepted"
    EXPIRED = "expired"
    ERRORED = "errored"
    PASSING = "passing"
    ABSENT = "absent"


@dataclass(frozen=True)
class Acceptance:
    """One ``accepted:`` entry as this run judged it."""

    target: str
    """``INVARIANT[SCENARIO]`` or ``mutation: TYPE``."""
    reason: str
    until: str
    """``YYYY-MM-DD``."""
    issue: str | None
    state: AcceptanceState
    failed: tuple[str, ...] = ()
    """The ids of the failing items it names (cells, or mutations of its type)."""

    @property
    def cell(self) -> str | None:
        return None if self.target.startswith("mutation: ") else self.target

    def line(self) -> str:
        """How reports state it, one line (without its items)."""
        issue = f", {self.issue}" if self.issue else ""
        if self.state is AcceptanceState.ACCEPTED:
            return f"{self.target}: accepted until {self.until} ({self.reason}{issue})"
        if self.state is AcceptanceState.EXPIRED:
            expired = EXPIRED_TEXT.format(until=self.until)
            return f"{self.target}: {expired} ({self.reason}{issue})"
        if self.state is AcceptanceState.ERRORED:
            return (
                f"{self.target}: errored, so not judged: an acceptance covers a failure, not an "
                f"error ({self.reason}{issue})"
            )
        return f"{self.target}: accepted but passing: remove the entry ({self.reason}{issue})"

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Acceptance:
        return cls(
            target=str(doc["target"]),
            reason=str(doc["reason"]),
            until=str(doc["until"]),
            issue=doc.get("issue"),
            state=AcceptanceState(doc["state"]),
            failed=tuple(doc.get("failed", ())),
        )


def judge(
    entries: Iterable[Accepted], outcomes: Mapping[str, PhaseOutcome], on: datetime.date
) -> tuple[Acceptance, ...]:
    """Every ``accepted:`` entry against the phases that ran, on the date ``on``."""
    # what an entry names -> (id, status) of each of its items that ran
    named: dict[str, list[tuple[str, Status]]] = {}
    for outcome in outcomes.values():
        if outcome.phase == CELL_PHASE:
            for cell in outcome.cells:
                named.setdefault(cell.id, []).append((cell.id, cell.status))
        if outcome.phase == MUTATION_PHASE:
            for mutation in outcome.mutations:
                key = f"mutation: {mutation.type}"
                named.setdefault(key, []).append((mutation.id, mutation.status))
    judged = []
    for entry in entries:
        ran = named.get(entry.target, [])
        failed = tuple(ident for ident, status in ran if status is Status.FAILED)
        statuses = {status for _, status in ran}
        if failed:
            state = AcceptanceState.EXPIRED if entry.until < on else AcceptanceState.ACCEPTED
        elif Status.ERRORED in statuses:
            state = AcceptanceState.ERRORED
        elif Status.PASSED in statuses:
            state = AcceptanceState.PASSING
        else:
            state = AcceptanceState.ABSENT
        until = entry.until.isoformat()
        judged.append(Acceptance(entry.target, entry.reason, until, entry.issue, state, failed))
    return tuple(judged)


def accepted_items(acceptances: Sequence[Acceptance]) -> frozenset[str]:
    """The failing items that do not fail the gate."""
    return frozenset(
        item for a in acceptances if a.state is AcceptanceState.ACCEPTED for item in a.failed
    )


def expired_items(acceptances: Sequence[Acceptance]) -> dict[str, str]:
    """Failing item -> the date its acceptance expired on."""
    expired = (a for a in acceptances if a.state is AcceptanceState.EXPIRED)
    return {item: a.until for a in expired for item in a.failed}


def reported(acceptances: Sequence[Acceptance] | None) -> tuple[Acceptance, ...]:
    """The acceptances a report states (not those whose items did not run)."""
    return tuple(a for a in acceptances or () if a.state is not AcceptanceState.ABSENT)


def accepts_in(acceptance: Acceptance, phase: str) -> bool:
    """Whether ``acceptance`` names items of ``phase``."""
    return phase == (CELL_PHASE if acceptance.cell is not None else MUTATION_PHASE)
