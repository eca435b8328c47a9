"""Kept-alive connections to upstreams: a lean pool of sockets, by origin, for
:class:`~.network.NetworkUpstream`, which speaks HTTP/1.1 on them with :mod:`.wire`.

A proxied call must cost little beside the call itself, and most of a ``requests`` call's cost
is its own machinery (settings merged, the URL parsed and the headers copied several times, a
pool manager, a response object wrapped twice); ``http.client``'s response objects were most
of what was left. Here a call takes an idle connection of its origin (``scheme``, ``host``,
``port``) or opens one, sends, reads, and gives the connection back once its reply was read
whole and the upstream keeps it open.

- An idle connection the upstream has closed (or sent something unasked on) is noticed before
  it is reused and dropped, as ``urllib3`` does; there are no retries.
- Each connection's socket is registered with the calling thread's
  :func:`~flakestorm.agents.deadline.deadline` (when opened, and when taken again), so the
  exchange's wall-clock limit still cuts it.
- Connecting (and a TLS handshake) is bounded by ``connect_timeout_s``. After that a socket
  blocks without a timeout of its own: an exchange is bounded by its deadline, which shuts its
  sockets down (a socket timeout would cost a ``poll`` before every read and write), and the
  reads of a streamed reply, which outlives its exchange, each by ``read_timeout_s``
  (:meth:`Connection.limit_reads`).
- HTTPS is verified against ``requests``' CA bundle (``certifi``), as before, with the system's
  TLS defaults.
- A URL is prepared as ``requests`` prepares it (IDNA host, path re-quoted), once per distinct
  URL (:func:`target`).
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import requests
import requests.utils

from flakestorm.agents.deadline import current
from flakestorm.chaos.proxy.upstreams.wire import Wire

MAX_IDLE = 64
"""Idle connections kept per origin (more are closed when given back)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL's request goes: its origin, and the request target sent on the wire."""

    scheme: str
    host: str
    port: int
    path: str
    """Path and query, as ``requests`` would send them."""


@lru_cache(maxsize=4096)
def target(url: str) -> Target:
    """``url`` prepared as ``requests`` prepares it; ValueError when it cannot be."""
    prepared = requests.PreparedRequest()
    try:
        prepared.prepare_url(url, None)
    except requests.RequestException as exc:
        raise ValueError(str(exc)) from None
    assert prepared.url is not None
    parts = urlsplit(prepared.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path)


def _attach(sock: socket.socket | None) -> None:
    limit = current()
    if limit is not None and sock is not None:
        limit.attach(sock)


class Connection:
    """One connection to an origin: connected when first used (:meth:`wire`)."""

    def __init__(
        self,
        where: Target,
        connect_timeout_s: float,
        read_timeout_s: float,
        tls: ssl.SSLContext | None,
    ) -> None:
        self.where = where
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.tls = tls
        self.sock: socket.socket | None = None
        self._wire: Wire | None = None
        default = 443 if where.scheme == "https" else 80
        host = f"[{where.host}]" if ":" in where.host else where.host
        self.host_header = host if where.port == default else f"{host}:{where.port}"
        """``Host`` as ``requests`` sent it: the port only when it is not the scheme's."""

    def wire(self) -> Wire:
        """The connection's wire, connecting first (within the connect timeout)."""
        if self._wire is None:
            host, port = self.where.host, self.where.port
            sock = socket.create_connection((host, port), timeout=self.connect_timeout_s)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.tls is not None:
                    sock = self.tls.wrap_socket(sock, server_hostname=host)
                sock.settimeout(None)
            except BaseException:
                sock.close()
                raise
            self.sock = sock
            _attach(sock)
            self._wire = Wire(sock)
        return self._wire

    def limit_reads(self, streaming: bool) -> None:
        """Bound each read by ``read_timeout_s`` while a streamed reply is read (its exchange's
        deadline is over), or by nothing again once it ended."""
        if self.sock is not None:
            self.sock.settimeout(self.read_timeout_s if streaming else None)

    def close(self) -> None:
        sock, self.sock, self._wire = self.sock, None, None
        if sock is not None:
            sock.close()


class Connections:
    """The pool (module docstring); :meth:`close` with the proxy."""

    def __init__(self, connect_timeout_s: float, read_timeout_s: float) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._tls: ssl.SSLContext | None = None

    def take(self, where: Target) -> Connection:
        """An idle connection to ``where``'s origin that is still open, else a new one (it
        connects when the request is sent)."""
        key = (where.scheme, where.host, where.port)
        while True:
            with self._lock:
                idle = self._idle.get(key)
                connection = idle.pop() if idle else None
            if connection is None:
                return self._new(where)
            if _open(connection):
                _attach(connection.sock)
                return connection
            connection.close()

    def give_back(self, where: Target, connection: Connection) -> None:
        """Keep ``connection`` (its reply read whole) for the next call to its origin."""
        key = (where.scheme, where.host, where.port)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and connection.sock is not None and len(idle) < MAX_IDLE:
                idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        with self._lock:
            self._closed = True
            idle = [c for kept in self._idle.values() for c in kept]
            self._idle.clear()
        for connection in idle:
            connection.close()

    def _new(self, where: Target) -> Connection:
        tls = self._context() if where.scheme == "https" else None
        return Connection(where, self.connect_timeout_s, self.read_timeout_s, tls)

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=requests.utils.DEFAULT_CA_BUNDLE_PATH)
        return self._tls


def _open(connection: Connection) -> bool:
    """Whether an idle connection is still usable: connected, and nothing to read (an idle
    connection that reads anything — its close, most often — is not)."""
    sock = connection.sock
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return not poller.poll(0)
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
