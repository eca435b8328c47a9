"""HTTP/1.1 framing: the threaded server, an agent connection's requests, replies and streams.

:class:`FramedHandler` is the part of a connection's handler that knows HTTP, not flakestorm:
it reads each request off the connection (:mod:`~flakestorm.chaos.proxy.inbound`: the head,
then a body by ``Content-Length`` or chunked, with a size limit), holds a call while noticing
the agent hang up, writes whole replies in one write, streams chunked (or close-delimited for
HTTP/1.0), and drops as a TCP reset. A request that cannot be read (a malformed request line,
huge headers, a method the proxy does not serve) is answered in JSON like the proxy's other
errors, and the connection closed.

Hop-by-hop headers (and those named in ``Connection``) are neither forwarded upstream
(:func:`forwarded_headers`, which also asks for ``Accept-Encoding: identity`` so replies can be
read and rewritten) nor returned to the agent.

A connection's thread sets :data:`serving`: the requests the proxy sends from it to a tool's
real upstream are never routed back to the proxy (:mod:`flakestorm.chaos.routing`).
"""

from __future__ import annotations

import contextlib
import http
import logging
import os
import select
import socket
import socketserver
import struct
import threading
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar

from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.inbound import RequestHeaders, read_body, read_request
from flakestorm.chaos.proxy.reply import ClientFailure, HttpResponse, UpstreamFailure, error_reply
from flakestorm.chaos.proxy.upstreams.wire import Wire

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.server import ChaosProxy

logger = logging.getLogger("flakestorm.proxy")

serving: ContextVar[bool] = ContextVar("flakestorm_proxy_serving", default=False)
"""True in a thread that serves a proxy connection."""

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
_NOT_RETURNED = HOP_BY_HOP | {"content-length", "content-encoding"}

CHUNK_BYTES = 64 * 1024
"""How much is read from a socket or an upstream at a time."""

_PHRASES = {status.value: status.phrase for status in http.HTTPStatus}


def forwarded_headers(headers: RequestHeaders) -> dict[str, str]:
    """The agent's request headers as sent upstream: without hop-by-hop headers, those the
    ``Connection`` header lists, ``Host``, ``Expect`` and ``X-Flakestorm-*``; identity
    encoding. One value per name: a repeated header's values joined (``, ``; ``; `` for
    ``Cookie``), as HTTP allows, under the name as it first came."""
    listed = set(headers.tokens("Connection")) if "connection" in headers else ()
    out: dict[str, str] = {}
    first: dict[str, str] = {}
    for lowered, (name, value) in headers.named():
        if lowered in _NOT_FORWARDED or lowered in listed or lowered.startswith("x-flakestorm-"):
            continue
        if lowered in first:
            out[first[lowered]] += ("; " if lowered == "cookie" else ", ") + value
        else:
            first[lowered] = name
            out[name] = value
    out["Accept-Encoding"] = "identity"
    return out


def yield_on_wakeup() -> None:
    """Schedule the calling thread, and the threads it starts, as ``SCHED_BATCH`` (Linux): a
    connection's thread woken by a request or a reply waits for the running process's time
    slice instead of preempting it. On a machine whose cores the agent and its tools keep
    busy, a preempting proxy makes them spend more CPU per call than the proxy itself spends
    (their caches cold, more switches); a batch thread runs as soon as a core is free, so an
    idle machine sees no difference. Elsewhere, or where the policy cannot be set, nothing
    changes."""
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None:
        return
    with contextlib.suppress(OSError):
        setter(0, os.SCHED_BATCH, os.sched_param(0))


class ThreadedServer(socketserver.ThreadingTCPServer):
    """The listening socket; one daemon thread per connection."""

    allow_reuse_address = True
    block_on_close = False
    request_queue_size = 128

    def __init__(
        self, host: str, port: int, proxy: ChaosProxy, handler: type[FramedHandler]
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.proxy = proxy
        super().__init__((host, port), handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, named after the proxy's port."""
        port = self.server_address[1]
        threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"flakestorm-proxy-{port}-connection",
            daemon=True,
        ).start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


class FramedHandler(socketserver.BaseRequestHandler):
    """One agent connection, as far as HTTP goes (the routes are a subclass's :meth:`dispatch`)."""

    METHODS: ClassVar[frozenset[str]] = frozenset(
        {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT"}
    )
    """The methods served; any other is answered 501."""
    server: ThreadedServer
    connection: socket.socket
    wire: Wire
    """The connection and the bytes received on it that no request has consumed yet."""
    command = ""
    path = ""
    request_version = "HTTP/1.1"
    headers = RequestHeaders([])
    close_connection = True
    _linger = False

    @property
    def proxy(self) -> ChaosProxy:
        return self.server.proxy

    def setup(self) -> None:
        self.connection = self.request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.wire = Wire(self.connection)
        serving.set(True)  # this thread's own context: it serves this connection only
        self.proxy.track(self.connection, add=True)

    def handle(self) -> None:
        """Serve the connection's requests, one after the other, until one closes it."""
        while True:
            try:
                head = read_request(self.wire)
            except ClientFailure as exc:
                self.refuse(exc)
                return
            except ConnectionError:
                return
            if head is None:
                return
            self.command, self.path = head.method, head.target
            self.request_version, self.headers = head.version, head.headers
            self.close_connection = not head.keep_alive
            if head.method not in self.METHODS:
                message = f"method {head.method[:40]!r} is not served"
                self.refuse(ClientFailure(501, "unsupported_method", message))
                return
            try:
                if head.expects_continue:
                    self.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                self.dispatch()
            except OSError:  # the agent hung up while we wrote
                return
            if self.close_connection:
                return

    def dispatch(self) -> None:
        """Serve the request just read (its ``command``, ``path`` and ``headers``)."""
        raise NotImplementedError

    def finish(self) -> None:
        try:
            if self._linger:
                drain(self.connection)
        finally:
            self.proxy.track(self.connection, add=False)

    def refuse(self, failure: ClientFailure) -> None:
        """Answer a request that cannot be served, then close (reading what is still sent)."""
        self.close_connection = True
        self._linger = True
        with contextlib.suppress(OSError):  # it may have hung up
            self.write(error_reply(failure.status, failure.kind, str(failure)), head=False)

    # -- reading

    def read_body(self, limit: int) -> bytes:
        return read_body(self.wire, self.headers, limit)

    def hold(self, delay_ms: int) -> bool:
        """Hold the call ``delay_ms``; False when the agent hung up or the proxy stopped first
        (a held call must not keep a thread busy for a client that is gone)."""
        if self.wire.buffer:  # it sent more already (pipelining): wait
            return self.proxy.wait(delay_ms)
        deadline = time.monotonic() + delay_ms / 1000
        connection = self.connection
        while not self.proxy.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            readable, _, _ = select.select([connection], [], [], min(left, 0.1))
            if readable:
                try:
                    if not connection.recv(1, socket.MSG_PEEK):
                        return False  # the agent closed its side
                except OSError:
                    return False
                return self.proxy.wait(int(left * 1000))  # it sent more (pipelining): wait
        return False

    # -- writing

    def send(self, data: bytes) -> None:
        """Write ``data`` to the agent as it is."""
        self.connection.sendall(data)

    def write(self, reply: HttpResponse, head: bool) -> None:
        """Send a complete (non-streamed) reply in one write: its head made in one piece."""
        no_body = reply.status in (204, 304) or reply.status < 200
        extra = []
        length = str(len(reply.body))
        if head and reply.head_length is not None:
            length = reply.head_length
        if not no_body and length:
            extra.append(f"Content-Length: {length}")
        if self.close_connection:
            extra.append("Connection: close")
        data = self._head(reply, extra)
        if not head and not no_body:
            data += reply.body
        self.connection.sendall(data)

    def _head(self, reply: HttpResponse, extra: list[str]) -> bytes:
        """The reply's status line and headers (not the hop-by-hop ones), then ``extra``, as
        a status line with the standard reason phrase (none for a status without one)."""
        lines = [f"HTTP/1.1 {reply.status} {_PHRASES.get(reply.status, '')}"]
        lines += [f"{k}: {v}" for k, v in reply.headers if k.lower() not in _NOT_RETURNED]
        return ("\r\n".join([*lines, *extra]) + "\r\n\r\n").encode("latin-1", "strict")

    def send_reply(self, reply: HttpResponse, call: ServedCall) -> None:
        """Send ``reply`` (delays, drops, streams). The call's interaction is logged just
        before the last byte leaves, so whoever got the reply can already read it."""
        if reply.delay_ms and reply.stall_after_chunks is None and not self.hold(reply.delay_ms):
            reply.drop = True
        if reply.drop:
            call.done(None)
            self.close_connection = True
            reset(self.connection)
        elif reply.chunks is None:
            call.done(reply.status)
            self.write(reply, head=self.command == "HEAD")
        else:
            self._stream(reply, call)

    def _stream(self, reply: HttpResponse, call: ServedCall) -> None:
        assert reply.chunks is not None
        chunked = self.request_version != "HTTP/1.0"
        if not chunked:
            self.close_connection = True
        framing = "Transfer-Encoding: chunked" if chunked else "Connection: close"
        self.connection.sendall(self._head(reply, [framing]))
        stall = reply.stall_after_chunks
        pace = reply.pace
        sent = 0
        gone = False
        try:
            for chunk in reply.chunks:
                if stall is not None and sent >= stall:
                    break
                wait_ms = 0 if pace is None else pace.wait_ms(chunk)
                if wait_ms and not self.hold(wait_ms):
                    gone = True  # the agent hung up while the stream was slowed
                    break
                if chunk:
                    self.connection.sendall(
                        b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
                    )
                    sent += 1
        except UpstreamFailure as exc:  # headers are gone: all we can do is cut the stream
            call.upstream_error = exc.summary
            call.done(reply.status)
            self.close_connection = True
            reset(self.connection)
            return
        finally:
            close = getattr(reply.chunks, "close", None)
            if close is not None:
                close()
        call.done(reply.status)
        hold_ms = reply.delay_ms if stall is not None and sent >= stall else None
        if pace is not None:
            hold_ms = 0 if gone else pace.hold_ms
        if hold_ms is not None:  # a stalled stream: hold it open, then drop it
            if hold_ms:
                self.hold(hold_ms)
            self.close_connection = True
            reset(self.connection)
            return
        if chunked:
            self.connection.sendall(b"0\r\n\r\n")


def reset(connection: socket.socket) -> None:
    """Drop the connection now (RST), as a crashed or timed-out server would."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def drain(connection: socket.socket, limit: int = 16 * 1024 * 1024, timeout_s: float = 1.0) -> None:
    """Read and discard what the client is still sending, so it can read our error reply
    (closing with unread data would reset the connection under it)."""
    try:
        connection.shutdown(socket.SHUT_WR)
        connection.settimeout(timeout_s)
        while limit > 0:
            data = connection.recv(CHUNK_BYTES)
            if not data:
                return
            limit -= len(data)
    except OSError:
        pass
