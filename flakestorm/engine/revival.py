"""Bringing the agent back mid-run, once a request may have brought it down.

A request-level mutation, or a fault, can kill the agent; every request sent after it would
then fail through no fault of its own. The executor keeps one :class:`Gate` for the run:
whatever saw the agent go down marks it (:meth:`Gate.down`), and the next request to be sent —
whatever the phase — first has the :class:`Reviver` bring the agent back (an agent process
flakestorm started is started again, any other agent is waited for up to
``agent.ready_timeout``) while the others wait. When the agent does not come back, the gate
remembers why (:attr:`Gate.lost`), and what was left to send is errored with one reason
(:attr:`Gate.stranded`). Where the agent never goes down, the gate takes no lock and sends
nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from flakestorm.errors import AgentNotReady

_T = TypeVar("_T")


class Reviver(Protocol):
    def revive(self) -> bool:
        """Return once the agent answers again (an agent process flakestorm started is
        started again when it exited): whether it was down (False: it answered at once);
        :class:`AgentNotReady` when it does not answer within ``agent.ready_timeout``."""


class Gate:
    """Holds new sends back while the agent is brought back after a request it went down
    under; remembers when it did not come back."""

    def __init__(self, reviver: Reviver | None, stop: threading.Event) -> None:
        self._reviver = reviver
        self._stop = stop
        self._lock = threading.Lock()
        self._after: str | None = None  # what the agent last went down under
        self._cause = ""  # what the agent went down under, as of the last revival
        self.lost: str | None = None
        """Why the agent did not come back (its last readiness error), once it did not."""
        self.lost_after = ""
        self.revived: list[str] = []
        """What the agent went down under, each time it was down and brought back before a
        send."""

    def down(self, what: str) -> None:
        """The agent went down under ``what`` (``mutation ID``, ``cell ID``): bring it back
        before the next send."""
        if self._reviver is not None:
            self._after = what

    def open(self) -> bool:
        """Before a send: bring the agent back when it went down since it was last brought
        back (one caller revives, the others wait). Whether it was brought back just now (it
        answers now; it may have answered at once: a 5xx, say, leaves the agent up)."""
        return self._open(None)

    def again(self, what: str) -> bool:
        """A send right after the agent was brought back (``what``) met it down: it may have
        met it still going down (a dying agent can pass a readiness check for an instant), so
        it is brought back again; a restart is put down to what it went down under before.
        Whether it answers again; when it does not, it did not come back after ``what``."""
        self._after = what
        return self._open(self._cause)

    def _open(self, cause: str | None) -> bool:
        if self._after is None:  # the agent did not go down: no lock, no request
            return False
        with self._lock:
            after, self._after = self._after, None
            reviver = self._reviver
            if after is None or reviver is None or self.lost is not None or self._stop.is_set():
                return False
            self._cause = cause or after
            try:
                was_down = reviver.revive()
            except AgentNotReady as exc:
                self.lost, self.lost_after = str(exc), after
                return False
            if was_down:
                self.revived.append(self._cause)
            return True

    @property
    def stranded(self) -> str:
        """The error of what was not sent because the agent did not come back."""
        return f"the agent did not come back after {self.lost_after}: {self.lost}"


def revived_notice(revived: Sequence[str], kind: str) -> list[str]:
    """A phase's notice (its report's warnings) that the agent stopped answering under units
    of ``kind`` (``cell``, ``mutation``) and was brought back before the next send;
    ``revived``: what it went down under, each time (:attr:`Gate.revived`)."""
    units = list(dict.fromkeys(w.removeprefix(f"{kind} ") for w in revived if w.startswith(kind)))
    if not units:
        return []
    more = f" and {len(units) - 1} more" if len(units) > 1 else ""
    return [
        f"The agent stopped answering under {kind} {units[0]}{more}: flakestorm brought it "
        f"back before the next {kind} (an agent it started with agent.start is started again, "
        f"its output appended to agent.log), so no {kind} after it was sent to a dead agent."
    ]


class Flight:
    """Which tasks (cells' invocations, probes' runs) had another task in flight at some
    moment while they ran: when the agent goes down under one of those, any of them may have
    brought it down, so each is judged again on a run of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[object] = set()
        self._shared: set[object] = set()

    def enter(self, task: object) -> None:
        with self._lock:
            if self._running:
                self._shared |= self._running
                self._shared.add(task)
            self._running.add(task)

    def leave(self, task: object) -> bool:
        """Whether ``task`` shared the agent with another task."""
        with self._lock:
            self._running.discard(task)
            shared = task in self._shared
            self._shared.discard(task)
            return shared


class Crowd(Generic[_T]):
    """Tasks in flight together (:attr:`flight`), and those the agent went down under while
    others were in flight: held (:attr:`held`) to be judged again, each on a run of its own."""

    def __init__(self) -> None:
        self.flight = Flight()
        self._lock = threading.Lock()
        self.held: list[_T] = []
        self.after_down = True
        """The agent went down under the last task judged on its own (or, before the first,
        under those held)."""

    def hold(self, item: _T) -> None:
        with self._lock:
            self.held.append(item)
