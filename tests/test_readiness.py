"""Readiness: TCP and health-endpoint polling with injected time."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from support.server import LoopbackServer, Request, Response

from flakestorm.agents.readiness import Waiting, host_port, probe, resolve_url, wait_ready
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import AgentNotReady


class FakeTime:
    """A clock that only moves when someone sleeps; ``on_sleep`` runs on each sleep."""

    def __init__(self, on_sleep: Callable[[int], None] = lambda n: None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self._on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        self._on_sleep(len(self.sleeps))


@pytest.fixture
def unlistened() -> Iterator[socket.socket]:
    """A bound socket that does not listen yet: connects are refused until ``listen()``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock


def test_tcp_readiness_succeeds_once_the_port_listens(unlistened: socket.socket) -> None:
    port = unlistened.getsockname()[1]
    config = AgentConfig(endpoint=f"http://127.0.0.1:{port}/invoke")
    assert "connection refused" in (probe(config) or "")

    def come_up(n: int) -> None:
        if n == 3:
            unlistened.listen()

    time = FakeTime(come_up)
    wait_ready(config, clock=time.clock, sleep=time.sleep)
    assert time.sleeps == [0.05, 0.1, 0.2]


def test_expiry_names_the_last_error_and_the_fix(unlistened: socket.socket) -> None:
    port = unlistened.getsockname()[1]
    config = AgentConfig(endpoint=f"http://127.0.0.1:{port}/invoke", ready_timeout=5000)
    time = FakeTime()
    with pytest.raises(AgentNotReady) as caught:
        wait_ready(config, clock=time.clock, sleep=time.sleep)
    message = str(caught.value)
    assert "not ready after 5000 ms (agent.ready_timeout)" in message
    assert f"TCP connect to 127.0.0.1:{port}: connection refused" in message
    assert "agent.health_endpoint" in message and "agent.start" in message
    assert max(time.sleeps) == 0.5
    assert sum(time.sleeps) == pytest.approx(5.0)


def test_timeout_ms_overrides_ready_timeout(unlistened: socket.socket) -> None:
    port = unlistened.getsockname()[1]
    time = FakeTime()
    with pytest.raises(AgentNotReady, match="after 300 ms"):
        wait_ready(
            AgentConfig(endpoint=f"http://127.0.0.1:{port}"),
            timeout_ms=300,
            clock=time.clock,
            sleep=time.sleep,
        )


def test_a_wait_reports_every_interval_what_it_tried_and_the_last_error(
    unlistened: socket.socket,
) -> None:
    port = unlistened.getsockname()[1]
    config = AgentConfig(endpoint=f"http://127.0.0.1:{port}/invoke", ready_timeout=35_000)
    time = FakeTime()
    heard: list[Waiting] = []
    with pytest.raises(AgentNotReady):
        wait_ready(config, clock=time.clock, sleep=time.sleep, on_waiting=heard.append)
    assert [round(w.elapsed_s) for w in heard] == [10, 20, 30]
    assert all(w.total_s == 35 for w in heard)
    assert heard[0].attempts < heard[1].attempts < heard[2].attempts
    refused = f"TCP connect to 127.0.0.1:{port}: connection refused"
    assert all(w.last_error == refused for w in heard)
    assert heard[0].line() == (
        f"waiting for the agent: 10 s of 35 s (agent.ready_timeout), {heard[0].attempts} "
        f"attempts, last error: {refused}"
    )


def test_the_interval_is_injectable_and_a_quick_agent_is_not_reported(
    unlistened: socket.socket,
) -> None:
    port = unlistened.getsockname()[1]
    config = AgentConfig(endpoint=f"http://127.0.0.1:{port}/invoke", ready_timeout=2000)
    heard: list[Waiting] = []
    time = FakeTime()
    with pytest.raises(AgentNotReady):
        wait_ready(
            config, clock=time.clock, sleep=time.sleep, on_waiting=heard.append, interval_s=0.5
        )
    assert [w.elapsed_s for w in heard] == pytest.approx([0.75, 1.25, 1.75])
    assert heard[0].line().startswith("waiting for the agent: 0.8 s of 2.0 s")

    def come_up(n: int) -> None:
        if n == 3:
            unlistened.listen()

    heard.clear()
    time = FakeTime(come_up)
    wait_ready(config, clock=time.clock, sleep=time.sleep, on_waiting=heard.append)
    assert heard == []


def test_a_reported_wait_ends_with_the_agent_ready(unlistened: socket.socket) -> None:
    port = unlistened.getsockname()[1]
    config = AgentConfig(endpoint=f"http://127.0.0.1:{port}/invoke")

    def come_up(n: int) -> None:
        if n == 25:  # 11.25 s in: one progress report (at 10.25 s) before
            unlistened.listen()

    heard: list[Waiting] = []
    time = FakeTime(come_up)
    wait_ready(config, clock=time.clock, sleep=time.sleep, on_waiting=heard.append)
    assert [w.ready for w in heard] == [False, True]
    assert heard[-1].line() == "the agent is ready after 11 s (26 attempts)"


def test_health_endpoint_must_answer_2xx() -> None:
    healthy = threading.Event()

    def health(request: Request) -> Response:
        if request.path != "/healthz":
            return Response(404)
        return Response.text("ok") if healthy.is_set() else Response.text("starting", 503)

    with LoopbackServer(health) as server:
        config = AgentConfig(
            endpoint=server.url_for("/invoke"),
            health_endpoint="/healthz",
            headers={"Authorization": "Bearer x"},
        )
        assert probe(config) == f"GET {server.url}/healthz returned HTTP 503"
        time = FakeTime(lambda n: healthy.set() if n == 2 else None)
        wait_ready(config, clock=time.clock, sleep=time.sleep)
        assert len(time.sleeps) == 2
        assert all(r.method == "GET" for r in server.requests)
        assert server.requests[0].headers["Authorization"] == "Bearer x"


def test_health_endpoint_expiry_message(unlistened: socket.socket) -> None:
    port = unlistened.getsockname()[1]
    config = AgentConfig(
        endpoint=f"http://127.0.0.1:{port}/invoke",
        health_endpoint=f"http://127.0.0.1:{port}/health",
        ready_timeout=1000,
    )
    time = FakeTime()
    with pytest.raises(AgentNotReady) as caught:
        wait_ready(config, clock=time.clock, sleep=time.sleep)
    assert f"GET http://127.0.0.1:{port}/health: connection refused" in str(caught.value)
    assert "does agent.health_endpoint answer 2xx" in str(caught.value)


def test_python_agents_are_ready_at_once() -> None:
    time = FakeTime()
    wait_ready(
        AgentConfig(type=AgentType.PYTHON, endpoint="mod:agent"),
        clock=time.clock,
        sleep=time.sleep,
    )
    assert time.sleeps == []


def test_check_can_give_up_early(unlistened: socket.socket) -> None:
    port = unlistened.getsockname()[1]

    def check() -> None:
        if time.sleeps:
            raise AgentNotReady("process exited")

    time = FakeTime()
    with pytest.raises(AgentNotReady, match="process exited"):
        wait_ready(
            AgentConfig(endpoint=f"http://127.0.0.1:{port}"),
            clock=time.clock,
            sleep=time.sleep,
            check=check,
        )
    assert len(time.sleeps) == 1


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/reset", "http://h:1/reset"),
        ("reset", "http://h:1/reset"),
        ("https://other/r", "https://other/r"),
    ],
)
def test_resolve_url(url: str, expected: str) -> None:
    assert resolve_url("http://h:1/api/invoke?x=1", url) == expected


def test_host_port_defaults() -> None:
    assert host_port("http://example.com/x") == ("example.com", 80)
    assert host_port("https://example.com/x") == ("example.com", 443)
    assert host_port("http://[::1]:9/x") == ("::1", 9)
