"""An agent's requests as the proxy reads them (:mod:`flakestorm.chaos.proxy.inbound`), sent as
raw bytes to a real proxy in front of a loopback tool: what reaches the tool, what is refused
(in JSON, naming what is wrong), and how the connection goes on."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from support.proxy_rig import assert_still_serving, upstream  # noqa: F401 (a fixture)
from support.server import LoopbackServer

from flakestorm.chaos.proxy.server import ChaosProxy


@pytest.fixture
def proxy(upstream: LoopbackServer) -> Iterator[ChaosProxy]:  # noqa: F811
    with ChaosProxy(tools={"weather": upstream.url}) as p:
        yield p


class _OneReader:
    """One buffered reader of a connection for every reply read off it: a reply read through a
    reader of its own may buffer the next reply's bytes, which the next reader then never sees
    (the replies arrive in one segment on a busy machine). Closing a reply keeps it open."""

    def __init__(self, agent: socket.socket) -> None:
        self._file = agent.makefile("rb")

    def makefile(self, *args: object, **kwargs: object) -> _OneReader:
        return self

    def close(self) -> None:
        pass

    def release(self) -> None:
        self._file.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def replies(proxy: ChaosProxy, data: bytes, count: int) -> list[tuple[int, dict[str, str], Any]]:
    """Send ``data`` on one connection; read ``count`` replies (status, headers, JSON body)."""
    with socket.create_connection((proxy.host, proxy.port), timeout=5) as agent:
        agent.sendall(data)
        reader = _OneReader(agent)
        out = []
        for _ in range(count):
            reply = http.client.HTTPResponse(reader)  # type: ignore[arg-type]
            reply.begin()
            out.append((reply.status, dict(reply.getheaders()), json.loads(reply.read())))
        reader.release()
        return out


def one(proxy: ChaosProxy, data: bytes) -> tuple[int, dict[str, str], Any]:
    (reply,) = replies(proxy, data, 1)
    return reply


def reaching_the_tool(proxy: ChaosProxy, tool: LoopbackServer, head: bytes) -> Any:
    """The headers the tool got for a GET with the header lines ``head``."""
    status, _, _ = one(proxy, b"GET /tools/weather/x HTTP/1.1\r\n" + head + b"\r\n")
    assert status == 200
    return tool.requests[-1].headers


def test_a_folded_header_reaches_the_tool_as_one_value(
    proxy: ChaosProxy,
    upstream: LoopbackServer,  # noqa: F811
) -> None:
    head = b"Host: x\r\nX-Note: one\r\n  two\r\nConnection: close\r\n"
    assert reaching_the_tool(proxy, upstream, head).get("X-Note") == "one two"


@pytest.mark.parametrize(
    ("block", "named"),
    [
        (b"Host x\r\n", "request header line 1 is not `Name: value`: 'Host x'"),
        (b"Host: x\r\nNa me: y\r\n", "request header line 2 is not `Name: value`: 'Na me: y'"),
        (b"Host : x\r\n", "request header line 1 is not `Name: value`: 'Host : x'"),
        (b"Host: a\rEvil: 1\r\n", "request header line 1"),
        (b"Host: a\x00b\r\n", "request header line 1"),
    ],
    ids=["no-colon", "space-in-name", "space-before-colon", "bare-CR", "NUL"],
)
def test_a_header_line_that_is_not_one_is_a_400_naming_it(
    proxy: ChaosProxy, block: bytes, named: str
) -> None:
    status, headers, body = one(proxy, b"GET /tools/weather/x HTTP/1.1\r\n" + block + b"\r\n")
    assert status == 400
    assert headers["Connection"] == "close"
    assert body["error"]["type"] == "bad_request"
    assert named in body["error"]["message"]
    assert_still_serving(proxy)


def test_header_values_come_through_as_sent(
    proxy: ChaosProxy,
    upstream: LoopbackServer,  # noqa: F811
) -> None:
    got = reaching_the_tool(
        proxy,
        upstream,
        b"Host: x\nX-Empty:\nX-Spaced:   a b  \r\nX-Latin: caf\xe9\r\nX-Twice: 1\r\n"
        b"x-twice: 2\r\nConnection: close\n",  # bare LF line ends too
    )
    assert got.get("X-Empty") == ""
    assert got.get("X-Spaced") == "a b"
    assert got.get("X-Latin") == "café"
    assert got.get("X-Twice") == "1, 2"  # one value per name upstream, joined


@pytest.mark.parametrize(
    ("data", "status", "kind"),
    [
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "request_line_too_long"),
        (b"GET /x HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431, "headers_too_large"),
        (b"GET /x HTTP/1.1\r\n" + b"X-N: 1\r\n" * 101 + b"\r\n", 431, "headers_too_large"),
        (b"GET /x HTTP/2.0\r\n\r\n", 505, "http_version_not_supported"),
        (b"GET /x HTTP/1\r\n\r\n", 400, "bad_request"),
        (b"GET /x\r\n\r\n", 400, "bad_request"),
        (b"TRACE /x HTTP/1.1\r\n\r\n", 501, "unsupported_method"),
    ],
    ids=["long-line", "long-header", "101-headers", "http2", "version", "http0.9", "trace"],
)
def test_limits_and_versions(proxy: ChaosProxy, data: bytes, status: int, kind: str) -> None:
    got, headers, body = one(proxy, data)
    assert (got, body["error"]["type"]) == (status, kind)
    assert headers["Connection"] == "close"
    assert_still_serving(proxy)


def test_pipelined_requests_are_answered_in_order(
    proxy: ChaosProxy,
    upstream: LoopbackServer,  # noqa: F811
) -> None:
    data = (
        b"\r\n"  # an empty line before a request is skipped
        b"POST /tools/weather/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
        b"POST /tools/weather/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\ntwo\r\n0\r\nX-Trailer: t\r\n\r\n"
        b"GET /tools/weather/c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    got = replies(proxy, data, 3)
    assert [body["path"] for _, _, body in got] == ["/a", "/b", "/c"]
    assert [r.body for r in upstream.requests[-3:]] == [b"one", b"two", b""]


@pytest.mark.parametrize(
    ("version", "connection", "kept"),
    [
        ("HTTP/1.1", None, True),
        ("HTTP/1.1", "close", False),
        ("HTTP/1.1", "TE, Close", False),
        ("HTTP/1.0", None, False),
        ("HTTP/1.0", "keep-alive", True),
    ],
)
def test_the_connection_is_kept_as_the_request_asks(
    proxy: ChaosProxy, version: str, connection: str | None, kept: bool
) -> None:
    header = f"Connection: {connection}\r\n" if connection else ""
    request = f"GET /tools/weather/x {version}\r\nHost: x\r\n{header}\r\n".encode()
    with socket.create_connection((proxy.host, proxy.port), timeout=5) as agent:
        agent.sendall(request)
        reply = http.client.HTTPResponse(agent)
        reply.begin()
        reply.read()
        assert reply.status == 200
        agent.sendall(request)
        try:
            second = agent.recv(65536)
        except ConnectionResetError:
            second = b""
        assert second.startswith(b"HTTP/1.1 200") is kept
        assert (second == b"") is not kept


@pytest.mark.parametrize("size", [b"zz", b"-1", b"3"], ids=["not-hex", "negative", "too-long"])
def test_a_bad_chunked_body_is_a_400(proxy: ChaosProxy, size: bytes) -> None:
    status, headers, body = one(
        proxy,
        b"POST /tools/weather/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + size
        + b"\r\nabcdef\r\n0\r\n\r\n",
    )
    assert (status, body["error"]["type"]) == (400, "bad_request")
    assert body["error"]["message"] == "bad chunked request body"
    assert headers["Connection"] == "close"
    assert_still_serving(proxy)
