"""Review of the chaos proxy: HTTP framing, header handling, streaming and cassette matching
defects, each against real loopback servers."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from support.server import LoopbackServer, Response

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.upstreams.cassette import RequestKey


class RawUpstream:
    """A one-request-per-connection upstream speaking raw bytes: ``script(conn, request)``."""

    def __init__(self, script: Callable[[socket.socket, bytes], None]) -> None:
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        break
                    data += got
                self.requests.append(data)
                with contextlib.suppress(OSError):
                    self.script(conn, data)

    def __enter__(self) -> RawUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sock.close()


def session() -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    return s


# ------------------------------------------------------------------ SSE without chunked framing


def test_sse_from_a_close_delimited_upstream_is_not_buffered() -> None:
    release = threading.Event()

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            b'data: {"first": true}\n\n'
        )
        release.wait(10)
        conn.sendall(b"data: [DONE]\n\n")

    with RawUpstream(script) as upstream, ChaosProxy(tools={"feed": upstream.url}) as proxy:
        try:
            with session().get(f"{proxy.url}/tools/feed/events", stream=True, timeout=5) as r:
                first = next(r.iter_lines())
                assert first == b'data: {"first": true}'
        finally:
            release.set()


# ------------------------------------------------------------------ headers


def test_duplicate_request_headers_all_reach_the_upstream() -> None:
    with LoopbackServer() as upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.putrequest("GET", "/tools/t/x")
        conn.putheader("X-Tag", "a")
        conn.putheader("X-Tag", "b")
        conn.endheaders()
        assert conn.getresponse().status == 200
        tags = [v for k, v in upstream.requests[0].headers.items() if k.lower() == "x-tag"]
        assert tags in (["a", "b"], ["a, b"])


def test_duplicate_set_cookie_headers_come_back_separately() -> None:
    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\nok"
        )

    with RawUpstream(script) as upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.request("GET", "/tools/t/x")
        response = conn.getresponse()
        assert response.msg.get_all("Set-Cookie") == ["a=1", "b=2"]
        assert response.read() == b"ok"


def test_gzip_reply_despite_identity_is_passed_decoded_with_its_length() -> None:
    payload = json.dumps({"v": "x" * 1000}).encode()
    packed = gzip.compress(payload)

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(packed), packed)
        )

    with RawUpstream(script) as upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.request("GET", "/tools/t/x")
        response = conn.getresponse()
        assert response.getheader("Content-Encoding") is None
        assert response.getheader("Content-Length") == str(len(payload))
        assert response.read() == payload


# ------------------------------------------------------------------ HEAD


def test_head_of_a_chunked_upstream_reply_does_not_claim_zero_length() -> None:
    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )

    with RawUpstream(script) as upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.request("HEAD", "/tools/t/x")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        assert response.getheader("Content-Length") is None  # unknown: not "0"
        conn.request("HEAD", "/tools/t/x")  # the connection is still usable
        assert conn.getresponse().status == 200


# ------------------------------------------------------------------ request bodies


def test_chunked_request_body_reaches_the_upstream_whole() -> None:
    upstream = LoopbackServer(lambda r: Response.json({"n": len(r.body)}))
    with upstream, ChaosProxy(tools={"t": upstream.url}) as proxy:
        r = session().post(f"{proxy.url}/tools/t/x", data=iter([b"hello ", b"world"]), timeout=5)
        assert r.json() == {"n": 11}
        assert upstream.requests[0].body == b"hello world"


# ------------------------------------------------------------------ cassette keys


def test_tool_request_bodies_that_differ_in_user_do_not_share_a_recording(
    tmp_path: Path,
) -> None:
    alice = RequestKey("tool:crm", "POST", "/lookup", "", b'{"user": "alice"}')
    bob = RequestKey("tool:crm", "POST", "/lookup", "", b'{"user": "bob"}')
    assert alice.digest != bob.digest
    llm_a = RequestKey("llm", "POST", "/v1/chat/completions", "", b'{"n": 1, "user": "a"}')
    llm_b = RequestKey("llm", "POST", "/v1/chat/completions", "", b'{"n": 1, "user": "b"}')
    assert llm_a.digest == llm_b.digest  # for the LLM, still a volatile field

    cassette = tmp_path / "crm.jsonl"
    crm = LoopbackServer(
        lambda r: Response.json({"plan": "gold" if b"alice" in r.body else "free"})
    )
    with crm, ChaosProxy(tools={"crm": crm.url}, record=cassette) as proxy:
        for user in ("alice", "bob"):
            session().post(f"{proxy.url}/tools/crm/lookup", json={"user": user}, timeout=5)
        dead = crm.url
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"crm": dead}) as proxy:
        plans = [
            session().post(f"{proxy.url}/tools/crm/lookup", json={"user": u}, timeout=5).json()
            for u in ("bob", "alice")
        ]
    assert plans == [{"plan": "free"}, {"plan": "gold"}]
