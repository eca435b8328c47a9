"""CONNECT tunnels through the chaos proxy (HTTPS_PROXY traffic): relayed as bytes, and
refused, delayed, held or reset by tool faults that match the host; a tool-result attack on a
tunnel cannot read its result, so it is not applied, and an attack only ever seen through
tunnels is not delivered (SPEC §10)."""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.faults.decisions import ActiveScenario, Target
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.tunnel import unreadable
from flakestorm.config import ContextAttack, ToolFault
from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config
from flakestorm.results.model import Status


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield "127.0.0.1", server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def proxy() -> Iterator[ChaosProxy]:
    with ChaosProxy() as p:
        yield p


def connect(proxy: ChaosProxy, host: str, port: int) -> tuple[socket.socket, bytes]:
    """Open a tunnel; return the socket and the proxy's answer to the CONNECT (head + body)."""
    s = socket.create_connection((proxy.host, proxy.port), timeout=5)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
    if not answer:
        return s, b""
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    while len(body) < length:
        body += s.recv(65536)
    return s, head + b"\r\n\r\n" + body


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer else 0


def faulty(**kw: Any) -> ActiveScenario:
    return ActiveScenario("tls", 1, tool_faults=(ToolFault.model_validate({"tool": "bank", **kw}),))


def test_tunnel_relays_bytes_both_ways(proxy: ChaosProxy, echo: tuple[str, int]) -> None:
    s, answer = connect(proxy, *echo)
    with s:
        assert status_of(answer) == 200
        for message in (b"hello", b"\x16\x03\x01 binary \x00\xff" * 1000):
            s.sendall(message)
            got = b""
            while len(got) < len(message):
                got += s.recv(65536)
            assert got == message
    item = proxy.log.snapshot()[-1]
    assert (item.target, item.method, item.url, item.status) == (
        Target.OTHER,
        "CONNECT",
        f"{echo[0]}:{echo[1]}",
        200,
    )


def test_http_through_a_tunnel(proxy: ChaosProxy) -> None:
    with LoopbackServer() as server:
        connection = http.client.HTTPConnection(proxy.host, proxy.port, timeout=5)
        connection.set_tunnel(server.host, server.port)
        connection.request("GET", "/through")
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read()) == {"output": "ok"}
        connection.close()
        assert server.requests[0].path == "/through"


def test_error_fault_refuses_the_connect(proxy: ChaosProxy, echo: tuple[str, int]) -> None:
    proxy.activate(faulty(mode="error", match_url=f"{echo[0]}*"))
    s, answer = connect(proxy, *echo)
    s.close()
    assert status_of(answer) == 503
    assert b'"tunnel_refused"' in answer
    item = proxy.log.snapshot()[-1]
    assert item.target is Target.TOOL and item.tool == "bank" and item.status == 503
    assert item.fired == ("tool_faults[0] error(503) on bank",)


def test_https_url_match(proxy: ChaosProxy, echo: tuple[str, int]) -> None:
    host, port = echo
    proxy.activate(faulty(mode="error", error_code=502, match_url=f"https://{host}:{port}/*"))
    s, answer = connect(proxy, host, port)
    s.close()
    assert status_of(answer) == 502


def test_configured_https_tool_is_matched_by_host_and_port(echo: tuple[str, int]) -> None:
    host, port = echo
    with ChaosProxy(tools={"bank": f"https://{host}:{port}/api"}) as proxy:
        proxy.activate(faulty(mode="error"))
        s, answer = connect(proxy, host, port)
        s.close()
        assert status_of(answer) == 503
        proxy.activate(None)
        s, answer = connect(proxy, host, port)
        s.close()
        assert status_of(answer) == 200
        assert proxy.log.snapshot()[-1].tool == "bank"


def test_slow_fault_delays_then_tunnels(proxy: ChaosProxy, echo: tuple[str, int]) -> None:
    proxy.activate(faulty(mode="slow", delay_ms=150, match_url=f"{echo[0]}:*"))
    started = time.perf_counter()
    s, answer = connect(proxy, *echo)
    with s:
        assert time.perf_counter() - started >= 0.14
        assert status_of(answer) == 200
        s.sendall(b"ping")
        assert s.recv(10) == b"ping"


def test_timeout_fault_holds_then_closes(proxy: ChaosProxy, echo: tuple[str, int]) -> None:
    proxy.activate(faulty(mode="timeout", delay_ms=150, match_url=f"{echo[0]}*"))
    started = time.perf_counter()
    try:
        s, answer = connect(proxy, *echo)
        s.close()
    except ConnectionResetError:
        answer = b""
    assert answer == b""  # never answered
    assert time.perf_counter() - started >= 0.14
    assert proxy.log.snapshot()[-1].status is None


@pytest.mark.parametrize("mode", ["malformed", "malicious_response"])
def test_body_faults_reset_the_established_tunnel(
    proxy: ChaosProxy, echo: tuple[str, int], mode: str
) -> None:
    proxy.activate(faulty(mode=mode, match_url=f"{echo[0]}*"))
    s, answer = connect(proxy, *echo)
    with s:
        assert status_of(answer) == 200
        try:
            s.sendall(b"ClientHello")
            assert s.recv(100) == b""
        except (ConnectionResetError, BrokenPipeError):
            pass  # reset: what a TLS client sees as a failed handshake


def test_unmatched_hosts_pass(proxy: ChaosProxy, echo: tuple[str, int]) -> None:
    proxy.activate(faulty(mode="error", match_url="api.example.com*"))
    s, answer = connect(proxy, *echo)
    s.close()
    assert status_of(answer) == 200
    assert proxy.log.snapshot()[-1].target is Target.OTHER


def test_unreachable_tunnel_target_is_a_502(proxy: ChaosProxy) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    s, answer = connect(proxy, "127.0.0.1", port)
    s.close()
    assert status_of(answer) == 502 and b"upstream_unreachable" in answer
    item = proxy.log.snapshot()[-1]
    assert item.upstream_error is not None and item.fired == ()


def test_bad_connect_target(proxy: ChaosProxy) -> None:
    s, answer = connect(proxy, "no-port", 0)
    s.close()
    assert status_of(answer) in (400, 502)


# --------------------------------------------------------------------------- context attacks

INJECTION = ContextAttack.model_validate({"type": "indirect_injection", "payloads": ["obey"]})
ATTACK = "context_attacks[0] indirect_injection"


def tunnelled(*faults: ToolFault) -> ActiveScenario:
    return ActiveScenario("tls", 1, tool_faults=faults, context_attacks=(INJECTION,))


def test_a_tool_result_attack_on_a_tunnel_is_matched_but_not_applied_with_why(
    echo: tuple[str, int],
) -> None:
    host, port = echo
    with ChaosProxy(tools={"bank": f"https://{host}:{port}/api"}) as proxy:
        proxy.activate(tunnelled())
        s, answer = connect(proxy, host, port)
        with s:
            assert status_of(answer) == 200
            s.sendall(b"ping")
            assert s.recv(10) == b"ping"  # relayed as ever: there is nothing to poison
        item = proxy.log.snapshot()[-1]
    assert item.tool == "bank" and item.matched == (ATTACK,) and item.fired == ()
    assert item.unapplied == ((ATTACK, unreadable(host, port, "bank")),)
    assert unreadable(host, port, "bank") == (
        f"the call to {host}:{port} went through an HTTPS tunnel, whose results flakestorm "
        "cannot read: point the agent's base URL for that tool at the proxy's /tools/bank "
        f"route, with proxy.tools.bank: https://{host}:{port}, so the proxy makes the HTTPS "
        "call and sees the result"
    )


def test_a_slow_fault_on_a_tunnel_is_delivered_and_the_attack_still_not_applied(
    proxy: ChaosProxy, echo: tuple[str, int]
) -> None:
    slow = ToolFault.model_validate(
        {"tool": "bank", "mode": "slow", "delay_ms": 1, "match_url": f"{echo[0]}*"}
    )
    proxy.activate(tunnelled(slow))
    s, answer = connect(proxy, *echo)
    s.close()
    assert status_of(answer) == 200
    item = proxy.log.snapshot()[-1]
    assert item.fired == ("tool_faults[0] slow(1 ms) on bank",)
    assert [label for label, _ in item.unapplied] == [ATTACK]


def test_a_refused_tunnel_is_a_delivered_fault_that_left_the_attack_nothing_to_poison(
    proxy: ChaosProxy, echo: tuple[str, int]
) -> None:
    refuse = ToolFault.model_validate({"tool": "bank", "mode": "error", "match_url": f"{echo[0]}*"})
    proxy.activate(tunnelled(refuse))
    s, answer = connect(proxy, *echo)
    s.close()
    assert status_of(answer) == 503
    item = proxy.log.snapshot()[-1]
    assert item.fired == item.matched == ("tool_faults[0] error(503) on bank",)
    assert item.replaced == ((ATTACK, "tool_faults[0] error(503) on bank"),)
    assert item.unapplied == ()


# --------------------------------------------------------------------------- through a run


def bank_agent(proxy: ChaosProxy, bank: LoopbackServer) -> LoopbackServer:
    """An HTTP agent that asks its bank over HTTPS_PROXY: a ``CONNECT`` tunnel through the
    proxy (forwarding the cell header on it), and answers with what it got."""

    def chat(request: Request) -> Response:
        forwarded = {
            k: v for k, v in request.headers.items() if k.lower().startswith("x-flakestorm-")
        }
        connection = http.client.HTTPConnection(proxy.host, proxy.port, timeout=10)
        connection.set_tunnel(bank.host, bank.port, headers=forwarded)
        try:
            connection.request("GET", "/balance")
            said = connection.getresponse().read().decode()
        except OSError as exc:  # a refused tunnel: "Tunnel connection failed: 503"
            said = f"the bank is down ({exc})"
        finally:
            connection.close()
        return Response.json({"output": f"bank: {said}"})

    return LoopbackServer(chat)


def test_an_attack_only_ever_seen_through_tunnels_is_not_delivered(tmp_path: Path) -> None:
    injection = {"type": "indirect_injection", "payloads": ["obey"], "tool": "bank"}
    doc: dict[str, Any] = {
        "golden_prompts": ["my balance?", "and now?"],
        "contract": {
            "name": "bank",
            "invariants": [{"id": "answers", "type": "output_not_empty"}],
            "chaos_matrix": [
                {"name": "poisoned", "context_attacks": [injection]},
                {"name": "refused", "tool_faults": [{"tool": "bank", "mode": "error"}]},
            ],
        },
        "output": {"dir": str(tmp_path / "reports")},
    }
    with LoopbackServer() as bank, ChaosProxy() as proxy, bank_agent(proxy, bank) as chat:
        origin = f"https://{bank.host}:{bank.port}"
        doc["agent"] = {"endpoint": chat.url_for("/chat"), "ready_timeout": 5000}
        doc["proxy"] = {"url": proxy.url, "tools": {"bank": origin}}
        path = tmp_path / "flakestorm.yaml"
        path.write_text(json.dumps(doc))
        result = run_phases(load_config(path), ["contract"])
    outcome = result.phases["contract"]
    cells = {c.scenario: c for c in outcome.cells}
    info = {s.name: s for s in outcome.scenarios}
    poisoned = cells["poisoned"]
    assert poisoned.status is Status.ERRORED
    assert poisoned.reason == (
        f"fault not delivered: {ATTACK}: it matched a call but could not be applied: "
        f"{unreadable(bank.host, bank.port, 'bank')}"
    )
    assert poisoned.checked is Status.PASSED  # the agent got the clean balance
    assert all(p.output == 'bank: {"output": "ok"}' for p in poisoned.prompts)
    assert info["poisoned"].undelivered == (ATTACK,)
    # a tool fault acts on the tunnel itself: refused, and delivered as ever
    assert info["refused"].undelivered == () and cells["refused"].status is Status.PASSED
    assert cells["refused"].faults_fired == ("tool_faults[0] error(503) on bank",)
    assert result.exit_code == 3
