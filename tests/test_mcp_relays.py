"""The proxy's half of the stdio relay (:mod:`flakestorm.chaos.proxy.relays`): a relay's call is
handed back to the relay that polls for it, faulted and logged as any MCP call, so the proxy
never connects to a relay. The relay's own half runs end to end in ``test_mcp_proxy.py``."""

from __future__ import annotations

import json
import threading

import requests
from support.proxy_rig import session

from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.relays import KEY_HEADER
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import ToolFault

CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get_quote"}}
).encode()
ANSWER = b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "ok"}]}}'
MCP = {"Content-Type": "application/json", "X-Flakestorm-Mcp": "quotes"}


def test_a_relays_call_is_answered_through_the_relay_that_polls() -> None:
    replies: list[requests.Response] = []
    with ChaosProxy() as proxy, session() as agent, session() as relay:
        caller = threading.Thread(
            target=lambda: replies.append(
                agent.post(f"{proxy.url}/mcp-relay/r1/call", data=CALL, headers=MCP, timeout=10)
            )
        )
        caller.start()
        polled = relay.get(f"{proxy.url}/mcp-relay/r1/next", timeout=30)
        assert (polled.status_code, polled.content) == (200, CALL)
        key = polled.headers[KEY_HEADER]
        taken = relay.post(f"{proxy.url}/mcp-relay/r1/answer/{key}", data=ANSWER, timeout=10)
        assert taken.status_code == 204
        caller.join()
        assert replies[0].status_code == 200 and replies[0].json()["id"] == 7
        (call,) = proxy.log.snapshot()
        assert (call.tool, call.url, call.status) == ("quotes.get_quote", "relay:r1", 200)


def test_a_fault_answers_without_asking_the_relay() -> None:
    fault = ToolFault.model_validate({"tool": "quotes.get_quote", "mode": "error"})
    with ChaosProxy() as proxy, session() as agent:
        proxy.activate(ActiveScenario("down", 1, tool_faults=(fault,)))
        reply = agent.post(f"{proxy.url}/mcp-relay/r2/call", data=CALL, headers=MCP, timeout=10)
        assert reply.json()["result"]["isError"] is True
        (call,) = proxy.log.snapshot()
        assert call.fired == ("tool_faults[0] error(503) on quotes.get_quote",)


def test_a_relay_that_never_polls_is_an_upstream_timeout_not_a_fault() -> None:
    with ChaosProxy(upstream_timeout_s=0.2) as proxy, session() as agent:
        reply = agent.post(f"{proxy.url}/mcp-relay/gone/call", data=CALL, headers=MCP, timeout=10)
        assert reply.status_code == 504
        assert reply.json()["error"]["type"] == "upstream_timeout"
        (call,) = proxy.log.snapshot()
        assert call.fired == () and (call.upstream_error or "").startswith("upstream_timeout")


def test_a_call_without_its_server_and_a_stray_answer_are_refused() -> None:
    with ChaosProxy() as proxy, session() as agent:
        bare = agent.post(f"{proxy.url}/mcp-relay/r3/call", data=CALL, timeout=10)
        assert bare.status_code == 400 and "X-Flakestorm-Mcp" in bare.json()["error"]["message"]
        stray = agent.post(f"{proxy.url}/mcp-relay/r3/answer/1", data=ANSWER, timeout=10)
        assert stray.status_code == 404
