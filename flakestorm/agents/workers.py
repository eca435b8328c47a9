"""Where python agent code runs: daemon worker threads and one event loop thread.

Both exist so that a call can be abandoned at its timeout. A hung call keeps its thread, but the
threads are daemons, so they never hold up interpreter exit (``concurrent.futures`` joins its
workers at exit, which is why it is not used here). The pool grows when every worker is busy,
so hung calls do not starve the others.

Coroutines all run on one loop (:class:`LoopThread`), like an async agent in production: clients
an async agent creates once and caches (bound to the loop they were made on) keep working from
invocation to invocation, which a fresh ``asyncio.run`` per call would break.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_ids = itertools.count(1)


class DaemonPool:
    """Runs callables on daemon threads, each in a copy of the submitter's context."""

    def __init__(self, name: str = "flakestorm-agent", max_workers: int = 512) -> None:
        self._name = name
        self._max_workers = max_workers
        self._jobs: queue.SimpleQueue[tuple[Future[Any], contextvars.Context, Callable[[], Any]]]
        self._jobs = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._workers = 0

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._jobs.put((future, contextvars.copy_context(), fn))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._workers < self._max_workers:
                    self._workers += 1
                    threading.Thread(
                        target=self._work, name=f"{self._name}-{next(_ids)}", daemon=True
                    ).start()
        return future

    def _work(self) -> None:
        while True:
            future, context, fn = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = context.run(fn)
                except BaseException as exc:  # handed to the caller, who reports it
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, context, fn
            self._idle.release()


class LoopThread:
    """One asyncio event loop on a daemon thread, started on first use."""

    def __init__(self, name: str = "flakestorm-agent-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop; cancelling the returned future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure())

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=_serve, args=(loop,), name=self._name, daemon=True).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` until :meth:`LoopThread.close` stops it, then release its resources."""
    try:
        loop.run_forever()
    finally:
        loop.close()
