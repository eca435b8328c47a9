"""The real upstream: the call's URL over HTTP(S), with ``requests``.

The agent's headers are forwarded (``Authorization``, ``x-api-key``, ``anthropic-version``...)
except hop-by-hop headers, ``Host``, ``Accept-Encoding`` (the proxy asks for identity, so it can
read and rewrite replies) and the ``X-Flakestorm-*`` headers. No redirects are followed (the
agent sees them), no cookies kept, and the proxy's own environment proxies are ignored.

A server-sent-events reply is streamed chunk by chunk as it arrives (each read may wait
``upstream_timeout``); any other is read whole, up to ``max_response_bytes``, within a
wall-clock deadline of ``upstream_timeout`` from the request to the last byte
(:mod:`flakestorm.agents.deadline`: a server trickling its reply is cut there, a 504). Failures
are :class:`UpstreamFailure`, not faults: unreachable (502 ``upstream_unreachable``), timed out
(504 ``upstream_timeout``), too large (502 ``upstream_too_large``); they are translated here and
no ``requests`` error escapes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import HTTPError, ReadTimeoutError

from flakestorm.agents.deadline import DeadlineAdapter, deadline
from flakestorm.chaos.proxy.framing import CHUNK_BYTES, forwarded_headers
from flakestorm.chaos.proxy.reply import ClientFailure, HttpResponse, UpstreamFailure
from flakestorm.chaos.proxy.upstreams.base import UpstreamRequest


def network_session() -> requests.Session:
    """The pooled session every upstream request goes through (closed with the proxy)."""
    session = requests.Session()
    session.trust_env = False  # the proxy's own environment must not reroute agent traffic
    adapter = DeadlineAdapter(pool_connections=32, pool_maxsize=64, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class NetworkUpstream:
    """Sends each call to its ``upstream_url``."""

    def __init__(
        self,
        session: requests.Session,
        connect_timeout_s: float,
        upstream_timeout_s: float,
        max_response_bytes: int,
    ) -> None:
        self.session = session
        self.connect_timeout_s = connect_timeout_s
        self.upstream_timeout_s = upstream_timeout_s
        self.max_response_bytes = max_response_bytes

    def send(self, request: UpstreamRequest) -> HttpResponse:
        call = request.call
        url = call.upstream_url
        headers = forwarded_headers(request.headers)
        with deadline(self.upstream_timeout_s) as limit:
            try:
                response = self._request(call.method, url, headers, request.body)
                call.upstream_status = response.status_code
                raw_headers = list(response.raw.headers.items())
                if _is_sse(response):  # streamed on after this returns: per-read timeouts
                    return HttpResponse(
                        response.status_code, raw_headers, chunks=self._iter(response, url)
                    )
                head = call.method == "HEAD"
                data = self._read(response, url) if not head else b""
            except UpstreamFailure as exc:
                if limit.expired and exc.kind != "upstream_too_large":
                    raise self._timed_out(url) from exc
                raise
            if limit.expired:  # a close-delimited body cut at the deadline looks whole
                raise self._timed_out(url)
        reply = HttpResponse(response.status_code, raw_headers, data)
        if head:
            response.close()
            reply.head_length = response.headers.get("Content-Length", "")
        return reply

    def _request(
        self, method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> requests.Response:
        """Send the request upstream; translate ``requests`` failures to UpstreamFailure.

        The request goes straight to the session's pooled adapter: no redirects followed (the
        agent sees them), no cookies kept, no environment proxies, and none of the per-call
        setting merges of ``Session.request``, which cost more than the rest of the proxy.
        """
        prepared = requests.PreparedRequest()
        try:
            prepared.prepare(method=method, url=url, headers=_combined(headers), data=body or None)
        except (requests.RequestException, ValueError) as exc:
            raise ClientFailure(400, "bad_request", f"cannot forward to {url!r}: {exc}") from None
        try:
            return self.session.get_adapter(url).send(
                prepared, stream=True, timeout=(self.connect_timeout_s, self.upstream_timeout_s)
            )
        except requests.Timeout as exc:
            raise UpstreamFailure(
                504,
                "upstream_timeout",
                f"{_origin(url)} did not answer within {self.upstream_timeout_s:g} s",
            ) from exc
        except requests.RequestException as exc:
            raise UpstreamFailure(
                502, "upstream_unreachable", f"{_origin(url)} is unreachable: {_reason(exc)}"
            ) from exc

    def _read(self, response: requests.Response, url: str) -> bytes:
        """The whole (decoded) body, at most ``max_response_bytes``."""
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.max_response_bytes:
            response.close()
            raise self._too_large(url)
        data = bytearray()
        for chunk in self._iter(response, url):
            data += chunk
            if len(data) > self.max_response_bytes:
                response.close()
                raise self._too_large(url)
        return bytes(data)

    def _iter(self, response: requests.Response, url: str) -> Iterator[bytes]:
        """The body's chunks as they arrive; failures mid-body become UpstreamFailure."""
        try:
            if _is_sse(response):
                yield from _sse_chunks(response)
            else:
                yield from response.iter_content(chunk_size=CHUNK_BYTES)
        except requests.RequestException as exc:
            if isinstance(exc, requests.Timeout) or (
                exc.args and isinstance(exc.args[0], ReadTimeoutError)
            ):
                raise UpstreamFailure(
                    504,
                    "upstream_timeout",
                    f"{_origin(url)} stopped sending for {self.upstream_timeout_s:g} s",
                ) from exc
            raise UpstreamFailure(
                502, "upstream_unreachable", f"{_origin(url)} broke off its reply: {_reason(exc)}"
            ) from exc
        finally:
            response.close()

    def _timed_out(self, url: str) -> UpstreamFailure:
        return UpstreamFailure(
            504,
            "upstream_timeout",
            f"{_origin(url)} did not send its whole reply within {self.upstream_timeout_s:g} s",
        )

    def _too_large(self, url: str) -> UpstreamFailure:
        return UpstreamFailure(
            502,
            "upstream_too_large",
            f"{_origin(url)} sent more than {self.max_response_bytes} bytes",
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
    text = str(exc)
    for marker in _REASONS:
        if marker in text:
            return marker.lower()
    return type(exc).__name__


def _combined(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The headers as one value per name: repeated ones joined (``, ``; ``; `` for Cookie),
    as HTTP allows, instead of all but the last being lost."""
    out: dict[str, str] = {}
    names: dict[str, str] = {}
    for name, value in headers:
        first = names.setdefault(name.lower(), name)
        if first in out:
            out[first] += ("; " if first.lower() == "cookie" else ", ") + value
        else:
            out[first] = value
    return out


def _sse_chunks(response: requests.Response) -> Iterator[bytes]:
    """An event stream's bytes as soon as each arrives. A chunked stream yields chunk by chunk
    already; one without chunked framing (close-delimited, or a Content-Length) would be read
    to its end by ``iter_content`` before yielding anything, so it is read with ``read1``."""
    raw = response.raw
    read1 = getattr(raw, "read1", None)  # urllib3 >= 2.3
    if raw.chunked or read1 is None:
        yield from response.iter_content(chunk_size=None)
        return
    while True:
        try:
            data = read1(CHUNK_BYTES)
        except (HTTPError, OSError) as exc:  # what requests' iter_content would raise
            raise requests.ConnectionError(exc) from exc
        if not data:
            return
        yield data


def _is_sse(response: requests.Response) -> bool:
    return response.headers.get("Content-Type", "").lower().startswith("text/event-stream")
