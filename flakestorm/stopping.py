"""Stopping cleanly on SIGINT and SIGTERM: the one signal handling of the CLI, the action and
the proxy.

GitHub cancels a job with SIGINT, then SIGTERM 7.5 s later, then SIGKILL; ``docker stop`` gives
10 s. So a run must be reported well inside 7.5 s whatever it is waiting for:

- the first signal sets the run's :class:`Stop`: nothing new starts (no invocation, reset or
  readiness attempt), invocations in flight get :data:`GRACE_S` to finish, then they are
  abandoned (their cells ``not_run``); every report is written and the run exits 3;
- a second signal (SIGINT or SIGTERM) ends the grace at once (:meth:`Stop.hurry`); it never
  raises ``KeyboardInterrupt``.

A cancel can come at any moment, start-up included (SPEC §5, "Interrupts at any moment"): the
``flakestorm`` command and the action install :class:`StartUp`'s handler as the first thing
they do, before anything heavy is imported. Until a run takes the signals over
(:func:`stopping_on_signals`, entered before the config is read), the first signal is kept: the
run then starts stopped — nothing is sent, every report is written with its cells ``not_run`` —
and exits 3. A command that cannot stop cleanly (:meth:`StartUp.abrupt`: every command but the
runs) ends at the signal with :class:`Interrupted`, exit 3, as does a second signal before a run
has taken over. Nothing is ever killed by the default handler, nor reads as ``Aborted!`` or a
failed gate.
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


class Interrupted(BaseException):
    """A signal ended a process that could not stop cleanly: it exits 3 (never a failed gate).
    A BaseException, so that no ``except Exception`` takes it for an error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        """The signal's name (``SIGINT``)."""
        return signal.Signals(self.signum).name


class StartUp:
    """A process's signal handling from its first instruction (see the module docstring)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        """The first SIGINT or SIGTERM no run had taken over, once one came."""
        self.taken = False
        """Whether a run took the signals over (:func:`stopping_on_signals`) before any came:
        its exit code is then its own (a signal after it finished does not change it)."""
        self._abrupt = False

    def handler(self, signum: int, frame: object) -> None:
        again = self.signum is not None
        self.signum = self.signum or signum
        if again or self._abrupt:
            raise Interrupted(signum)

    def abrupt(self) -> None:
        """The command turned out to be one that cannot stop cleanly: a signal now ends it
        (:class:`Interrupted`), as one already received does at once."""
        self._abrupt = True
        if self.signum is not None:
            raise Interrupted(self.signum)

    def exit_code(self, code: int) -> int:
        """The process's exit code: 3 once a signal came that no run took over (an
        interrupted command never reads as passed nor as a failed gate), else ``code``."""
        return 3 if self.signum is not None and not self.taken else code

    def interrupted(self) -> str:
        """The line that says why the exit code is 3 (see :meth:`exit_code`)."""
        name = signal.Signals(self.signum).name if self.signum is not None else "a signal"
        return f"interrupted ({name}): the command's result does not count"


_start_up: StartUp | None = None


def handle_signals_from_start() -> StartUp:
    """Install :class:`StartUp`'s handler for SIGINT and SIGTERM (the process's first
    instruction: the ``flakestorm`` command, the action); it stays the process's handler
    whenever no run has taken the signals over."""
    global _start_up
    _start_up = StartUp()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _start_up.handler)
    return _start_up


def start_up() -> StartUp | None:
    """The process's :class:`StartUp`, when it installed one (not in a library's caller)."""
    return _start_up


@contextlib.contextmanager
def stopping_on_signals(
    stop: threading.Event, on_stop: Callable[[], None] | None = None
) -> Iterator[None]:
    """While inside, the first SIGINT or SIGTERM sets ``stop`` and calls ``on_stop``; a second
    one hurries it (:meth:`Stop.hurry`: nothing in flight is waited for). A signal that came
    during start-up, before this took over (:class:`StartUp`), counts as the first: ``stop``
    is set at once. Signals can only be handled in the main thread: elsewhere this does
    nothing."""
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
    early = start_up()
    if early is not None and early.signum is not None:
        if not stop.is_set():
            handler(early.signum, None)
    elif early is not None:
        early.taken = True
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
