"""The proxy's HTTP/1.1 exchange with an upstream (``chaos/proxy/upstreams/wire.py``), through
the proxy as an agent calls it: every framing a server may use reaches the agent whole, a
kept-alive connection serves the next call, and what is not HTTP is a 502, never a hang or a
traceback."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import requests
from support.raw_server import RawUpstream
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.proxy.server import ChaosProxy


def through(upstream: str, calls: int = 1) -> list[requests.Response]:
    """``calls`` GETs of tool ``t`` (routed to ``upstream``) through a proxy."""
    with ChaosProxy(tools={"t": upstream}) as proxy, requests.Session() as session:
        session.trust_env = False
        return [session.get(f"{proxy.url}/tools/t/x", timeout=10) for _ in range(calls)]


def replying(raw: bytes) -> Iterator[str]:
    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(raw)

    with RawUpstream(script) as upstream:
        yield upstream.url


REPLIES = {
    "chunked, with extensions and trailers": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
        b"hello world",
    ),
    "an interim 103 first": (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"ok",
    ),
    "until the connection closes": (b"HTTP/1.0 200 OK\r\n\r\nuntil the end", b"until the end"),
    "bare LF line ends": (b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", b"ok"),
    "a folded header": (
        b"HTTP/1.1 200 OK\r\nX-Note: one\r\n two\r\nContent-Length: 2\r\n\r\nok",
        b"ok",
    ),
    "an empty 204": (b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", b""),
}


@pytest.mark.parametrize("name", list(REPLIES))
def test_every_framing_reaches_the_agent_whole(name: str) -> None:
    raw, body = REPLIES[name]
    for url in replying(raw):
        (reply,) = through(url)
        assert reply.status_code == (204 if b" 204 " in raw else 200)
        assert reply.content == body
        if name == "a folded header":
            assert reply.headers["X-Note"] == "one two"


BROKEN = {
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n", "not an HTTP reply: 'SSH-2.0-OpenSSH_9.6'"),
    "closed without answering": (b"", "it closed the connection without answering"),
    "cut mid-body": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        "broke off its reply: it closed the connection mid-reply",
    ),
    "a bad chunk size": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "a bad chunk size",
    ),
    "a negative chunk size": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nabc\r\n0\r\n\r\n",
        "a bad chunk size",
    ),
    "two Content-Lengths": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx",
        "a bad Content-Length: '1, 2'",
    ),
    "a header line without a name": (
        b"HTTP/1.1 200 OK\r\n: nameless\r\n\r\n",
        "not a header line: ': nameless'",
    ),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_reply_that_is_not_http_is_a_502_saying_why(name: str) -> None:
    raw, why = BROKEN[name]
    for url in replying(raw):
        (reply,) = through(url)
        assert reply.status_code == 502
        error = reply.json()["error"]
        assert error["type"] == "upstream_unreachable"
        assert why in error["message"]


def test_a_kept_alive_connection_serves_the_next_call() -> None:
    clients: list[tuple[str, int]] = []

    def handle(request: Request) -> Response:
        clients.append(request.client)
        return Response.json({"n": len(clients)})

    with LoopbackServer(handle) as upstream:
        replies = through(upstream.url, calls=3)
    assert [r.json()["n"] for r in replies] == [1, 2, 3]
    assert len(set(clients)) == 1  # one connection for the three calls


def test_a_reply_that_closes_its_connection_is_not_reused() -> None:
    clients: list[tuple[str, int]] = []

    def handle(request: Request) -> Response:
        clients.append(request.client)
        return Response.json({"n": len(clients)}, headers={"Connection": "close"})

    with LoopbackServer(handle) as upstream:
        replies = through(upstream.url, calls=2)
    assert [r.status_code for r in replies] == [200, 200]
    assert len(set(clients)) == 2
