"""Header blocks on the proxy's threads (:mod:`flakestorm.chaos.proxy.headers`): read as the
standard library reads them, well-formed or odd, at a fraction of the cost; other threads keep
the standard parser."""

from __future__ import annotations

import http.client
import io
import socket
import threading

import pytest
from support.server import LoopbackServer

from flakestorm.chaos.proxy.framing import serving
from flakestorm.chaos.proxy.headers import Headers, parse_headers
from flakestorm.chaos.proxy.server import ChaosProxy

BLOCKS = [
    b"Host: a\r\nContent-Type: application/json\r\n\r\n",
    b"Host: a\r\nX:  spaced  \r\nX: again\r\n\r\n",
    b"Host: a\nX: bare LF\n\n",
    b"X-Empty:\r\n\r\n",
    b"Host: caf\xe9\r\n\r\n",
    b"Host: a\r\n folded\r\n\r\n",  # obs-fold: the feed parser's
    b"Host a\r\nX: y\r\n\r\n",  # no colon: the rest is body to the feed parser
    b"Na me: x\r\n\r\n",
    b":no-name\r\n\r\n",
    b"From someone\r\nX: y\r\n\r\n",
    b"Host: a\rEvil: 1\r\n\r\n",  # a bare CR splits lines for the feed parser
    b"Content-Type: multipart/mixed; boundary=x\r\n\r\n",
    b"X: form\x0cfeed and \x1c separators\r\nHost: a\r\n\r\n",  # not line ends in HTTP
    b"X: a\r\nX: b\nHost: mixed ends\r\n\r\n",
    b"Host: a\r\n",  # ended before its blank line
    b"\r\n",
    b"",
]


@pytest.mark.parametrize("block", BLOCKS)
def test_a_header_block_reads_as_the_standard_library_reads_it(block: bytes) -> None:
    expected = http.client.parse_headers(io.BytesIO(block))
    got = parse_headers(io.BytesIO(block), Headers)
    assert got.items() == expected.items()
    assert [type(d) for d in got.defects] == [type(d) for d in expected.defects]
    for name in ("host", "X", "x-empty", "content-type", "absent"):
        assert got.get(name) == expected.get(name)
        assert got.get_all(name) == expected.get_all(name)


def test_lookups_follow_changes_to_the_headers() -> None:
    headers = parse_headers(io.BytesIO(b"A: 1\r\nB: 2\r\na: 3\r\n\r\n"), Headers)
    assert headers.get_all("a") == ["1", "3"]
    del headers["a"]
    assert headers.get("A") is None and headers.get_all("a", []) == []
    headers["a"] = "x"
    headers.replace_header("b", "y")
    assert (headers.get("a"), headers.get("B")) == ("x", "y")


def test_limits_are_the_standard_librarys() -> None:
    with pytest.raises(http.client.LineTooLong):
        parse_headers(io.BytesIO(b"X: " + b"a" * 70_000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException):
        parse_headers(io.BytesIO(b"X: a\r\n" * 101 + b"\r\n"))


def test_only_the_proxys_threads_use_it(upstream: LoopbackServer) -> None:
    with ChaosProxy(tools={"weather": upstream.url}):  # installed
        seen: list[type] = []

        def parse() -> None:
            seen.append(type(http.client.parse_headers(io.BytesIO(b"X: 1\r\n\r\n"))))

        thread = threading.Thread(target=parse)
        thread.start()
        thread.join()
        assert seen == [http.client.HTTPMessage]
        token = serving.set(True)
        try:
            assert type(http.client.parse_headers(io.BytesIO(b"X: 1\r\n\r\n"))) is Headers
        finally:
            serving.reset(token)


def test_a_folded_request_header_reaches_the_upstream_as_the_stdlib_reads_it(
    upstream: LoopbackServer,
) -> None:
    with (
        ChaosProxy(tools={"weather": upstream.url}) as proxy,
        socket.create_connection((proxy.host, proxy.port), timeout=5) as agent,
    ):
        agent.sendall(  # a client library would not write a fold: raw bytes
            b"GET /tools/weather/x HTTP/1.1\r\nHost: x\r\nX-Note: one\r\n two\r\n"
            b"Connection: close\r\n\r\n"
        )
        reply = http.client.HTTPResponse(agent)
        reply.begin()
        assert reply.status == 200
        reply.read()
        reply.close()
    expected = http.client.parse_headers(io.BytesIO(b"X-Note: one\r\n two\r\n\r\n"))
    assert upstream.requests[-1].headers.get("X-Note") == expected["X-Note"]
