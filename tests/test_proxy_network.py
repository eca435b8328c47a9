"""The network upstream (:mod:`flakestorm.chaos.proxy.upstreams.network`): headers forwarded,
replies passed back decoded, streams not buffered, and upstream failures as 502/504 (never
faults), against real loopback servers."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Callable

import requests
from support.proxy_rig import (
    assert_still_serving,
    connection,
    fault,
    last,
    scenario,
    session,
    weather,
)
from support.raw_server import RawUpstream
from support.server import LoopbackServer, Response

from flakestorm.chaos.proxy.server import ChaosProxy


def test_duplicate_request_headers_all_reach_the_upstream() -> None:
    with (
        LoopbackServer() as upstream,
        ChaosProxy(tools={"t": upstream.url}) as proxy,
        connection(proxy) as conn,
    ):
        conn.putrequest("GET", "/tools/t/x")
        conn.putheader("X-Tag", "a")
        conn.putheader("X-Tag", "b")
        conn.endheaders()
        assert conn.getresponse().status == 200
        tags = [v for k, v in upstream.requests[0].headers.items() if k.lower() == "x-tag"]
        assert tags in (["a", "b"], ["a, b"])


def test_gzip_reply_despite_identity_is_passed_decoded_with_its_length() -> None:
    payload = json.dumps({"v": "x" * 1000}).encode()
    packed = gzip.compress(payload)

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(packed), packed)
        )

    with (
        RawUpstream(script) as upstream,
        ChaosProxy(tools={"t": upstream.url}) as proxy,
        connection(proxy) as conn,
    ):
        conn.request("GET", "/tools/t/x")
        response = conn.getresponse()
        assert response.getheader("Content-Encoding") is None
        assert response.getheader("Content-Length") == str(len(payload))
        assert response.read() == payload


def first_event_then(
    release: threading.Event, wait_s: float, rest: bytes = b""
) -> Callable[[socket.socket, bytes], None]:
    """A close-delimited event stream's script: the first event at once, then ``rest`` once
    ``release`` is set (or ``wait_s`` has passed)."""

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            b'data: {"first": true}\n\n'
        )
        release.wait(wait_s)
        if rest:
            conn.sendall(rest)

    return script


def test_sse_from_a_close_delimited_upstream_is_not_buffered() -> None:
    release = threading.Event()
    script = first_event_then(release, 10, b"data: [DONE]\n\n")
    with RawUpstream(script) as upstream, ChaosProxy(tools={"feed": upstream.url}) as proxy:
        try:
            with session().get(f"{proxy.url}/tools/feed/events", stream=True, timeout=5) as r:
                first = next(r.iter_lines())
                assert first == b'data: {"first": true}'
        finally:
            release.set()


def test_a_stream_that_stops_is_cut_after_the_upstream_timeout() -> None:
    """A stream outlives its exchange's deadline: each of its reads is bounded instead, and a
    stream that stops sending is cut there (the agent sees the connection end), logged why."""
    release = threading.Event()
    with (
        RawUpstream(first_event_then(release, 30)) as upstream,
        ChaosProxy(tools={"feed": upstream.url}, upstream_timeout_s=0.5) as proxy,
    ):
        try:
            with session().get(f"{proxy.url}/tools/feed/events", stream=True, timeout=10) as r:
                lines = r.iter_lines()
                assert next(lines) == b'data: {"first": true}'
                started = time.monotonic()
                try:
                    rest = list(lines)
                except requests.RequestException:
                    rest = []
                elapsed = time.monotonic() - started
        finally:
            release.set()
        assert b"data: [DONE]" not in rest
        assert 0.4 <= elapsed < 2.0
        item = last(proxy)
        assert "stopped sending for 0.5 s" in (item.upstream_error or "")


def test_response_body_limit(upstream: LoopbackServer) -> None:
    upstream.handler = lambda r: Response(200, b"x" * 10_000)
    with ChaosProxy(tools={"weather": upstream.url}, max_response_bytes=1000) as proxy:
        response = requests.get(f"{proxy.url}/tools/weather/x", timeout=5)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "upstream_too_large"


def test_upstream_down_is_a_502_not_a_fault(upstream: LoopbackServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with ChaosProxy(tools={"weather": upstream.url, "dead": dead}) as proxy:
        proxy.activate(scenario(fault("slow", tool="dead", delay_ms=1)))
        response = requests.get(f"{proxy.url}/tools/dead/x", timeout=5)
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["type"] == "upstream_unreachable" and "refused" in error["message"]
        item = last(proxy)
        assert item.upstream_error is not None and item.upstream_error.startswith(
            "upstream_unreachable"
        )
        assert item.fired == ("tool_faults[0] slow(1 ms) on dead",)  # the slow fault, not the 502
        assert item.status == 502 and item.upstream_status is None
        # forward mode too
        forward = requests.get(f"{dead}/x", proxies={"http": proxy.url}, timeout=5)
        assert forward.status_code == 502
        assert_still_serving(proxy)


def test_hanging_upstream_is_a_504(upstream: LoopbackServer) -> None:
    upstream.handler = upstream.hang
    with ChaosProxy(tools={"weather": upstream.url}, upstream_timeout_s=0.2) as proxy:
        started = time.perf_counter()
        response = requests.get(f"{proxy.url}/tools/weather/x", timeout=5)
        assert time.perf_counter() - started < 3
        assert response.status_code == 504
        assert response.json()["error"]["type"] == "upstream_timeout"
        item = last(proxy)
        assert item.upstream_error is not None and item.upstream_error.startswith(
            "upstream_timeout"
        )
        assert item.fired == ()
        upstream.handler = weather
        assert_still_serving(proxy)


def test_upstream_dropping_mid_body_is_a_502(upstream: LoopbackServer) -> None:
    upstream.handler = lambda r: Response(200, b"x" * 1000, stall_after=10)
    with ChaosProxy(tools={"weather": upstream.url}, upstream_timeout_s=0.2) as proxy:
        response = requests.get(f"{proxy.url}/tools/weather/x", timeout=5)
    assert response.status_code == 504  # it stalled mid-body: a read timeout


def test_calls_to_one_upstream_reuse_one_kept_alive_connection(upstream: LoopbackServer) -> None:
    with ChaosProxy(tools={"weather": upstream.url}) as proxy, session() as agent:
        for _ in range(5):
            assert agent.get(f"{proxy.url}/tools/weather/x", timeout=5).status_code == 200
    assert len({request.client for request in upstream.requests}) == 1


def test_an_upstream_connection_closed_while_idle_is_not_reused() -> None:
    closed = threading.Event()

    def script(conn: socket.socket, request: bytes) -> None:  # keep-alive reply, then close
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
        conn.close()
        closed.set()

    with (
        RawUpstream(script) as upstream,
        ChaosProxy(tools={"t": upstream.url}) as proxy,
        session() as agent,
    ):
        assert agent.get(f"{proxy.url}/tools/t/a", timeout=5).text == "ok"
        assert closed.wait(5)
        second = agent.get(f"{proxy.url}/tools/t/b", timeout=5)
        assert (second.status_code, second.text) == (200, "ok")
        assert len(upstream.requests) == 2 and last(proxy).upstream_error is None


def test_a_compressed_reply_larger_than_the_limit_once_decoded_is_a_502() -> None:
    packed = gzip.compress(b"x" * 100_000)  # a few hundred bytes on the wire

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (len(packed), packed)
        )

    with (
        RawUpstream(script) as upstream,
        ChaosProxy(tools={"t": upstream.url}, max_response_bytes=10_000) as proxy,
    ):
        response = requests.get(f"{proxy.url}/tools/t/x", timeout=5)
        assert response.status_code == 502
        assert response.json()["error"]["type"] == "upstream_too_large"


def test_a_deflate_reply_without_its_zlib_header_is_passed_decoded() -> None:
    squeezer = zlib.compressobj(wbits=-zlib.MAX_WBITS)  # raw deflate, as some servers send
    packed = squeezer.compress(b'{"v": 1}') + squeezer.flush()

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (len(packed), packed)
        )

    with RawUpstream(script) as upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        response = requests.get(f"{proxy.url}/tools/t/x", timeout=5)
        assert (response.status_code, response.json()) == (200, {"v": 1})
