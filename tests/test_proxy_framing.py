"""HTTP/1.1 framing of the proxy (:mod:`flakestorm.chaos.proxy.framing`): malformed requests
answered in JSON, request bodies (limits, chunked), ``Expect: 100-continue``, reply headers and
HEAD, against real loopback servers."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from support.proxy_rig import assert_still_serving, connection, session
from support.raw_server import RawUpstream
from support.server import LoopbackServer, Response

from flakestorm.chaos.proxy.server import ChaosProxy


def raw_exchange(proxy: ChaosProxy, data: bytes) -> bytes:
    """Send raw bytes, read until the proxy closes the connection."""
    with socket.create_connection((proxy.host, proxy.port), timeout=5) as s:
        sender = threading.Thread(target=_send_quietly, args=(s, data))
        sender.start()
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        sender.join()
    return b"".join(chunks)


def _send_quietly(s: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the proxy may answer and close before reading it all
        s.sendall(data)


def json_error(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"application/json" in head
    return status, json.loads(body)


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /x HTTP/9.9\r\n\r\n", 505),
        (b"GET /x HTTP/1.1\r\nContent-Length: nope\r\n\r\n", 400),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /x HTTP/1.1\r\nX-Big: " + b"a" * (1024 * 1024) + b"\r\n\r\n", 431),
        (b"GET /x HTTP/1.1\r\n" + b"X-Many: aaaaaaaaaaaaaaaaaaaa\r\n" * 40_000 + b"\r\n", 431),
        (b"BREW /pot HTTP/1.1\r\n\r\n", 501),
    ],
    ids=[
        "request-line",
        "version",
        "content-length",
        "long-line",
        "1MiB-header",
        "1MiB-headers",
        "method",
    ],
)
def test_malformed_requests_get_a_json_error(proxy: ChaosProxy, data: bytes, status: int) -> None:
    got, body = json_error(raw_exchange(proxy, data))
    assert got == status
    assert body["error"]["type"] and body["error"]["message"]
    assert_still_serving(proxy)


def test_random_bytes(proxy: ChaosProxy) -> None:
    rng = __import__("random").Random(1)
    for _ in range(5):
        data = bytes(rng.randrange(256) for _ in range(4096)) + b"\r\n\r\n"
        raw = raw_exchange(proxy, data)
        if raw:  # the proxy answers what it can parse as a request line, in JSON
            status, _ = json_error(raw)
            assert 400 <= status < 600
    assert_still_serving(proxy)


def test_request_body_limit(upstream: LoopbackServer) -> None:
    with ChaosProxy(tools={"weather": upstream.url}, max_request_bytes=1000) as proxy:
        response = requests.post(f"{proxy.url}/tools/weather/x", data=b"x" * 5000, timeout=5)
        assert response.status_code == 413
        assert response.json()["error"]["type"] == "request_too_large"
        chunked = requests.post(
            f"{proxy.url}/tools/weather/x", data=iter([b"x" * 600, b"y" * 600]), timeout=5
        )
        assert chunked.status_code == 413
        small = requests.post(f"{proxy.url}/tools/weather/x", data=iter([b"ab", b"cd"]), timeout=5)
        assert small.status_code == 200 and upstream.requests[-1].body == b"abcd"


def test_chunked_request_body_reaches_the_upstream_whole() -> None:
    upstream = LoopbackServer(lambda r: Response.json({"n": len(r.body)}))
    with upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        r = session().post(f"{proxy.url}/tools/t/x", data=iter([b"hello ", b"world"]), timeout=5)
        assert r.json() == {"n": 11}
        assert upstream.requests[0].body == b"hello world"


def test_expect_100_continue(proxy: ChaosProxy, upstream: LoopbackServer) -> None:
    with socket.create_connection((proxy.host, proxy.port), timeout=5) as s:
        s.sendall(
            b"POST /tools/weather/x HTTP/1.1\r\nHost: p\r\nContent-Length: 4\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        assert s.recv(100).startswith(b"HTTP/1.1 100")
        s.sendall(b"body")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
    assert upstream.requests[-1].body == b"body"


def test_duplicate_set_cookie_headers_come_back_separately() -> None:
    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\nok"
        )

    with (
        RawUpstream(script) as upstream,
        ChaosProxy(tools={"t": upstream.url}) as proxy,
        connection(proxy) as conn,
    ):
        conn.request("GET", "/tools/t/x")
        response = conn.getresponse()
        assert response.msg.get_all("Set-Cookie") == ["a=1", "b=2"]
        assert response.read() == b"ok"


def test_head_of_a_chunked_upstream_reply_does_not_claim_zero_length() -> None:
    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )

    with (
        RawUpstream(script) as upstream,
        ChaosProxy(tools={"t": upstream.url}) as proxy,
        connection(proxy) as conn,
    ):
        conn.request("HEAD", "/tools/t/x")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        assert response.getheader("Content-Length") is None  # unknown: not "0"
        conn.request("HEAD", "/tools/t/x")  # the connection is still usable
        assert conn.getresponse().status == 200


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="Linux scheduling policies")
def test_connection_threads_do_not_preempt_the_agent(proxy: ChaosProxy) -> None:
    """The thread serving an agent's connection is ``SCHED_BATCH``: woken by a request or a
    reply, it waits for a free core instead of preempting the agent or its tools. The
    process's other threads (a run's own) keep their policy."""
    before = set(threading.enumerate())
    with session() as s:  # kept alive: its serving thread still runs after the call
        assert s.get(f"{proxy.url}/tools/weather/ok", timeout=5).json()["path"] == "/ok"
        name = f"flakestorm-proxy-{proxy.port}-connection"
        serving = [t for t in set(threading.enumerate()) - before if t.name == name]
        assert len(serving) == 1
        assert serving[0].native_id is not None
        assert os.sched_getscheduler(serving[0].native_id) == os.SCHED_BATCH
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


_WATCHDOG_STARTED_BY_THE_PROXY = """
import os, threading
import requests
from support.server import LoopbackServer
from support.proxy_rig import weather
from flakestorm.chaos.proxy.server import ChaosProxy
with LoopbackServer(weather) as upstream, ChaosProxy(tools={"weather": upstream.url}) as proxy:
    assert not [t for t in threading.enumerate() if t.name == "flakestorm-deadlines"]
    requests.get(f"{proxy.url}/tools/weather/ok", timeout=5).raise_for_status()
    (watchdog,) = [t for t in threading.enumerate() if t.name == "flakestorm-deadlines"]
    print(os.sched_getscheduler(watchdog.native_id) == os.sched_getscheduler(0))
"""


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="Linux scheduling policies")
def test_the_deadline_watchdog_keeps_the_process_policy_when_the_proxy_starts_it() -> None:
    """The one deadline watchdog of a process also cuts the run's own agent calls: started by
    a proxy's (batch) connection thread, it still runs under the process's policy."""
    tests = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", _WATCHDOG_STARTED_BY_THE_PROXY],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": tests},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"]
