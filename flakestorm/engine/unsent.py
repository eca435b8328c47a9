"""What a run that could not start says of the items it never sent (SPEC §5): each is
errored by the cause ("not sent: the agent never became ready"), in the reports and in what
progress announces, so the two say the same of the same cells."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from flakestorm.engine.events import CellFinished, Event, ScenarioFinished
from flakestorm.results.model import CellResult, MutationResult, PhaseOutcome, Status

_Item = TypeVar("_Item", CellResult, MutationResult)


def errored(outcome: PhaseOutcome, cause: str | None) -> PhaseOutcome:
    """``outcome`` with each item that did not run errored by ``cause`` (none: as it is)."""
    if cause is None:
        return outcome
    reason = not_sent(cause)
    cells = tuple(unsent(c, reason) for c in outcome.cells)
    mutations = tuple(unsent(m, reason) for m in outcome.mutations)
    return dataclasses.replace(outcome, cells=cells, mutations=mutations)


def not_sent(cause: str) -> str:
    """The reason of an item the run never sent, for ``cause``."""
    return f"not sent: {cause}"


def unsent(item: _Item, reason: str) -> _Item:
    """``item`` errored by ``reason`` when it did not run."""
    if item.status is not Status.NOT_RUN:
        return item
    return dataclasses.replace(item, status=Status.ERRORED, reason=reason)


def announced_errored(on_event: Callable[[Event], None], cause: str) -> Callable[[Event], None]:
    """``on_event`` told of each cell that did not run as errored by ``cause``: progress says
    what the matrix will show of the same cells."""
    reason = not_sent(cause)

    def announce(event: Event) -> None:
        if isinstance(event, CellFinished):
            event = dataclasses.replace(event, result=unsent(event.result, reason))
        elif isinstance(event, ScenarioFinished):
            event = dataclasses.replace(
                event, results=tuple(unsent(c, reason) for c in event.results)
            )
        on_event(event)

    return announce
