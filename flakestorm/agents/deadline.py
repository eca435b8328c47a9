"""A wall-clock deadline for one HTTP exchange: connect, headers and the whole body.

``requests`` timeouts bound each socket operation, not the exchange: a server that trickles its
headers or body (one byte every 100 ms) keeps every read short and holds the call for as long
as it likes. Here a call runs inside :func:`deadline`; the sockets of the connections a
:class:`DeadlineAdapter` opens or reuses for it are registered with it, and one watchdog thread
shuts them down when the deadline passes (and again every :data:`POLL_S` while the call lasts, so a
connection opened after the deadline is cut too). The blocked read then fails at once, and the
caller asks :attr:`Deadline.expired` to tell a timeout from a broken connection.

::

    session = new_session()            # mounts DeadlineAdapter (agents/http.py)
    with deadline(timeout_s) as limit:
        response = session.get(url, timeout=(timeout_s, timeout_s), stream=True)
        body = response.content
    if limit.expired: ...              # the exchange was cut at the deadline

:meth:`Deadline.cut` ends an exchange early from any thread (a run that is stopping).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

POLL_S = 0.05
"""How often the watchdog cuts again the sockets of an exchange past its deadline."""
REVISIT_S = 1.0
"""The longest the watchdog sleeps while exchanges are watched."""

_local = threading.local()


class Deadline:
    """One exchange's deadline and the connections it uses."""

    def __init__(self, timeout_s: float) -> None:
        self.at = time.monotonic() + timeout_s
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = False

    def remaining(self) -> float:
        """Seconds left (never below a millisecond, so it can be a socket timeout)."""
        return max(self.at - time.monotonic(), 0.001)

    def attach(self, sock: socket.socket) -> None:
        """Cut ``sock`` with the exchange (at once if the deadline has passed)."""
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def cut(self) -> None:
        """Expire now: every socket of the exchange is shut down; its reads fail at once."""
        with self._lock:
            if self._done:
                return
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def _finish(self) -> None:
        with self._lock:
            self._done = True
            self._sockets.clear()

    @property
    def finished(self) -> bool:
        return self._done


def _shut(sock: socket.socket) -> None:
    # the plain socket's shutdown, also for TLS: SSLSocket.shutdown would drop its SSL object
    # under the reading thread's feet
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


_POLICY = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None
"""The scheduling policy of the thread that loaded this module (Linux)."""


def _as_loaded() -> None:
    """Run the calling thread under :data:`_POLICY`: the watchdog serves every thread of the
    process, whichever started it (a chaos proxy's connection thread is ``SCHED_BATCH``)."""
    if _POLICY is not None and os.sched_getscheduler(0) != _POLICY:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, _POLICY, os.sched_param(0))


class _Watchdog:
    """One daemon thread for every deadline of the process.

    It sleeps until the earliest deadline, and at most :data:`REVISIT_S` while any is watched
    (it forgets the exchanges that ended then), so a new deadline wakes it (a thread switch)
    only when it comes sooner than that: with every exchange's limit far off, never."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._overdue: list[Deadline] = []
        self._thread: threading.Thread | None = None
        self._count = 0
        self._wake_at = 0.0
        """When the thread looks at the heap next (0: it has not started)."""

    def watch(self, limit: Deadline) -> None:
        with self._cond:
            self._count += 1
            heapq.heappush(self._heap, (limit.at, self._count, limit))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="flakestorm-deadlines", daemon=True
                )
                self._thread.start()
            elif limit.at < self._wake_at:
                self._cond.notify()

    def _loop(self) -> None:
        _as_loaded()
        while True:
            with self._cond:
                self._overdue = [d for d in self._overdue if not d.finished]
                now = time.monotonic()
                while self._heap and (self._heap[0][0] <= now or self._heap[0][2].finished):
                    _, _, limit = heapq.heappop(self._heap)
                    if not limit.finished:
                        self._overdue.append(limit)
                due = list(self._overdue)
                wait = min(self._heap[0][0] - now, REVISIT_S) if self._heap else None
                if due:
                    wait = POLL_S if wait is None else min(wait, POLL_S)
                self._wake_at = now + wait if wait is not None else float("inf")
                if not due:
                    self._cond.wait(wait)
            for limit in due:
                limit.cut()
            if due:
                time.sleep(POLL_S)  # cut again while the exchange lasts (a late connection)


_WATCHDOG = _Watchdog()


def deadline(timeout_s: float) -> contextlib.AbstractContextManager[Deadline]:
    """Run an exchange with a wall-clock limit of ``timeout_s`` (see the module docstring)."""
    return _Scope(Deadline(timeout_s))


class _Scope:
    """The exchange's deadline made this thread's for its time (a class, not a generator:
    every proxied call enters one)."""

    __slots__ = ("limit", "outer")

    def __init__(self, limit: Deadline) -> None:
        self.limit = limit
        self.outer: Deadline | None = None

    def __enter__(self) -> Deadline:
        self.outer = getattr(_local, "deadline", None)
        _local.deadline = self.limit
        _WATCHDOG.watch(self.limit)
        return self.limit

    def __exit__(self, *exc: object) -> None:
        self.limit._finish()
        _local.deadline = self.outer


def current() -> Deadline | None:
    """The deadline of the exchange running on this thread, if any."""
    found: Deadline | None = getattr(_local, "deadline", None)
    return found


def _attach(sock: object) -> None:
    limit = current()
    if limit is not None and isinstance(sock, socket.socket):
        limit.attach(sock)


class _Connection(HTTPConnection):
    """Registers its socket with the thread's deadline as soon as it is connected (the
    connection itself may drop its reference before the body is read: ``Connection: close``)."""

    def connect(self) -> None:
        super().connect()
        _attach(self.sock)


class _HTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _attach(self.sock)


class _Attaching:
    """A pool mixin: a kept-alive connection handed out is registered with the deadline."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        connection = super()._get_conn(timeout)  # type: ignore[misc]
        _attach(getattr(connection, "sock", None))
        return connection


class _Pool(_Attaching, HTTPConnectionPool):
    ConnectionCls = _Connection


class _HTTPSPool(_Attaching, HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """An adapter whose connections obey the calling thread's :func:`deadline`."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _HTTPSPool}


# --------------------------------------------------------------------------- a body's chunks

CHUNK_BYTES = 65_536


class Expired(Exception):
    """The deadline passed while a body was read."""


def body_chunks(
    response: requests.Response, deadline: float, live: bool = False
) -> Iterator[bytes]:
    """``response``'s decoded body chunks; each socket read may wait only until ``deadline``
    (``time.perf_counter``), else :class:`Expired`. ``live``: each chunk as soon as it
    arrives, also in a body that is not chunked (a stream's events)."""
    raw: urllib3.BaseHTTPResponse = response.raw
    chunks = (
        _arriving(raw)
        if live and not getattr(raw, "chunked", False)
        else raw.stream(CHUNK_BYTES, decode_content=True)
    )
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise Expired
        connection = getattr(raw, "connection", None)
        sock = getattr(connection, "sock", None)
        if isinstance(sock, socket.socket):
            sock.settimeout(remaining)
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
            raise Expired from exc
        except urllib3.exceptions.ProtocolError as exc:
            if isinstance(exc.__context__, TimeoutError) or "timed out" in str(exc):
                raise Expired from exc
            raise
        yield chunk


def _arriving(raw: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    while chunk := raw.read1(CHUNK_BYTES, decode_content=True):
        yield chunk
