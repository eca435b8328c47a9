"""A described HTTP request: how one invocation's request differs from the configured one.

The request-level mutations (SPEC §6) attack the HTTP request itself, not only the prompt. A
:class:`RequestShape` travels on the :class:`~flakestorm.agents.Call` of an invocation; the
http agent then sends the request byte by byte (:mod:`flakestorm.agents.wire`), so protocol
oddities that a client library would refuse or normalise (HTTP/1.0, a chunked body,
``Expect: 100-continue``, a body split across slow writes, duplicated headers) reach the agent
exactly as described. Python agents have no HTTP request: a shape is refused there.

A shape is data (frozen, JSON-friendly): it is kept in ``results.json`` beside the mutated
prompt, so a failed mutation can be sent again exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

PADDING_UNIT = "flakestorm padding. "
"""What an oversized prompt is padded with (:attr:`RequestShape.pad_bytes`)."""


@dataclass(frozen=True)
class RequestShape:
    """The changes to the configured request; the defaults change nothing."""

    method: str | None = None
    """Another HTTP method (``GET``, ``PUT``, ...)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers added as given (a name may repeat; values are sent byte for byte)."""
    content_type: str | None = None
    """Replaces ``Content-Type`` for the same body; ``""`` sends none."""
    query: tuple[tuple[str, str], ...] = ()
    """Query parameters appended to the endpoint's URL (percent-encoded)."""
    pad_bytes: int = 0
    """Bytes of padding appended to the prompt before the body is rendered."""
    nest_depth: int = 0
    """The body wrapped in this many nested JSON objects (``{"a": {"a": ... body}}``)."""
    extra_keys: int = 0
    """Keys added to the top JSON object of the body."""
    http_version: str = "1.1"
    """``1.1`` or ``1.0`` (no ``Host`` header and ``Connection: close`` semantics)."""
    chunked: bool = False
    """Send the body with ``Transfer-Encoding: chunked``."""
    expect_continue: bool = False
    """Send ``Expect: 100-continue`` and wait (up to a second) before the body."""
    body_pieces: int = 1
    """The body written in this many pieces…"""
    piece_pause_ms: int = 0
    """…with this pause between them (a body trickled slowly)."""
    copies: int = 1
    """Identical requests sent at once; the invocation's reply is the worst of them."""

    @property
    def changes(self) -> tuple[str, ...]:
        """One line per change, for reports (header values abbreviated)."""
        out = []
        if self.method is not None:
            out.append(f"method {self.method}")
        for name, value in self.headers:
            shown = value if len(value) <= 80 else f"{value[:40]}… ({len(value)} bytes)"
            out.append(f"header {name}: {shown!r}")
        if self.content_type is not None:
            out.append(
                f"Content-Type {self.content_type!r}" if self.content_type else "no Content-Type"
            )
        if self.query:
            out.append("query " + "&".join(f"{k}={v}" for k, v in self.query)[:200])
        if self.pad_bytes:
            out.append(f"prompt padded with {self.pad_bytes:,} bytes")
        if self.nest_depth:
            out.append(f"body nested {self.nest_depth} levels deep")
        if self.extra_keys:
            out.append(f"{self.extra_keys:,} extra keys in the body")
        if self.http_version != "1.1":
            out.append(f"HTTP/{self.http_version}")
        if self.chunked:
            out.append("Transfer-Encoding: chunked")
        if self.expect_continue:
            out.append("Expect: 100-continue")
        if self.body_pieces > 1:
            out.append(f"body in {self.body_pieces} writes, {self.piece_pause_ms} ms apart")
        if self.copies > 1:
            out.append(f"{self.copies} identical requests at once")
        return tuple(out)


def padding(size: int) -> str:
    """``size`` characters of readable padding."""
    repeats = size // len(PADDING_UNIT) + 1
    return (PADDING_UNIT * repeats)[:size]
