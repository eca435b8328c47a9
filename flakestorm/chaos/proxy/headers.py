"""HTTP header blocks parsed without the ``email`` package's feed parser, for the proxy's threads.

The standard library's ``http.server`` parses every request's headers with
``http.client.parse_headers``, which runs the ``email`` package's general MIME parser: on a
proxied call it was the largest cost the proxy had (the upstream's replies are read by
:mod:`~flakestorm.chaos.proxy.upstreams.wire`).
:func:`parse_headers` gives the same ``HTTPMessage`` for a well-formed header block — each line
``Name: value`` with a token name, no folded or bare-CR lines — by adding each header as the
feed parser would (``policy.header_source_parse`` and ``set_raw``), and hands any other block
(and one whose ``Content-Type`` is ``multipart`` or ``message``, whose empty body the feed parser
reads into parts) to the standard parser, so odd input is read exactly as before.

:func:`install` puts it in front of ``http.client.parse_headers`` (which ``http.server`` and
``http.client`` both call) for the threads that serve the proxy's connections only
(:data:`~flakestorm.chaos.proxy.framing.serving`); every other thread of the process gets the
standard parser, untouched.
"""

from __future__ import annotations

import email.parser
import http.client
import re
import threading
from collections.abc import Callable
from email.message import Message
from email.policy import compat32
from typing import IO, Any

_MAXLINE = getattr(http.client, "_MAXLINE", 65536)
_MAXHEADERS = getattr(http.client, "_MAXHEADERS", 100)
_BLOCK = re.compile(r"(?:[\x21-\x39\x3b-\x7e]+:[^\r\n]*\r?\n)*")
"""Header lines the feed parser reads as one header each and nothing else (the name as its
``headerRE`` takes it, so never ``From ``; no continuation, no bare CR)."""

_PARTS = ("multipart", "message")

_installed = threading.Lock()
_original: Callable[..., Message] | None = None


def read_lines(fp: IO[bytes]) -> list[bytes]:
    """The header block's lines, the blank one included, within the standard library's
    limits (``LineTooLong``, more than 100 headers: ``HTTPException``)."""
    lines = []
    while True:
        line = fp.readline(_MAXLINE + 1)
        if len(line) > _MAXLINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > _MAXHEADERS:
            raise http.client.HTTPException(f"got more than {_MAXHEADERS} headers")
        if line in (b"\r\n", b"\n", b""):
            return lines


def parse_headers(fp: IO[bytes], _class: type[Message] = http.client.HTTPMessage) -> Message:
    """``http.client.parse_headers``, without the feed parser for a well-formed block."""
    lines = read_lines(fp)
    message = _simple(lines, _class)
    if message is None:
        text = b"".join(lines).decode("iso-8859-1")
        return email.parser.Parser(_class=_class).parsestr(text)
    return message


def _simple(lines: list[bytes], cls: type[Message]) -> Message | None:
    if lines[-1] not in (b"\r\n", b"\n"):
        return None  # the block ended without its blank line
    block = b"".join(lines[:-1]).decode("iso-8859-1")
    if not _BLOCK.fullmatch(block):
        return None
    message = cls()
    if message.policy is not compat32:
        return None
    # compat32's header_source_parse and header_store_parse, inline: (name, value) as read
    pairs = []
    for line in block.split("\n")[:-1]:  # each line ends in LF (or CRLF), nothing else
        name, _, value = line.removesuffix("\r").partition(":")
        pairs.append((name, value.lstrip(" \t")))
        if name.lower() == "content-type" and value.strip().lower().startswith(_PARTS):
            return None  # the feed parser would read a body into parts
    message._headers = pairs  # type: ignore[attr-defined]
    message.set_payload("")
    return message


class Headers(http.client.HTTPMessage):
    """An ``HTTPMessage`` read from bytes, whose lookups cost little: its values, decoded from
    ISO-8859-1, never hold the surrogates ``compat32`` makes ``Header`` objects of, so they are
    returned as stored, without the policy's pass over each value; and the lower-cased names
    are kept in a list searched in C (``get``, ``get_all`` and ``items`` run several times on
    every call). The list is made again when the headers change: ``Message`` appends to its
    ``_headers`` list or replaces it with a new one, and replaces a value only under its name."""

    _indexed: list[tuple[str, Any]] | None = None
    _lower: list[str]

    def _names(self) -> list[str]:
        headers: list[tuple[str, Any]] = self._headers  # type: ignore[attr-defined]
        if self._indexed is not headers or len(self._lower) != len(headers):
            self._lower = [name.lower() for name, _ in headers]
            self._indexed = headers
        return self._lower

    def get(self, name: str, failobj: Any = None) -> Any:
        names = self._names()
        name = name.lower()
        if name not in names:
            return failobj
        return self._headers[names.index(name)][1]  # type: ignore[attr-defined]

    def get_all(self, name: str, failobj: Any = None) -> Any:
        names = self._names()
        name = name.lower()
        if name not in names:
            return failobj
        headers = self._headers  # type: ignore[attr-defined]
        return [headers[i][1] for i, known in enumerate(names) if known == name]

    def items(self) -> Any:
        return list(self._headers)  # type: ignore[attr-defined]


def install(serving: Any) -> None:
    """Parse headers with :func:`parse_headers` on the threads where the context variable
    ``serving`` is true (idempotent)."""
    global _original
    with _installed:
        if _original is not None:
            return
        original = http.client.parse_headers
        _original = original

        def dispatch(fp: IO[bytes], _class: type[Message] = http.client.HTTPMessage) -> Message:
            if serving.get():
                return parse_headers(fp, Headers if _class is http.client.HTTPMessage else _class)
            return original(fp, _class)

        http.client.parse_headers = dispatch  # type: ignore[assignment]
