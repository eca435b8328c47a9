"""The executor's worker threads: apply work to items on up to N threads pulling from one
shared iterator, so a run keeps N invocations in flight the whole time; a bug in the work stops
everyone and is re-raised in the caller; a stop abandons the work in flight after the grace of
:mod:`flakestorm.stopping` (the workers are left to finish on their own)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from flakestorm.stopping import abandoned

_T = TypeVar("_T")

POLL_S = 0.05
"""How often the caller's thread looks whether work in flight is to be abandoned."""

_DONE = object()


def each(
    items: list[_T],
    work: Callable[[_T], None],
    workers: int,
    stop: threading.Event,
    noticed: list[float],
) -> bool:
    """Apply ``work`` to every item on ``workers`` threads (each in a copy of the caller's
    context: the run's redactor); re-raise a bug. False when the run stopped and the work still
    in flight was abandoned after the grace (``noticed``: when the stop was first seen)."""
    if not items:
        return True
    source: Iterator[_T] = iter(items)
    lock = threading.Lock()
    failures: list[BaseException] = []
    done = threading.Event()
    running = [workers]

    def worker() -> None:
        try:
            while not failures:
                with lock:
                    item = next(source, _DONE)
                if item is _DONE:
                    return
                try:
                    work(item)  # type: ignore[arg-type]  # _DONE was ruled out above
                except BaseException as exc:  # a bug: stop everyone and re-raise in the caller
                    failures.append(exc)
                    return
        finally:
            with lock:
                running[0] -= 1
                if running[0] == 0:
                    done.set()

    for _ in range(workers):
        context = contextvars.copy_context()
        threading.Thread(
            target=context.run, args=(worker,), name="flakestorm-invocation", daemon=True
        ).start()
    while not done.wait(POLL_S):
        if abandoned(stop, noticed):
            return False
    if failures:
        raise failures[0]
    return True
