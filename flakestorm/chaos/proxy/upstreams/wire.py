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


TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
"""A header name (RFC 9110 §5.1)."""
_PLAIN_BLOCK = re.compile(rf"(?:{TOKEN}:[^\r\n\x00]*\r?\n)*")
"""Header lines each ``Name: value`` and nothing else: no fold, no bare CR, no NUL."""
_PAIR = re.compile(r"([^:\n]+):[ \t]*([^\r\n]*?)[ \t]*\r?\n")
_NAMES = re.compile(r"^([^:\n]+):", re.MULTILINE)
_BLOCK_END = re.compile(rb"\n\r?\n")

_PLAIN_LINES = re.compile(r"(?:[^:\s][^:\r\n]*: [^\r\n]*\r\n)*")
"""Header lines as sent, none of them with a line break in its value."""
_LENGTH = re.compile(r"^content-length:", re.IGNORECASE | re.MULTILINE)
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
    names: list[str] | None = field(default=None, repr=False)
    """The header names lower-cased, in order (made from ``headers`` when not given)."""
    _by_name: dict[str, str] | None = field(default=None, repr=False)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of header ``name`` (its occurrences joined by ``, ``), else ``default``;
        ``name`` in lower case."""
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = {}
            names = self.names or [key.lower() for key, _ in self.headers]
            for lowered, (_, value) in zip(names, self.headers, strict=True):
                by_name[lowered] = f"{by_name[lowered]}, {value}" if lowered in by_name else value
        return by_name.get(name, default)

    def tokens(self, name: str) -> list[str]:
        return comma_tokens(self.get(name) or "")


def comma_tokens(value: str) -> list[str]:
    """The comma-separated tokens of a header value (a list's values joined by commas),
    lower-cased, empty ones dropped."""
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def send(
    wire: Wire, method: str, target: str, host: str, headers: dict[str, str], body: bytes
) -> None:
    """Write the request: its line, ``Host``, ``headers`` and ``body`` (with its
    ``Content-Length`` when it has one), in one write."""
    if _BAD_TARGET.search(target) or _BAD_TARGET.search(method):
        raise ValueError(f"the request target holds a control character: {target[:80]!r}")
    lines = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
    if not _PLAIN_LINES.fullmatch(lines):  # find the header at fault (a fold is allowed)
        for name, value in headers.items():
            if not _NAME.fullmatch(name) or _BAD_VALUE.search(value):
                raise ValueError(f"invalid header {name[:80]!r}")
    if body and not _LENGTH.search(lines):
        lines += f"Content-Length: {len(body)}\r\n"
    head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{lines}\r\n"
    wire.sock.sendall(head.encode("latin-1") + body)


def block_end(buffer: bytearray, start: int = 0) -> tuple[int, int]:
    """Where the header block at the start of ``buffer`` ends: after its last line's end, and
    after the blank line that closes it; ``(-1, -1)`` when the blank line has not come (the
    search starts at ``start``, where earlier bytes were searched already)."""
    if buffer[:1] == b"\n":
        return 0, 1
    if buffer[:2] == b"\r\n":
        return 0, 2
    found = _BLOCK_END.search(buffer, max(0, start - 2))
    return (found.start() + 1, found.end()) if found is not None else (-1, -1)


def head_block(wire: Wire, limit: int) -> str:
    """The header block at the start of the wire's buffer, taken off it with the blank line
    that closes it (reading more until that line comes): :class:`TooLarge` over ``limit``
    bytes, :class:`EndedEarly` when the connection ends first."""
    buffer = wire.buffer
    searched = 0
    while (ends := block_end(buffer, searched))[0] < 0:
        if len(buffer) > limit:
            raise TooLarge
        searched = len(buffer)
        if not wire.fill():
            raise EndedEarly("it closed the connection mid-reply")
    last, after = ends
    if last > limit:
        raise TooLarge
    block = bytes(buffer[:last]).decode("iso-8859-1")
    del buffer[:after]
    return block


def plain_pairs(block: str) -> tuple[list[tuple[str, str]], list[str]] | None:
    """A header block's ``(name, value)`` pairs and lower-cased names, when each of its lines
    is ``Name: value`` (ending in CRLF or LF); None for any other block (a folded line, a line
    without a colon, a bare CR, a NUL), for the caller to read line by line."""
    if not _PLAIN_BLOCK.fullmatch(block):
        return None
    return _PAIR.findall(block), _NAMES.findall(block.lower())


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
        try:
            block = head_block(wire, MAX_HEAD_BYTES)
        except TooLarge:
            raise BadReply("the reply's head is over 64 KiB or 100 headers") from None
        plain = plain_pairs(block)
        headers, names = plain if plain is not None else (_odd_reply_block(block), None)
        if len(block) + len(status_line) > MAX_HEAD_BYTES or len(headers) > MAX_HEADERS:
            raise BadReply("the reply's head is over 64 KiB or 100 headers")
        status = int(code)
        if 100 <= status < 200 and status != 101:
            continue
        return Head(version, status, reason.strip(), headers, names)


def _odd_reply_block(block: str) -> list[tuple[str, str]]:
    """The headers of a block that is not plain: folded lines joined to the value before,
    anything else not a header line a :class:`BadReply`."""
    headers: list[tuple[str, str]] = []
    for text in block.split("\n")[:-1]:
        text = text.removesuffix("\r")
        if text[:1] in (" ", "\t") and headers:  # an obsolete folded line
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {text.strip()}")
            continue
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            raise BadReply(f"not a header line: {text[:80]!r}")
        headers.append((name.strip(), value.strip()))
    return headers


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
    codings = head.tokens("transfer-encoding")
    if codings:
        return Framing(None, chunked=codings[-1] == "chunked")
    text = head.get("content-length")
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
    tokens = head.tokens("connection")
    if head.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


class TooLarge(Exception):
    """A body over the reader's limit."""


def read_whole(wire: Wire, framing: Framing, limit: int) -> bytes:
    """The whole body, at most ``limit`` bytes (:class:`TooLarge` past it; a length over it is
    refused before anything is read)."""
    length = framing.length
    if length is not None:
        if length > limit:
            raise TooLarge
        buffer = wire.buffer
        if len(buffer) >= length:  # all of it came already (most bodies, with their head)
            data = bytes(buffer[:length])
            del buffer[:length]
            return data
    whole = bytearray()
    for piece in body(wire, framing):
        whole += piece
        if len(whole) > limit:
            raise TooLarge
    return bytes(whole)


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
            if size < 0:
                raise ValueError
        except ValueError:
            raise BadReply(f"a bad chunk size: {line[:40]!r}") from None
        if size == 0:
            while wire.line():  # trailers, up to the blank line
                pass
            return
        yield from _exactly(wire, size)
        if wire.line():
            raise BadReply("a chunk longer than its size")
