"""HTTP/1.1 framing: the threaded server, reading requests, writing replies and streams.

:class:`FramedHandler` is the part of a connection's handler that knows HTTP, not flakestorm:
request bodies (``Content-Length`` or chunked, with a size limit), holding a call while
noticing the agent hang up, whole replies in one buffered write, streams chunked (or
close-delimited for HTTP/1.0), drops as a TCP reset. The stdlib's own parse errors (a
malformed request line, huge headers) are answered in JSON like the proxy's other errors.

Hop-by-hop headers (and those named in ``Connection``) are neither forwarded upstream
(:func:`forwarded_headers`, which also asks for ``Accept-Encoding: identity`` so replies can be
read and rewritten) nor returned to the agent.

A connection's thread sets :data:`serving`: the requests the proxy sends from it to a tool's
real upstream are never routed back to the proxy (:mod:`flakestorm.chaos.routing`).
"""

from __future__ import annotations

import http
import logging
import select
import socket
import struct
import time
from contextvars import ContextVar
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from flakestorm import __version__
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.reply import ClientFailure, HttpResponse, UpstreamFailure, error_reply

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


def forwarded_headers(headers: Message) -> list[tuple[str, str]]:
    """The agent's request headers as sent upstream: without hop-by-hop headers, those the
    ``Connection`` header lists, ``Host``, ``Expect`` and ``X-Flakestorm-*``; identity encoding."""
    listed = {
        token.strip().lower()
        for value in headers.get_all("Connection", [])
        for token in value.split(",")
    }
    out = [
        (k, v)
        for k, v in headers.items()
        if (name := k.lower()) not in _NOT_FORWARDED
        and name not in listed
        and not name.startswith("x-flakestorm-")
    ]
    out.append(("Accept-Encoding", "identity"))
    return out


class ThreadedServer(ThreadingHTTPServer):
    """The listening socket; one daemon thread per connection."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(
        self, host: str, port: int, proxy: ChaosProxy, handler: type[FramedHandler]
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.proxy = proxy
        super().__init__((host, port), handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


class FramedHandler(BaseHTTPRequestHandler):
    """One agent connection, as far as HTTP goes (the routes are a subclass's)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = -1  # status line, headers and body leave in one write
    server: ThreadedServer
    _linger = False

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def version_string(self) -> str:
        return f"flakestorm-proxy/{__version__}"

    @property
    def proxy(self) -> ChaosProxy:
        return self.server.proxy

    def setup(self) -> None:
        super().setup()
        serving.set(True)  # this thread's own context: it serves this connection only
        self.proxy.track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
            if self._linger:
                drain(self.connection)
        finally:
            self.proxy.track(self.connection, add=False)

    def handle_expect_100(self) -> bool:
        super().handle_expect_100()
        self.wfile.flush()  # the buffered writer would hold the interim reply back
        return True

    # -- errors the stdlib raises while parsing (malformed request line, huge headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if self.request_version == "HTTP/0.9":  # never answer without a status line
            self.request_version = "HTTP/1.0"
        phrase = http.HTTPStatus(code).phrase if code in http.HTTPStatus._value2member_map_ else ""
        kind = {431: "headers_too_large", 414: "request_line_too_long", 501: "unsupported_method"}
        reply = error_reply(code, kind.get(code, "bad_request"), message or phrase)
        self.close_connection = True
        self._linger = True
        self.write(reply, head=False)

    def refuse(self, failure: ClientFailure) -> None:
        """Answer a request that cannot be served, then close (reading what is still sent)."""
        self.close_connection = True
        self._linger = True
        self.write(error_reply(failure.status, failure.kind, str(failure)), head=False)

    # -- reading

    def read_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked(limit)
        length_text = self.headers.get("Content-Length")
        if not length_text:
            return b""
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            raise ClientFailure(400, "bad_request", f"bad Content-Length {length_text!r}") from None
        if length > limit:
            raise ClientFailure(
                413, "request_too_large", f"request body of {length} bytes (limit {limit})"
            )
        body = self.rfile.read(length)
        if len(body) < length:
            raise ConnectionResetError("client closed the connection mid-body")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        data = bytearray()
        while True:
            line = self.rfile.readline(1026)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ClientFailure(400, "bad_request", "bad chunked request body") from None
            if size == 0:
                while self.rfile.readline(1026) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(data)
            if len(data) + size > limit:
                raise ClientFailure(
                    413, "request_too_large", f"chunked request body over {limit} bytes"
                )
            chunk = self.rfile.read(size)
            if len(chunk) < size:
                raise ConnectionResetError("client closed the connection mid-body")
            data += chunk
            self.rfile.readline(3)

    def hold(self, delay_ms: int) -> bool:
        """Hold the call ``delay_ms``; False when the agent hung up or the proxy stopped first
        (a held call must not keep a thread busy for a client that is gone)."""
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
        self.wfile.write(data)
        self.wfile.flush()

    def _head(self, reply: HttpResponse, extra: list[str]) -> bytes:
        """The reply's status line and headers (not the hop-by-hop ones), then ``extra``, as
        ``send_response_only`` and ``send_header`` would write them (nothing for HTTP/0.9)."""
        if self.request_version == "HTTP/0.9":
            return b""
        phrase = self.responses[reply.status][0] if reply.status in self.responses else ""
        lines = [f"{self.protocol_version} {reply.status} {phrase}"]
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
        self.wfile.write(self._head(reply, [framing]))
        self.wfile.flush()
        stall = reply.stall_after_chunks
        sent = 0
        try:
            for chunk in reply.chunks:
                if stall is not None and sent >= stall:
                    break
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                    self.wfile.flush()
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
        if stall is not None and sent >= stall:  # a stalled stream: hold it open, then drop it
            self.hold(reply.delay_ms)
            self.close_connection = True
            reset(self.connection)
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


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
