"""The outcome of a result's item (a cell, a mutation, a replayed session): :class:`Status`,
the one vocabulary every part of ``results/`` reads — the result model, the sweeps' breaking
points and the accepted failures — so none of them imports another to know it."""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """The outcome of a cell."""

    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"
    """flakestorm could not carry the cell out (reset or harness failure): counts as failed."""
    SKIPPED = "skipped"
    """The invariant's ``when`` does not apply to the scenario: not scored."""
    NOT_RUN = "not_run"
    """The run stopped (interrupted, or ``max_invocations`` spent) before this cell finished."""

    @property
    def scored(self) -> bool:
        return self in _SCORED

    @property
    def symbol(self) -> str:
        return _SYMBOLS[self.value]


_SCORED = frozenset([Status.PASSED, Status.FAILED, Status.ERRORED])
_SYMBOLS = {"passed": "✅", "failed": "❌", "errored": "💥", "skipped": "➖", "not_run": "⏸"}
FLAKY_SYMBOL = "⚠️"
