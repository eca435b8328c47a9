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
from typing import Protocol

from flakestorm.errors import AgentNotReady


class Reviver(Protocol):
    def revive(self) -> None:
        """Return once the agent answers again (an agent process flakestorm started is
        started again when it exited); :class:`AgentNotReady` when it does not within
        ``agent.ready_timeout``."""


class Gate:
    """Holds new sends back while the agent is brought back after a request it went down
    under; remembers when it did not come back."""

    def __init__(self, reviver: Reviver | None, stop: threading.Event) -> None:
        self._reviver = reviver
        self._stop = stop
        self._lock = threading.Lock()
        self._after: str | None = None  # what the agent last went down under
        self.lost: str | None = None
        """Why the agent did not come back (its last readiness error), once it did not."""
        self.lost_after = ""
        self.revived: list[str] = []
        """What the agent went down under, each time it was brought back before a send."""

    def down(self, what: str) -> None:
        """The agent went down under ``what`` (``mutation ID``, ``cell ID``): bring it back
        before the next send."""
        if self._reviver is not None:
            self._after = what

    def open(self, record: bool = True) -> bool:
        """Before a send: bring the agent back when it went down since it was last brought
        back (one caller revives, the others wait). Whether it was brought back just now."""
        if self._after is None:  # the agent did not go down: no lock, no request
            return False
        with self._lock:
            after, self._after = self._after, None
            if after is None or self.lost is not None or self._stop.is_set():
                return False
            if not self._revive(after):
                return False
            if record:
                self.revived.append(after)
            return True

    def again(self, what: str) -> bool:
        """A send right after the agent was brought back met it down still (a dying agent can
        pass a readiness check for an instant): bring it back again, for what it went down
        under before (``what`` when nothing went down before). Whether it is back."""
        self._after = self.revived[-1] if self.revived else what
        return self.open(record=False)

    def _revive(self, after: str) -> bool:
        """Bring the agent back (``after``: what it went down under); False when it did not
        come back (:attr:`lost`) or there is no reviver."""
        if self._reviver is None or self.lost is not None:
            return False
        try:
            self._reviver.revive()
        except AgentNotReady as exc:
            self.lost, self.lost_after = str(exc), after
            return False
        return True

    @property
    def stranded(self) -> str:
        """The error of what was not sent because the agent did not come back."""
        return f"the agent did not come back after {self.lost_after}: {self.lost}"
