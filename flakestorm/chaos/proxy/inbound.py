"""An agent's requests, read off its connection: the request line and the header block
(:func:`read_request`), the body (:func:`read_body`), from the connection's own buffer
(:class:`~flakestorm.chaos.proxy.upstreams.wire.Wire`).

The standard library's ``http.server`` reads a request through a buffered file, a line at a
time, and hands the header block to the ``email`` package's MIME parser; on a proxied call that
machinery cost more than the proxy's own work. Here a request's head is found in the bytes
received, split once, checked with one regular expression, and kept as a list of pairs with an
index by lower-cased name (:class:`RequestHeaders`).

What is read, and what is refused (RFC 9112), each refusal a
:class:`~flakestorm.chaos.proxy.reply.ClientFailure` the proxy answers in JSON before closing:

- the request line ``METHOD TARGET HTTP/1.x`` (400 otherwise; ``HTTP/2`` and later: 505; a
  request line over 64 KiB: 414). Empty lines before it are skipped;
- header lines ``Name: value``, the name a token; lines end in CRLF or a bare LF; an obsolete
  folded line continues the previous value, joined with a space. A line that is none of these
  (no colon, a space before the colon, a bare CR, a NUL) is a 400 naming the line; a header
  block over 64 KiB or 100 headers a 431;
- the connection is kept open for HTTP/1.1 unless ``Connection`` lists ``close``, for HTTP/1.0
  only when it lists ``keep-alive``;
- a body framed by ``Transfer-Encoding: chunked`` (extensions and trailers read past) or
  ``Content-Length`` (413 over the proxy's limit; a connection that ends mid-body is a
  ``ConnectionResetError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import overload

from flakestorm.chaos.proxy.reply import ClientFailure
from flakestorm.chaos.proxy.upstreams.wire import (
    TOKEN,
    BadReply,
    Framing,
    TooLarge,
    Wire,
    comma_tokens,
    head_block,
    plain_pairs,
    read_whole,
)

MAX_LINE_BYTES = 65536
"""The longest request line; also the largest header block."""
MAX_HEADERS = 100

_METHOD = re.compile(TOKEN)
_HEADER = re.compile(rf"({TOKEN}):([^\r\x00]*)")
_VERSION = re.compile(r"HTTP/(\d)\.(\d)")
_BLANK = " \t"


class RequestHeaders:
    """A request's headers in the order they came, looked up by name in any case."""

    __slots__ = ("_first", "_names", "_pairs")

    def __init__(self, pairs: list[tuple[str, str]], names: list[str] | None = None) -> None:
        self._pairs = pairs
        self._names = names if names is not None else [name.lower() for name, _ in pairs]
        """The names lower-cased, in the same order."""
        values = [value for _, value in reversed(pairs)]
        self._first = dict(zip(reversed(self._names), values, strict=True))

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of header ``name``, else ``default``."""
        return self._first.get(name.lower(), default)

    @overload
    def get_all(self, name: str) -> list[str] | None: ...
    @overload
    def get_all(self, name: str, default: list[str]) -> list[str]: ...
    def get_all(self, name: str, default: list[str] | None = None) -> list[str] | None:
        """Every value of header ``name`` in order, else ``default``."""
        name = name.lower()
        if name not in self._first:
            return default
        pairs = self._pairs
        return [pairs[i][1] for i, known in enumerate(self._names) if known == name]

    def tokens(self, name: str) -> list[str]:
        """The comma-separated tokens of every ``name`` header, lower-cased."""
        return comma_tokens(",".join(self.get_all(name) or ()))

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)

    def named(self) -> zip[tuple[str, tuple[str, str]]]:
        """Each header's lower-cased name with the header as it came."""
        return zip(self._names, self._pairs, strict=True)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first


@dataclass(slots=True)
class RequestHead:
    """A request's line and headers."""

    method: str
    target: str
    version: str
    """``HTTP/1.0`` or ``HTTP/1.1`` (a later minor version reads as 1.1)."""
    headers: RequestHeaders

    @property
    def keep_alive(self) -> bool:
        """Whether the connection serves another request after this one."""
        if "connection" not in self.headers:
            return self.version != "HTTP/1.0"
        tokens = self.headers.tokens("Connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens

    @property
    def expects_continue(self) -> bool:
        """Whether the agent waits for ``100 Continue`` before it sends the body."""
        expect = self.headers.get("Expect")
        if expect is None or self.version == "HTTP/1.0":
            return False
        return expect.lower() == "100-continue"


def read_request(wire: Wire) -> RequestHead | None:
    """The next request's head; None when the connection ended (or was cut) before one began.
    Refusals are :class:`ClientFailure` (see the module doc)."""
    buffer = wire.buffer
    while (end := buffer.find(b"\n")) <= 1:
        if end == 0 or (end == 1 and buffer[0] == 13):  # an empty line before the request
            del buffer[: end + 1]
            continue
        if end == 1:
            break
        if len(buffer) > MAX_LINE_BYTES:
            raise _too_long()
        if not _fill(wire):
            if buffer:
                raise ConnectionResetError("the agent closed the connection mid-request")
            return None
    if end > MAX_LINE_BYTES:
        raise _too_long()
    line = bytes(buffer[:end]).decode("iso-8859-1").removesuffix("\r")
    del buffer[: end + 1]
    method, target, version = _request_line(line)
    try:
        block = head_block(wire, MAX_LINE_BYTES)
    except TooLarge:
        raise ClientFailure(
            431, "headers_too_large", "the request's headers are over 64 KiB"
        ) from None
    except OSError:  # it ended, or the proxy shut the connection down (stopping), or a reset
        raise ConnectionResetError("the agent closed the connection mid-request") from None
    return RequestHead(method, target, version, _headers(block))


def _too_long() -> ClientFailure:
    return ClientFailure(414, "request_line_too_long", "the request line is over 64 KiB")


def _fill(wire: Wire) -> bool:
    try:
        return wire.fill()
    except OSError:  # the proxy shut the connection down (stopping), or it was reset
        return False


def _request_line(line: str) -> tuple[str, str, str]:
    words = line.split()
    if len(words) != 3 or not _METHOD.fullmatch(words[0]):
        shown = line[:200]
        raise ClientFailure(
            400, "bad_request", f"bad request line {shown!r}: expected METHOD TARGET HTTP/1.1"
        )
    method, target, version = words
    number = _VERSION.fullmatch(version)
    if number is None:
        raise ClientFailure(400, "bad_request", f"bad HTTP version {version[:40]!r}")
    if number.group(1) != "1":
        raise ClientFailure(
            505, "http_version_not_supported", f"{version} is not served: use HTTP/1.1"
        )
    return method, target, "HTTP/1.0" if number.group(2) == "0" else "HTTP/1.1"


def _headers(block: str) -> RequestHeaders:
    plain = plain_pairs(block)  # the common case: each line a header, nothing odd
    pairs, names = plain if plain is not None else (_odd_block(block), None)
    if len(pairs) > MAX_HEADERS:
        raise ClientFailure(431, "headers_too_large", f"more than {MAX_HEADERS} request headers")
    return RequestHeaders(pairs, names)


def _odd_block(block: str) -> list[tuple[str, str]]:
    """A header block with folded lines, or one to refuse with the line that is wrong."""
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(block.split("\n")[:-1], 1):
        text = line.removesuffix("\r")
        if text[:1] in (" ", "\t") and pairs and "\r" not in text and "\x00" not in text:
            name, value = pairs[-1]  # an obsolete fold: one value, joined with a space
            pairs[-1] = (name, " ".join(filter(None, (value, text.strip(_BLANK)))))
            continue
        matched = _HEADER.fullmatch(text)
        if matched is None:
            raise ClientFailure(
                400,
                "bad_request",
                f"request header line {number} is not `Name: value`: {text[:200]!r}",
            )
        pairs.append((matched.group(1), matched.group(2).strip(_BLANK)))
    return pairs


def read_body(wire: Wire, headers: RequestHeaders, limit: int) -> bytes:
    """The request's body: chunked, or ``Content-Length`` bytes (none without either)."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        framing = Framing(None, chunked=True)
    else:
        length_text = headers.get("Content-Length")
        if not length_text:
            return b""
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            message = f"bad Content-Length {length_text!r}"
            raise ClientFailure(400, "bad_request", message) from None
        if length > limit:
            message = f"request body of {length} bytes (limit {limit})"
            raise ClientFailure(413, "request_too_large", message)
        framing = Framing(length)
    try:
        return read_whole(wire, framing, limit)
    except TooLarge:
        message = f"chunked request body over {limit} bytes"
        raise ClientFailure(413, "request_too_large", message) from None
    except BadReply:  # a chunk's size, or its end, is not what chunked framing says
        raise ClientFailure(400, "bad_request", "bad chunked request body") from None
    except OSError:  # the agent hung up mid-body (or the proxy shut its connection down)
        raise ConnectionResetError("the agent closed the connection mid-body") from None
