"""What the proxy sends back for one request, and the two failures that become a reply.

An :class:`HttpResponse` is whole (``body``) or streamed (``chunks``, e.g. server-sent
events), and may carry the delivery of a fault: a delay, a drop, a stall after some chunks.
The proxy's own errors are JSON, ``{"error": {"type": ..., "message": ...}}`` (:func:`error_reply`).

An :class:`UpstreamFailure` (unreachable, timed out, too large, cassette miss) is not a fault:
it becomes a 502/504 and the interaction's ``upstream_error``. A :class:`ClientFailure` (a
request too large or unreadable) is answered and the connection closed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from flakestorm.chaos import llm
    from flakestorm.chaos.faults.tool_modes import InjectedResponse
    from flakestorm.chaos.proxy.call import ServedCall


class Pace(Protocol):
    """The timing a stream fault gives a streamed reply
    (:class:`~flakestorm.chaos.llm.stream_faults.StreamFaulter`)."""

    def wait_ms(self, frame: bytes) -> int:
        """The wait before sending ``frame``."""
        ...

    @property
    def hold_ms(self) -> int | None:
        """Once the chunks have run out: hold the stream this long, then drop it."""
        ...


@dataclass
class HttpResponse:
    """What the proxy sends back to the agent for one call."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    chunks: Iterator[bytes] | None = None
    """Stream these (SSE): each is flushed as it comes."""
    delay_ms: int = 0
    """Wait this long before answering."""
    drop: bool = False
    """Close the connection without answering (after ``delay_ms``)."""
    stall_after_chunks: int | None = None
    """Send this many chunks, then hold the stream for ``delay_ms`` and drop it."""
    pace: Pace | None = None
    """When each of ``chunks`` leaves, and whether the stream is held and dropped once they
    run out (a stream fault: ``slow_stream``, ``timeout`` with ``after_chunks``)."""
    head_length: str | None = None
    """A HEAD reply's upstream Content-Length (``""``: the upstream sent none, nor do we)."""

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")


def error_reply(status: int, kind: str, message: str, **extra: Any) -> HttpResponse:
    """``{"error": {"type": kind, "message": message, ...}}`` with ``status``."""
    body = json.dumps({"error": {"type": kind, "message": message, **extra}}).encode()
    return HttpResponse(status, [("Content-Type", "application/json")], body)


def json_reply(value: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, [("Content-Type", "application/json")], json.dumps(value).encode())


def _pairs(headers: Any) -> list[tuple[str, str]]:
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    return [(str(k), str(v)) for k, v in items]


def from_tool(response: InjectedResponse) -> HttpResponse:
    """An injected tool response as a reply."""
    return HttpResponse(
        response.status,
        _pairs(response.headers),
        response.body,
        delay_ms=response.delay_ms,
        drop=response.drop,
    )


def from_llm(response: llm.LlmResponse) -> HttpResponse:
    """An LLM response (injected, distorted or the mock LLM's) as a reply."""
    chunks = response.chunks
    return HttpResponse(
        response.status,
        _pairs(response.headers),
        response.body or b"",
        chunks=None if chunks is None else iter(chunks),
        delay_ms=response.delay_ms,
        drop=response.drop,
        stall_after_chunks=response.stall_after_chunks,
    )


def closing(outer: Iterator[bytes], inner: Iterator[bytes]) -> Iterator[bytes]:
    """``outer``, closing ``inner`` (the upstream stream it reads) however it ends."""
    try:
        yield from outer
    finally:
        close = getattr(inner, "close", None)
        if close is not None:
            close()


def lost(reply: HttpResponse, call: ServedCall) -> HttpResponse:
    """``reply`` (the upstream's, read whole: it acted on the call) lost on its way: the
    connection is dropped instead (``lost_reply``); the call keeps the upstream's status."""
    if reply.chunks is not None:
        close = getattr(reply.chunks, "close", None)
        for _ in reply.chunks:  # the upstream finishes what it was doing
            pass
        if close is not None:
            close()
    call.upstream_status = reply.status
    return HttpResponse(reply.status, [], drop=True)


UPSTREAM_ERROR_HEADER = "X-Flakestorm-Upstream-Error"
"""Marks the proxy's reply for an upstream that could not answer with its kind
(``upstream_unreachable``, ...): a python agent's routed HTTP client turns an unreachable one
into its own connection error (:mod:`flakestorm.chaos.routing`), as it would meet without
flakestorm."""


class UpstreamFailure(Exception):
    """The upstream could not answer (not a fault): becomes a 502/504 and ``upstream_error``."""

    def __init__(self, status: int, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.extra = extra

    @property
    def reply(self) -> HttpResponse:
        reply = error_reply(self.status, self.kind, str(self), **self.extra)
        reply.headers.append((UPSTREAM_ERROR_HEADER, self.kind))
        return reply

    @property
    def summary(self) -> str:
        return f"{self.kind}: {self}"


class ClientFailure(Exception):
    """The agent's request cannot be served (too large, unreadable): answered, then closed."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
