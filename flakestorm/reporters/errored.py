"""Mutations errored for one reason, grouped: the agent did not come back after a mutation, and
every one left errors alike. The run's verdict gives each reason once
(:func:`flakestorm.reporters.view.error_causes`), and the lists of failed and errored mutations
name the group in one line instead of repeating its reason per mutation."""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.results.model import PhaseOutcome, Status
from flakestorm.results.tally import tally_of

ERRORED_NAMED = 5
"""How many mutations of a group errored together a report names."""


@dataclass(frozen=True)
class ErroredGroup:
    """Mutations errored for one reason (:func:`errored_together`)."""

    reason: str
    positions: tuple[int, ...]
    """Where they are in the phase's mutations."""
    named: tuple[str, ...]
    """The ids of the first :data:`ERRORED_NAMED` of them."""


def errored_together(outcome: PhaseOutcome) -> list[ErroredGroup]:
    """Errored mutations that share their reason with others (the agent did not come back
    after a mutation: every one left errors alike), one group per reason. The run's verdict
    gives each reason once (:func:`error_causes`); the lists of failed and errored mutations
    leave them out (:func:`failed_mutations`) and name them (:func:`errored_note`)."""
    return [group for group in errored_groups(outcome) if len(group.positions) > 1]


def errored_groups(outcome: PhaseOutcome) -> list[ErroredGroup]:
    """The errored mutations of ``outcome`` by reason, one group per reason (alone or shared).
    Only positions and a few ids are kept, so a spooled phase is read, not held."""
    if not tally_of(outcome.mutations).statuses[Status.ERRORED.value]:
        return []  # nothing to read
    positions: dict[str, list[int]] = {}
    named: dict[str, list[str]] = {}
    for i, m in enumerate(outcome.mutations):
        if m.status is Status.ERRORED:
            positions.setdefault(m.reason, []).append(i)
            ids = named.setdefault(m.reason, [])
            if len(ids) < ERRORED_NAMED:
                ids.append(m.id)
    return [
        ErroredGroup(reason, tuple(at), tuple(named[reason])) for reason, at in positions.items()
    ]


def errored_note(group: ErroredGroup) -> str:
    """``N mutations errored for one reason, given once in the run's verdict (a, b, …)``: a
    group of :func:`errored_together` in one line (ids escaped by the caller's renderer)."""
    n = len(group.positions)
    more = f", and {n - len(group.named)} more" if n > len(group.named) else ""
    return (
        f"{n} mutations errored for one reason, given once in the run's verdict "
        f"({', '.join(group.named)}{more})"
    )
