"""One HTTP/1.1 exchange on a kept-alive connection, as lean as a proxied call needs: the
request written in one ``sendall``, the reply's head read from the connection's own buffer, its
body framed by ``Content-Length``, ``chunked`` or the connection's close (RFC 9112 §6.3), read
whole or as it arrives.

The standard library's ``http.client`` makes a buffered file, a response object and an
``email`` message of every reply; on a proxied call that was a third of the proxy's CPU. Here a
reply is a status, a reason and its header lines (``Head``), and the bytes not yet consumed stay
in the connection's buffer for the next reply. Interim (1xx) replies are skipped, a head over
64 KiB or 100 headers is refused (``http.client``'s limits), and anything that is not HTTP is
a :class:`BadReply`; a connection that ends early is an :class:`EndedEarly`. Both are
``ConnectionError``: the caller maps them, and socket errors, to its own failures.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_HEAD_BYTES = 65536
MAX_HEADERS = 100
RECV_BYTES = 64 * 1024


_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_NAME = re.compile(r"[^:\s][^:\r\n]*")
_BAD_VALUE = re.compile(r"\n(?![ \t])|\r(?![ \t\n])")
"""What ``http.client`` refuses to send (a control character in the target, a header name
that is not one, a line break in a value that is not a fold), refused alike."""


class BadReply(ConnectionError):
    """What the upstream sent is not an HTTP/1.x reply."""


class EndedEarly(ConnectionError):
    """The upstream closed the connection before its reply was whole."""


@dataclass(eq=False)
class Wire:
    """A connection's socket and the bytes read from it that no reply has consumed yet."""

    sock: socket.socket
    buffer: bytearray = field(default_factory=bytearray)

    def fill(self) -> bool:
        """Read what has come (waiting for it); False when the upstream closed."""
        data = self.sock.recv(RECV_BYTES)
        if not data:
            return False
        self.buffer += data
        return True

    def line(self) -> bytes:
        """The next line, without its end (CRLF or LF)."""
        start = 0
        while (end := self.buffer.find(b"\n", start)) < 0:
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise BadReply("a line of the reply is over 64 KiB")
            start = len(self.buffer)
            if not self.fill():
                raise EndedEarly("it closed the connection mid-reply")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line


@dataclass
class Head:
    """A reply's status line and headers."""

    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    _by_name: dict[str, str] | None = field(default=None, repr=False)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of header ``name`` (its occurrences joined by ``, ``), else ``default``."""
        if self._by_name is None:
            by_name: dict[str, str] = {}
            for key, value in self.headers:
                lowered = key.lower()
                by_name[lowered] = f"{by_name[lowered]}, {value}" if lowered in by_name else value
            self._by_name = by_name
        return self._by_name.get(name.lower(), default)

    def tokens(self, name: str) -> list[str]:
        value = self.get(name) or ""
        return [t.strip().lower() for t in value.split(",") if t.strip()]


def send(
    wire: Wire, method: str, target: str, host: str, headers: dict[str, str], body: bytes
) -> None:
    """Write the request: its line, ``Host``, ``headers`` and ``body`` (with its
    ``Content-Length`` when it has one), in one write."""
    if _BAD_TARGET.search(target) or _BAD_TARGET.search(method):
        raise ValueError(f"the request target holds a control character: {target[:80]!r}")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers.items():
        if not _NAME.fullmatch(name) or _BAD_VALUE.search(value):
            raise ValueError(f"invalid header {name[:80]!r}")
        lines.append(f"{name}: {value}")
    if body and "content-length" not in {n.lower() for n in headers}:
        lines.append(f"Content-Length: {len(body)}")
    wire.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


def read_head(wire: Wire) -> Head:
    """The reply's head (interim 1xx replies skipped; ``101`` is final)."""
    while True:
        if not wire.buffer and not wire.fill():
            raise EndedEarly("it closed the connection without answering")
        status_line = wire.line().decode("iso-8859-1")
        version, _, rest = status_line.partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise BadReply(f"not an HTTP reply: {status_line[:80]!r}")
        headers: list[tuple[str, str]] = []
        size = len(status_line)
        while line := wire.line():
            size += len(line)
            if size > MAX_HEAD_BYTES or len(headers) >= MAX_HEADERS:
                raise BadReply("the reply's head is over 64 KiB or 100 headers")
            text = line.decode("iso-8859-1")
            if text[:1] in (" ", "\t") and headers:  # an obsolete folded line
                name, value = headers[-1]
                headers[-1] = (name, f"{value} {text.strip()}")
                continue
            name, sep, value = text.partition(":")
            if not sep or not name.strip():
                raise BadReply(f"not a header line: {text[:80]!r}")
            headers.append((name.strip(), value.strip()))
        status = int(code)
        if 100 <= status < 200 and status != 101:
            continue
        return Head(version, status, reason.strip(), headers)


@dataclass(frozen=True)
class Framing:
    """How the reply's body ends: ``length`` bytes, the last chunk, or the connection's close."""

    length: int | None
    chunked: bool = False

    @property
    def until_close(self) -> bool:
        return self.length is None and not self.chunked


def framing(head: Head, method: str) -> Framing:
    """The body's framing (RFC 9112 §6.3)."""
    if method == "HEAD" or head.status in (204, 304) or 100 <= head.status < 200:
        return Framing(0)
    codings = head.tokens("Transfer-Encoding")
    if codings:
        return Framing(None, chunked=codings[-1] == "chunked")
    text = head.get("Content-Length")
    if text is None:
        return Framing(None)
    values = {v.strip() for v in text.split(",")}
    if len(values) != 1 or not next(iter(values)).isdigit():
        raise BadReply(f"a bad Content-Length: {text[:80]!r}")
    return Framing(int(values.pop()))


def keeps_open(head: Head, body: Framing) -> bool:
    """Whether the connection serves another request once this reply is read."""
    if body.until_close or head.status == 101:
        return False
    tokens = head.tokens("Connection")
    if head.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


def body(wire: Wire, framing: Framing) -> Iterator[bytes]:
    """The body's bytes as they come (a chunked body decoded)."""
    if framing.chunked:
        yield from _chunked(wire)
    elif framing.length is not None:
        yield from _exactly(wire, framing.length)
    else:
        if wire.buffer:
            yield bytes(wire.buffer)
            wire.buffer.clear()
        while data := wire.sock.recv(RECV_BYTES):
            yield data


def _exactly(wire: Wire, size: int) -> Iterator[bytes]:
    while size:
        if not wire.buffer and not wire.fill():
            raise EndedEarly("it closed the connection mid-reply")
        piece = bytes(wire.buffer[:size])
        del wire.buffer[:size]
        size -= len(piece)
        yield piece


def _chunked(wire: Wire) -> Iterator[bytes]:
    while True:
        line = wire.line()
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadReply(f"a bad chunk size: {line[:40]!r}") from None
        if size == 0:
            while wire.line():  # trailers, up to the blank line
                pass
            return
        yield from _exactly(wire, size)
        if wire.line():
            raise BadReply("a chunk longer than its size")
