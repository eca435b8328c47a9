"""What stops new invocations besides a signal: the invocation budget
(``advanced.max_invocations``), and a config that reads the agent's reply wrong.

A run whose first answered reply lacks ``agent.response_path`` stops there (SPEC §13): the agent
answered, the config reads its reply wrong, and every later reply would say the same. The run
then exits 3 with one located error, not a column of failed cells blamed on the agent. Once a
reply was read well, a reply without the path is the agent's own (under chaos, say): its cell
is errored with the reason, and the run goes on.
"""

from __future__ import annotations

import threading

from flakestorm.agents import Reply
from flakestorm.errors import AgentErrorKind


class Budget:
    """A thread-safe invocation budget (``None`` = unlimited) that also counts what was spent."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self.spent = 0
        self.exhausted = False

    def take(self) -> bool:
        with self._lock:
            if self._limit is not None and self.spent >= self._limit:
                self.exhausted = True
                return False
            self.spent += 1
            return True


class FirstReply:
    """Watches replies until one is read well; :attr:`misread` is the first reply's
    ``agent.response_path`` error when that came first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_well = False
        self.misread: str | None = None

    def see(self, reply: Reply) -> bool:
        """Whether the run must stop: ``reply`` is the run's first answered reply and lacks
        ``agent.response_path``."""
        if self._read_well:
            return False
        with self._lock:
            if reply.error is None:
                self._read_well = True
            elif reply.error is AgentErrorKind.RESPONSE_PATH and self.misread is None:
                self.misread = reply.error_message
            return self.misread is not None
