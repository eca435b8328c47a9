"""Wall-clock deadlines (agents/deadline.py): an agent, a reset and a proxy upstream that trickle
their reply (1 byte every 100 ms), or hang after the headers, are cut at the timeout, not held
for as long as the server keeps each read short."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from support.raw_server import RawUpstream

from flakestorm.agents import Call
from flakestorm.agents.deadline import deadline
from flakestorm.agents.http import HttpAgent
from flakestorm.agents.request import RequestShape
from flakestorm.agents.reset import EndpointReset
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import AgentConfig
from flakestorm.engine.runner import run_phases
from flakestorm.errors import AgentErrorKind, HarnessError
from flakestorm.loader import load_config_text
from flakestorm.results.model import Status

TIMEOUT_MS = 1000
SLACK_S = 0.5
"""An invocation must end within its timeout plus this."""

Script = Callable[[socket.socket, bytes], None]


def trickling(head: bytes, body: bytes, released: threading.Event, gap_s: float = 0.1) -> Script:
    """Send ``head`` whole, then ``body`` one byte every ``gap_s`` (a server pacing itself)."""

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(head)
        for byte in body:
            if released.wait(gap_s):
                return
            conn.sendall(bytes([byte]))

    return script


def header_trickling(released: threading.Event) -> Script:
    """The status line and headers themselves one byte every 100 ms."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 200

    def script(conn: socket.socket, request: bytes) -> None:
        for byte in head:
            if released.wait(0.1):
                return
            conn.sendall(bytes([byte]))

    return script


def hanging_after_headers(released: threading.Event) -> Script:
    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n"
        )
        released.wait(60)

    return script


BODY = b'{"output": "' + b"a" * 300 + b'"}'
SHAPES = {
    "content-length body": lambda released: trickling(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(BODY)}\r\n\r\n".encode(),
        BODY,
        released,
    ),
    "close-delimited body": lambda released: trickling(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
        BODY,
        released,
    ),
    "chunked body": lambda released: trickling(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"".join(b"1\r\n" + bytes([b]) + b"\r\n" for b in BODY) + b"0\r\n\r\n",
        released,
    ),
    "trickled headers": header_trickling,
    "hang after headers": hanging_after_headers,
}


@pytest.fixture(params=list(SHAPES))
def slow_server(request: pytest.FixtureRequest) -> Iterator[RawUpstream]:
    released = threading.Event()
    with RawUpstream(SHAPES[request.param](released)) as server:
        yield server
        released.set()


def test_an_agent_invocation_ends_within_its_timeout(slow_server: RawUpstream) -> None:
    agent = HttpAgent(AgentConfig(endpoint=f"{slow_server.url}/chat", timeout=TIMEOUT_MS))
    started = time.monotonic()
    with agent:
        reply = agent.invoke("hi")
    elapsed = time.monotonic() - started
    assert reply.error is AgentErrorKind.TIMEOUT, reply
    assert f"within {TIMEOUT_MS} ms (agent.timeout)" in (reply.error_message or "")
    assert reply.output is None
    assert elapsed < TIMEOUT_MS / 1000 + SLACK_S


def test_a_reset_ends_within_the_timeout(slow_server: RawUpstream) -> None:
    reset = EndpointReset(f"{slow_server.url}/reset", TIMEOUT_MS)
    started = time.monotonic()
    try:
        with pytest.raises(HarnessError, match=r"reset failed: POST .*/reset"):
            reset.reset()
    finally:
        reset.close()
    assert time.monotonic() - started < TIMEOUT_MS / 1000 + SLACK_S


def test_a_proxy_upstream_call_ends_within_the_upstream_timeout(slow_server: RawUpstream) -> None:
    with ChaosProxy(tools={"slow": slow_server.url}, upstream_timeout_s=TIMEOUT_MS / 1000) as proxy:
        started = time.monotonic()
        response = requests.get(f"{proxy.url}/tools/slow/x", timeout=30)
        elapsed = time.monotonic() - started
    assert response.status_code == 504
    assert response.json()["error"]["type"] == "upstream_timeout"
    assert elapsed < TIMEOUT_MS / 1000 + SLACK_S


def test_a_fast_trickle_that_finishes_in_time_is_a_reply() -> None:
    released = threading.Event()
    body = b'{"output": "done"}'
    script = trickling(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode(),
        body,
        released,
        gap_s=0.005,
    )
    with RawUpstream(script) as server:
        agent = HttpAgent(AgentConfig(endpoint=f"{server.url}/chat", timeout=5000))
        with agent:
            reply = agent.invoke("hi")
        released.set()
    assert reply.error is None and reply.output == "done"


def test_a_request_level_mutation_ends_within_the_timeout(slow_server: RawUpstream) -> None:
    """The raw-socket sender of request-level mutations (agents/wire.py) is cut at the same
    wall-clock deadline: a reply trickled one byte every 100 ms is a hang, not a reply."""
    agent = HttpAgent(AgentConfig(endpoint=f"{slow_server.url}/chat", timeout=TIMEOUT_MS))
    started = time.monotonic()
    with agent:
        reply = agent.invoke("hi", Call(request=RequestShape(http_version="1.0")))
    elapsed = time.monotonic() - started
    assert reply.error is AgentErrorKind.TIMEOUT, reply
    assert "(agent.timeout)" in (reply.error_message or "")
    assert reply.output is None
    assert elapsed < TIMEOUT_MS / 1000 + SLACK_S


def test_a_trickled_reply_fails_a_request_level_mutation_as_a_hang(tmp_path: Path) -> None:
    released = threading.Event()
    script = SHAPES["content-length body"](released)
    with RawUpstream(script) as server:
        doc = {
            "agent": {"endpoint": f"{server.url}/chat", "timeout": TIMEOUT_MS},
            "golden_prompts": ["hi"],
            "invariants": [{"type": "output_not_empty"}],
            "mutations": {"types": ["protocol_level_attack"], "count": 1},
        }
        try:
            result = run_phases(load_config_text(json.dumps(doc), base_dir=tmp_path), ["mutation"])
        finally:
            released.set()
    [mutation] = result.phases["mutation"].mutations
    assert (mutation.status, mutation.error) == (Status.FAILED, "timeout"), mutation
    assert mutation.latency_ms < TIMEOUT_MS + SLACK_S * 1000


def test_a_short_deadline_is_cut_on_time_while_a_long_one_is_watched() -> None:
    """The watchdog sleeps until the earliest deadline it knows of (at most a second): a sooner
    one, started while a long exchange is watched, must wake it."""
    long_pair, short_pair = socket.socketpair(), socket.socketpair()
    try:
        with deadline(60) as long_limit:
            long_limit.attach(long_pair[0])
            started = time.monotonic()
            with deadline(0.3) as short_limit:
                short_limit.attach(short_pair[0])
                assert short_pair[0].recv(1) == b""  # blocks until the watchdog shuts it down
            elapsed = time.monotonic() - started
            assert short_limit.expired and not long_limit.expired
        assert 0.3 <= elapsed < 0.3 + SLACK_S
    finally:
        for sock in (*long_pair, *short_pair):
            sock.close()
