"""Stdio MCP relays, reached the other way round (SPEC §11): the proxy never connects to a relay;
each relay connects to the proxy, so a proxy service in another container (``proxy.url``) faults
a stdio server as the in-process proxy does.

A relay (:mod:`~flakestorm.chaos.proxy.stdio_relay`) is known by an id it makes up (random,
unguessable). It sends each request of the agent as a call, ``POST /mcp-relay/ID/call`` with
``X-Flakestorm-Mcp: NAME``: the proxy reads, decides, faults and logs it as any MCP call
(:mod:`~flakestorm.chaos.proxy.mcp_calls`), and when the request must reach the server its
upstream (:class:`RelayUpstream`) hands it back to that relay: the relay polls
``GET /mcp-relay/ID/next`` (answered at once when a request waits, else 204 after
:data:`POLL_S`), writes what it gets to the server and posts the server's response to
``POST /mcp-relay/ID/answer/KEY`` (an empty body: the server sends none). The poll and the
answer are plumbing, not calls: they are not logged.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from urllib.parse import unquote

from flakestorm.chaos import mcp
from flakestorm.chaos.proxy.reply import HttpResponse, UpstreamFailure
from flakestorm.chaos.proxy.upstreams.base import Upstream, UpstreamRequest

PREFIX = "/mcp-relay/"
"""The relays' routes: ``/mcp-relay/ID/call``, ``/next``, ``/answer/KEY``."""
SCHEME = "relay:"
"""A call's ``upstream_url`` when its relay answers it: ``relay:ID``."""
KEY_HEADER = "X-Flakestorm-Relay-Key"
"""Names the request a poll hands out; its answer is posted under it."""
POLL_S = 20.0
"""How long a poll waits for a request before answering 204."""


@dataclass
class _Exchange:
    key: str
    body: bytes
    done: threading.Event = field(default_factory=threading.Event)
    answer: bytes | None = None
    aborted: bool = False


class Relays:
    """The requests waiting for their relays, and the answers coming back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: dict[str, list[_Exchange]] = {}
        self._out: dict[tuple[str, str], _Exchange] = {}
        self._keys = itertools.count(1)
        self._closed = False

    def exchange(self, relay: str, body: bytes, timeout_s: float) -> bytes | None:
        """Hand ``body`` to ``relay`` and wait for the server's response (None: it sends
        none); TimeoutError when none comes within ``timeout_s`` (the relay is gone, or the
        server hangs), ConnectionAbortedError when the proxy stops."""
        item = _Exchange(str(next(self._keys)), body)
        with self._cond:
            self._waiting.setdefault(relay, []).append(item)
            self._out[(relay, item.key)] = item
            self._cond.notify_all()
        try:
            if not item.done.wait(timeout_s):
                raise TimeoutError
            if item.aborted:
                raise ConnectionAbortedError
            return item.answer
        finally:
            with self._cond:
                self._out.pop((relay, item.key), None)
                waiting = self._waiting.get(relay, [])
                if item in waiting:
                    waiting.remove(item)

    def next(self, relay: str, wait_s: float = POLL_S) -> tuple[str, bytes] | None:
        """The next request for ``relay`` (its key and body), waiting at most ``wait_s``."""
        with self._cond:
            waiting = self._cond.wait_for(
                lambda: self._closed or bool(self._waiting.get(relay)), wait_s
            )
            if not waiting or self._closed:
                return None
            item = self._waiting[relay].pop(0)
            return item.key, item.body

    def answer(self, relay: str, key: str, body: bytes) -> bool:
        """The server's response to request ``key`` (empty: none); False when no call waits
        for it any more."""
        with self._cond:
            item = self._out.get((relay, key))
        if item is None:
            return False
        item.answer = body or None
        item.done.set()
        return True

    def close(self) -> None:
        """Stop: polls end, calls waiting for an answer fail."""
        with self._cond:
            self._closed = True
            items = list(self._out.values())
            self._cond.notify_all()
        for item in items:
            item.aborted = True
            item.done.set()


def plumbing(path: str) -> tuple[str, str, str] | None:
    """``(relay, "next" | "answer", key)`` for a relay's poll or answer path, else None."""
    if not path.startswith(PREFIX):
        return None
    relay, _, rest = path[len(PREFIX) :].partition("/")
    if rest == "next":
        return unquote(relay), "next", ""
    if rest.startswith("answer/"):
        return unquote(relay), "answer", rest[len("answer/") :]
    return None


def call_relay(path: str) -> str | None:
    """The relay a ``/mcp-relay/ID/call`` path is a call of, else None."""
    if not path.startswith(PREFIX):
        return None
    relay, _, rest = path[len(PREFIX) :].partition("/")
    return unquote(relay) if rest == "call" and relay else None


class RelayUpstream:
    """Sends a call whose ``upstream_url`` is ``relay:ID`` to that relay; the rest to
    ``inner``."""

    def __init__(self, inner: Upstream, relays: Relays, timeout_s: float) -> None:
        self.inner = inner
        self.relays = relays
        self.timeout_s = timeout_s

    def send(self, request: UpstreamRequest) -> HttpResponse:
        url = request.call.upstream_url
        if not url.startswith(SCHEME):
            return self.inner.send(request)
        relay = url[len(SCHEME) :]
        try:
            answer = self.relays.exchange(relay, request.body, self.timeout_s)
        except TimeoutError:
            raise UpstreamFailure(
                504,
                "upstream_timeout",
                f"the stdio relay {request.call.mcp} did not answer within {self.timeout_s:g} s",
            ) from None
        except ConnectionAbortedError:
            raise UpstreamFailure(502, "upstream_unreachable", "the proxy is stopping") from None
        if answer is None:
            request.call.upstream_status = 202
            return HttpResponse(202, [])
        request.call.upstream_status = 200
        return HttpResponse(200, [("Content-Type", mcp.JSON_TYPE)], answer.strip())
