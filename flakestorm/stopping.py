"""Stopping cleanly on SIGINT and SIGTERM: the one signal handling of the CLI, the action and
the proxy (in-flight work finishes, what is done is kept and reported)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def stopping_on_signals(
    stop: threading.Event,
    on_stop: Callable[[], None] | None = None,
    abort_on_repeat: bool = False,
) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM set ``stop`` (in-flight invocations finish, finished
    cells are kept and scored) and call ``on_stop``; with ``abort_on_repeat`` a second SIGINT
    raises KeyboardInterrupt at once. Signals can only be handled in the main thread: elsewhere
    this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if abort_on_repeat and stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        if on_stop is not None:
            on_stop()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
