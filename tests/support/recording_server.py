"""A loopback HTTP server that records each request exactly as it arrived on the wire.

The request-level mutations change the HTTP request itself, so their tests need to see what a
server really received: the request line and HTTP version, every header line in order (a
repeated name included), the body size, whether it came chunked or after ``100 Continue``,
and *when* its bytes arrived (a trickled body arrives in many reads spread over time). The
standard library's server normalises all of that away, so this one parses the bytes itself.

``answer(received) -> (status, body)`` decides the reply; returning ``None`` resets the
connection (a server whose request handler crashed). Real sockets on 127.0.0.1, port 0, a
thread per connection; ``close()`` stops it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Received:
    """One request as it arrived."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    chunked: bool = False
    chunks: int = 0
    continued: bool = False
    """The server sent ``100 Continue`` before reading the body."""
    reads: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the request line, bytes) of each read of the body."""

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def content_type(self) -> str | None:
        values = self.header("content-type")
        return values[0] if values else None

    @property
    def body_span_s(self) -> float:
        """From the first to the last body read."""
        return self.reads[-1][0] - self.reads[0][0] if len(self.reads) > 1 else 0.0

    def json(self) -> object:
        return json.loads(self.body)


Answer = Callable[[Received], "tuple[int, bytes] | None"]


def echo(received: Received) -> tuple[int, bytes]:
    return 200, json.dumps({"output": f"got {len(received.body)} bytes"}).encode()


class RecordingServer:
    def __init__(self, answer: Answer = echo) -> None:
        self.answer = answer
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/invoke"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        current = threading.current_thread()
        for thread in [self._accept, *self._threads]:
            if thread is not current:
                thread.join(5)

    def __enter__(self) -> RecordingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                received = self._read(conn)
            except (OSError, ValueError):
                return
            with self._lock:
                self.received.append(received)
            reply = self.answer(received)
            if reply is None:  # a crash: reset the connection
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            status, body = reply
            head = (
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            with contextlib.suppress(OSError):
                conn.sendall(head.encode() + body)

    def _read(self, conn: socket.socket) -> Received:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            got = conn.recv(65536)
            if not got:
                raise ValueError("closed before the headers ended")
            buffer += got
        started = time.perf_counter()
        head, _, rest = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = [tuple(line.split(": ", 1)) for line in lines[1:]]
        received = Received(method, target, version, headers)  # type: ignore[arg-type]
        if rest:
            received.reads.append((0.0, len(rest)))
        if any(v.lower() == "100-continue" for v in received.header("expect")):
            received.continued = True
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        pending = rest

        def more() -> bytes:
            got = conn.recv(65536)
            if not got:
                raise ValueError("closed mid-body")
            received.reads.append((time.perf_counter() - started, len(got)))
            return got

        if any(v.lower() == "chunked" for v in received.header("transfer-encoding")):
            received.chunked = True
            body = b""
            while True:
                while b"\r\n" not in pending:
                    pending += more()
                size_line, _, pending = pending.partition(b"\r\n")
                size = int(size_line, 16)
                while len(pending) < size + 2:
                    pending += more()
                if size == 0:
                    break
                body += pending[:size]
                received.chunks += 1
                pending = pending[size + 2 :]
            received.body = body
            return received
        length = int((received.header("content-length") or ["0"])[0])
        while len(pending) < length:
            pending += more()
        received.body = pending[:length]
        return received
