"""Scenarios in flight together (SPEC §9): when every call of the agent names its invocation
(the cell header, the ``flakestorm-cell`` baggage entry, the W3C trace context, or a python
agent's own call), the cells of every chaos scenario run side by side, and each call is decided
by the :class:`~flakestorm.chaos.faults.decisions.FaultBook` of its own cell's scenario.

:class:`InFlight` holds a book per scenario and which scenario each cell (``INV[SCENARIO]``)
is under; an invocation ``CELL#RUN.PROMPT[.TURN]`` is under its cell's. Both delivery paths
(the proxy, in process or as a service, and the python wrappers) choose a call's book with it;
a call that names no invocation of a scenario in flight goes to the path's own book (the calm
scenario's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flakestorm.chaos.faults.decisions import ActiveScenario, FaultBook


class InFlight:
    """The books of the scenarios in flight, and the scenario of each of their cells."""

    def __init__(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        self.books = {s.name: FaultBook(s) for s in scenarios}
        self.cells = {cell: name for cell, name in cells.items() if name in self.books}

    def scenario_of(self, invocation: str | None) -> str | None:
        """The scenario in flight ``invocation`` (``CELL#RUN.PROMPT``, or a cell id) is
        under, if any."""
        if not invocation:
            return None
        return self.cells.get(invocation.split("#", 1)[0])

    def book_of(self, invocation: str | None) -> FaultBook | None:
        name = self.scenario_of(invocation)
        return None if name is None else self.books[name]

    def begin(self, invocation: str) -> bool:
        """``invocation`` starts now, in its scenario's book; False when it is in none."""
        book = self.book_of(invocation)
        if book is None:
            return False
        book.begin(invocation)
        return True

    def traced(self, trace: str) -> str | None:
        """The invocation that started trace ``trace`` under a scenario in flight."""
        for book in self.books.values():
            found = book.traced(trace)
            if found is not None:
                return found
        return None

    def scenarios(self) -> list[ActiveScenario]:
        return [book.scenario for book in self.books.values()]
