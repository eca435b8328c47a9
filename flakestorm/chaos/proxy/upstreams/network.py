"""The real upstream: the call's URL over HTTP(S), through a pool of kept-alive connections
(:mod:`~.connections`) spoken to with :mod:`~.wire`: a proxied call costs a fraction of what
``requests``, and then ``http.client``, did.

The agent's headers are forwarded (``Authorization``, ``x-api-key``, ``anthropic-version``...)
except hop-by-hop headers, ``Host``, ``Accept-Encoding`` (the proxy asks for identity, so it can
read and rewrite replies) and the ``X-Flakestorm-*`` headers. No redirects are followed (the
agent sees them), no cookies kept, and the proxy's own environment proxies are ignored. A reply
compressed anyway (``gzip``, ``deflate``) is passed on decoded.

A server-sent-events reply is streamed chunk by chunk as it arrives (each read may wait
``upstream_timeout``); any other is read whole, up to ``max_response_bytes``, within a
wall-clock deadline of ``upstream_timeout`` from the request to the last byte
(:mod:`flakestorm.agents.deadline`: a server trickling its reply is cut there, a 504). Failures
are :class:`UpstreamFailure`, not faults: unreachable (502 ``upstream_unreachable``), timed out
(504 ``upstream_timeout``), too large (502 ``upstream_too_large``); they are translated here and
no socket or protocol error escapes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from urllib.parse import urlsplit

from flakestorm.agents.deadline import deadline
from flakestorm.chaos.proxy.framing import forwarded_headers
from flakestorm.chaos.proxy.reply import ClientFailure, HttpResponse, UpstreamFailure
from flakestorm.chaos.proxy.upstreams.base import UpstreamRequest
from flakestorm.chaos.proxy.upstreams.connections import Connection, Connections, Target, target
from flakestorm.chaos.proxy.upstreams.wire import (
    BadReply,
    EndedEarly,
    Framing,
    Head,
    TooLarge,
    Wire,
    body,
    framing,
    keeps_open,
    read_whole,
)
from flakestorm.chaos.proxy.upstreams.wire import read_head as read_reply_head
from flakestorm.chaos.proxy.upstreams.wire import send as send_request

_BROKEN = OSError
"""What a failed exchange raises (a timeout is an OSError too: ``TimeoutError``; so are the
wire's ``BadReply`` and ``EndedEarly``, both ``ConnectionError``)."""


class NetworkUpstream:
    """Sends each call to its ``upstream_url``."""

    def __init__(
        self,
        connections: Connections,
        upstream_timeout_s: float,
        max_response_bytes: int,
    ) -> None:
        self.connections = connections
        self.upstream_timeout_s = upstream_timeout_s
        self.max_response_bytes = max_response_bytes

    def send(self, request: UpstreamRequest) -> HttpResponse:
        call = request.call
        url = call.upstream_url
        try:
            where = target(url)
        except ValueError as exc:
            raise ClientFailure(400, "bad_request", f"cannot forward to {url!r}: {exc}") from None
        headers = forwarded_headers(request.headers)
        body = request.body
        if not body and call.method not in ("GET", "HEAD"):
            headers["Content-Length"] = "0"  # as requests sent it
        with deadline(self.upstream_timeout_s) as limit:
            connection = self.connections.take(where)
            try:
                wire, head = self._exchange(connection, call.method, url, where, headers, body)
                call.upstream_status = head.status
                framed = framing_of(head, call.method, url)
                decoder = _Decoder.of(head, self.max_response_bytes, url)
                if _is_sse(head):  # streamed on after this returns: per-read timeouts
                    connection.limit_reads(True)
                    chunks = self._stream(connection, wire, head, framed, decoder, url)
                    return HttpResponse(head.status, head.headers, chunks=chunks)
                data = decoder.whole(self._read(wire, framed, url))
            except UpstreamFailure as exc:
                connection.close()
                if limit.expired and exc.kind != "upstream_too_large":
                    raise self._timed_out(url) from exc
                raise
            except BaseException:
                connection.close()
                raise
            if limit.expired:  # a close-delimited body cut at the deadline looks whole
                connection.close()
                raise self._timed_out(url)
        self._done(connection, where, head, framed)
        reply = HttpResponse(head.status, head.headers, data)
        if call.method == "HEAD":
            reply.head_length = head.get("content-length", "")
        return reply

    def _exchange(
        self,
        connection: Connection,
        method: str,
        url: str,
        where: Target,
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[Wire, Head]:
        """Send the request and read the reply's head; failures as UpstreamFailure."""
        try:
            wire = connection.wire()
            send_request(wire, method, where.path, connection.host_header, headers, body)
        except (UnicodeEncodeError, ValueError) as exc:  # unsendable header or target
            raise ClientFailure(400, "bad_request", f"cannot forward to {url!r}: {exc}") from None
        except _BROKEN as exc:
            raise self._unanswered(exc, url) from exc
        try:
            return wire, read_reply_head(wire)
        except _BROKEN as exc:
            raise self._unanswered(exc, url) from exc

    def _read(self, wire: Wire, framed: Framing, url: str) -> bytes:
        """The whole (raw) body, at most ``max_response_bytes``."""
        try:
            return read_whole(wire, framed, self.max_response_bytes)
        except TooLarge:
            raise self._too_large(url) from None
        except _BROKEN as exc:
            raise self._broke_off(exc, url) from exc

    def _stream(
        self,
        connection: Connection,
        wire: Wire,
        head: Head,
        framed: Framing,
        decoder: _Decoder,
        url: str,
    ) -> Iterator[bytes]:
        """An event stream's bytes as soon as each arrives (a chunk of a chunked stream, what
        has come of a close-delimited one); the connection kept when it ends."""
        ended = False
        pieces = body(wire, framed)
        try:
            while True:
                try:
                    data = next(pieces, b"")
                except _BROKEN as exc:
                    raise self._broke_off(exc, url) from exc
                if not data:
                    ended = True
                    break
                yield decoder.part(data)
        finally:
            if ended:
                connection.limit_reads(False)
                self._done(connection, connection.where, head, framed)
            else:
                connection.close()

    def _done(self, connection: Connection, where: Target, head: Head, framed: Framing) -> None:
        if keeps_open(head, framed):
            self.connections.give_back(where, connection)
        else:
            connection.close()

    def _broke_off(self, exc: BaseException, url: str) -> UpstreamFailure:
        if isinstance(exc, TimeoutError):
            return UpstreamFailure(
                504,
                "upstream_timeout",
                f"{_origin(url)} stopped sending for {self.upstream_timeout_s:g} s",
            )
        return UpstreamFailure(
            502, "upstream_unreachable", f"{_origin(url)} broke off its reply: {_reason(exc)}"
        )

    def _unanswered(self, exc: BaseException, url: str) -> UpstreamFailure:
        """The failure of a request that got no reply: it timed out, or the upstream is
        unreachable."""
        if isinstance(exc, TimeoutError):
            return UpstreamFailure(
                504,
                "upstream_timeout",
                f"{_origin(url)} did not answer within {self.upstream_timeout_s:g} s",
            )
        return UpstreamFailure(
            502, "upstream_unreachable", f"{_origin(url)} is unreachable: {_reason(exc)}"
        )

    def _timed_out(self, url: str) -> UpstreamFailure:
        return UpstreamFailure(
            504,
            "upstream_timeout",
            f"{_origin(url)} did not send its whole reply within {self.upstream_timeout_s:g} s",
        )

    def _too_large(self, url: str) -> UpstreamFailure:
        return too_large(url, self.max_response_bytes)


def too_large(url: str, limit: int) -> UpstreamFailure:
    return UpstreamFailure(
        502, "upstream_too_large", f"{_origin(url)} sent more than {limit} bytes"
    )


class _Decoder:
    """A body compressed despite ``Accept-Encoding: identity`` (``gzip``, ``deflate``),
    decoded within the size limit; any other body as it came."""

    def __init__(self, wbits: int | None, limit: int, url: str, encoding: str) -> None:
        self._inflate = zlib.decompressobj(wbits) if wbits is not None else None
        self._raw_deflate = wbits == zlib.MAX_WBITS
        self.limit, self.url, self.encoding = limit, url, encoding
        self._size = 0

    @classmethod
    def of(cls, head: Head, limit: int, url: str) -> _Decoder:
        encoding = (head.get("content-encoding") or "").strip().lower()
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS}.get(encoding)
        if encoding == "deflate":
            wbits = zlib.MAX_WBITS
        return cls(wbits, limit, url, encoding)

    def whole(self, data: bytes) -> bytes:
        if self._inflate is None:
            return data
        return self.part(data) + self._flushed()

    def part(self, data: bytes) -> bytes:
        if self._inflate is None or not data:
            return data
        try:
            out = self._inflate.decompress(data, self.limit + 1 - self._size)
        except zlib.error:
            if not (self._raw_deflate and self._size == 0):
                raise self._undecodable() from None
            # "deflate" sent without its zlib header, as some servers do
            self._inflate, self._raw_deflate = zlib.decompressobj(-zlib.MAX_WBITS), False
            return self.part(data)
        self._size += len(out)
        if self._size > self.limit or self._inflate.unconsumed_tail:
            raise too_large(self.url, self.limit)
        return out

    def _flushed(self) -> bytes:
        assert self._inflate is not None
        out = self._inflate.flush()
        self._size += len(out)
        if self._size > self.limit:
            raise too_large(self.url, self.limit)
        return out

    def _undecodable(self) -> UpstreamFailure:
        return UpstreamFailure(
            502,
            "upstream_unreachable",
            f"{_origin(self.url)} sent a reply that is not valid {self.encoding}",
        )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


_REASONS = (
    "Connection refused",
    "Name or service not known",
    "nodename nor servname",
    "Temporary failure in name resolution",
    "Connection reset",
    "No route to host",
)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (BadReply, EndedEarly)):
        return str(exc)
    text = str(exc)
    for marker in _REASONS:
        if marker in text:
            return marker.lower()
    return type(exc).__name__


def _is_sse(head: Head) -> bool:
    return (head.get("content-type") or "").lower().startswith("text/event-stream")


def framing_of(head: Head, method: str, url: str) -> Framing:
    """The reply's framing; a reply whose framing cannot be read is a broken one (502)."""
    try:
        return framing(head, method)
    except ConnectionError as exc:
        raise UpstreamFailure(
            502, "upstream_unreachable", f"{_origin(url)} broke off its reply: {exc}"
        ) from exc
