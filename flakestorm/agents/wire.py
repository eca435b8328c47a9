"""One HTTP request written byte by byte on its own connection (request-level mutations).

A client library normalises what a request-level mutation is about: it will not send HTTP/1.0
without ``Host``, a chunked body of our choosing, ``Expect: 100-continue`` followed by a real
wait, a body in slow pieces, or a header name twice. :func:`send` writes exactly what it is
told, on a fresh connection (``Connection: close``), and reads the reply with the standard
library's parser, all against one wall-clock deadline (the watchdog of
:mod:`flakestorm.agents.deadline` shuts the socket down when it passes, however slowly the reply
trickles). Failures come back as
:class:`~flakestorm.errors.AgentError` (``CONNECTION`` for a refused or reset connection,
``TIMEOUT`` past the deadline), like every other agent failure.

Header names and values never carry a real CR or LF: an attempt to inject one is written as
the literal escaped text (``\\r\\n``), which is what a client would let through.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.agents.deadline import deadline as watched
from flakestorm.errors import AgentError, AgentErrorKind

CONTINUE_WAIT_S = 1.0
"""How long to wait for ``100 Continue`` before sending the body anyway (as curl does)."""


@dataclass(frozen=True)
class WireReply:
    status: int
    reason: str
    content_type: str
    body: bytes


@dataclass(frozen=True)
class WireRequest:
    url: str
    method: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    http_version: str = "1.1"
    chunked: bool = False
    expect_continue: bool = False
    body_pieces: int = 1
    piece_pause_ms: int = 0


def _safe(text: str) -> bytes:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text.encode("latin-1", errors="backslashreplace")


def head_bytes(request: WireRequest) -> bytes:
    """The request line and headers, as sent."""
    parts = urllib.parse.urlsplit(request.url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    lines = [f"{request.method} {target} HTTP/{request.http_version}".encode("latin-1")]
    names = {name.lower() for name, _ in request.headers}
    if request.http_version != "1.0" and "host" not in names:
        lines.append(b"Host: " + _safe(parts.netloc.rsplit("@", 1)[-1]))
    for name, value in request.headers:
        lines.append(_safe(name) + b": " + _safe(value))
    if request.chunked:
        lines.append(b"Transfer-Encoding: chunked")
    elif request.body or request.method not in ("GET", "HEAD", "DELETE"):
        lines.append(b"Content-Length: " + str(len(request.body)).encode())
    if request.expect_continue:
        lines.append(b"Expect: 100-continue")
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _pieces(body: bytes, count: int) -> list[bytes]:
    if count <= 1 or len(body) <= 1:
        return [body]
    size = max(1, -(-len(body) // count))
    return [body[i : i + size] for i in range(0, len(body), size)]


def send(request: WireRequest, deadline: float, max_bytes: int) -> WireReply:
    """Send ``request`` and read the reply before ``deadline`` (``time.perf_counter``).

    The socket is under the wall-clock watchdog of :mod:`flakestorm.agents.deadline`: a reply
    trickled byte by byte, each read short, is still cut at ``deadline`` (``TIMEOUT``)."""
    parts = urllib.parse.urlsplit(request.url)
    host = parts.hostname or "localhost"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    where = f"{request.method} {request.url}"
    with watched(max(deadline - time.perf_counter(), 0.001)) as limit:
        try:
            sock = socket.create_connection((host, port), timeout=_left(deadline))
        except TimeoutError as exc:
            raise _timeout(where) from exc
        except OSError as exc:
            raise AgentError(AgentErrorKind.CONNECTION, f"{where} failed: {_reason(exc)}") from exc
        limit.attach(sock)
        try:
            if parts.scheme == "https":
                try:
                    sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
                except OSError as exc:
                    raise AgentError(
                        AgentErrorKind.CONNECTION, f"{where} failed: {_reason(exc)}"
                    ) from exc
                limit.attach(sock)
            reply = _exchange(sock, request, deadline, max_bytes, where)
        except AgentError as exc:
            if limit.expired and exc.kind is not AgentErrorKind.TOO_LARGE:
                raise _timeout(where) from exc
            raise
        finally:
            sock.close()
        if limit.expired:  # a close-delimited body cut at the deadline looks whole
            raise _timeout(where)
        return reply


def _exchange(
    sock: socket.socket, request: WireRequest, deadline: float, max_bytes: int, where: str
) -> WireReply:
    written = True
    try:
        sock.settimeout(_left(deadline))
        sock.sendall(head_bytes(request))
        if request.expect_continue:
            select.select([sock], [], [], min(CONTINUE_WAIT_S, _left(deadline)))
        _write_body(sock, request, deadline)
    except TimeoutError as exc:
        raise _timeout(where) from exc
    except OSError:
        written = False  # the server may have answered early (417, 413) and closed: read it
    try:
        sock.settimeout(_left(deadline))
        response = http.client.HTTPResponse(sock, method=request.method)
        try:
            response.begin()
            body = response.read(max_bytes + 1)
        finally:
            response.close()
    except TimeoutError as exc:
        raise _timeout(where) from exc
    except (OSError, http.client.HTTPException) as exc:
        cut = "" if written else " (the body could not be fully sent)"
        raise AgentError(AgentErrorKind.CONNECTION, f"{where} failed: {_reason(exc)}{cut}") from exc
    if len(body) > max_bytes:
        raise AgentError(
            AgentErrorKind.TOO_LARGE,
            f"the reply is larger than agent.max_response_bytes ({max_bytes} bytes)",
            response.status,
        )
    return WireReply(
        response.status, response.reason, response.getheader("Content-Type", "") or "", body
    )


def _write_body(sock: socket.socket, request: WireRequest, deadline: float) -> None:
    pieces = _pieces(request.body, request.body_pieces)
    for i, piece in enumerate(pieces):
        if i and request.piece_pause_ms:
            pause = request.piece_pause_ms / 1000
            if pause >= _left(deadline):
                raise TimeoutError
            time.sleep(pause)
        sock.settimeout(_left(deadline))
        if request.chunked:
            if piece:
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        elif piece:
            sock.sendall(piece)
    if request.chunked:
        sock.sendall(b"0\r\n\r\n")


def _left(deadline: float) -> float:
    left = deadline - time.perf_counter()
    if left <= 0:
        raise TimeoutError
    return left


def _timeout(where: str) -> AgentError:
    return AgentError(AgentErrorKind.TIMEOUT, f"no complete reply from {where} (agent.timeout)")


def _reason(exc: BaseException) -> str:
    known: Sequence[tuple[type[BaseException], str]] = (
        (ConnectionRefusedError, "connection refused"),
        (ConnectionResetError, "connection reset by the server"),
        (ConnectionAbortedError, "connection aborted"),
        (BrokenPipeError, "the server closed the connection"),
        (http.client.RemoteDisconnected, "the server closed the connection without a reply"),
        (http.client.IncompleteRead, "the server closed the connection mid-reply"),
        (http.client.BadStatusLine, "the server's reply is not HTTP"),
    )
    for kind, text in known:
        if isinstance(exc, kind):
            return text
    return str(exc) or type(exc).__name__
