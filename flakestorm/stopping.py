"""Stopping cleanly on SIGINT and SIGTERM: the one signal handling of the CLI, the action and
the proxy.

GitHub cancels a job with SIGINT, then SIGTERM 7.5 s later, then SIGKILL; ``docker stop`` gives
10 s. So a run must be reported well inside 7.5 s whatever it is waiting for:

- the first signal sets the run's :class:`Stop`: nothing new starts (no invocation, reset or
  readiness attempt), invocations in flight get :data:`GRACE_S` to finish, then they are
  abandoned (their cells ``not_run``); every report is written and the run exits 3;
- a second signal (SIGINT or SIGTERM) ends the grace at once (:meth:`Stop.hurry`); it never
  raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

GRACE_S = 1.5
"""How long invocations in flight may finish after the first signal before they are abandoned."""


class Stop(threading.Event):
    """A run's stop request: set by the first signal (or ``max_invocations``' callers, tests);
    :meth:`abandoned` once the grace has passed or :meth:`hurry` was called."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        super().__init__()
        self.grace_s = grace_s
        self._set_at: float | None = None
        self._hurry = threading.Event()

    def set(self) -> None:
        if self._set_at is None:
            self._set_at = time.monotonic()
        super().set()

    def hurry(self) -> None:
        """Abandon whatever is in flight now (a second signal)."""
        self.set()
        self._hurry.set()

    def abandoned(self) -> bool:
        """True once work in flight should no longer be waited for."""
        if self._hurry.is_set():
            return True
        return self._set_at is not None and time.monotonic() - self._set_at >= self.grace_s


def abandoned(stop: threading.Event, noticed: list[float]) -> bool:
    """:meth:`Stop.abandoned` for any event: a plain one's grace counts from the first call that
    saw it set (kept in ``noticed``)."""
    if isinstance(stop, Stop):
        return stop.abandoned()
    if not stop.is_set():
        return False
    if not noticed:
        noticed.append(time.monotonic())
    return time.monotonic() - noticed[0] >= GRACE_S


@contextlib.contextmanager
def stopping_on_signals(
    stop: threading.Event, on_stop: Callable[[], None] | None = None
) -> Iterator[None]:
    """While inside, the first SIGINT or SIGTERM sets ``stop`` and calls ``on_stop``; a second
    one hurries it (:meth:`Stop.hurry`: nothing in flight is waited for). Signals can only be
    handled in the main thread: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            if isinstance(stop, Stop):
                stop.hurry()
            return
        stop.set()
        if on_stop is not None:
            on_stop()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
