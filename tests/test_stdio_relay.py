"""The stdio MCP relay's own half (:mod:`flakestorm.chaos.proxy.stdio_relay`), between a real
server process and the run's proxy: a call that gets no answer — a ``timeout`` fault dropped it
after its hold, or the server died on it — is answered for its JSON-RPC id with an error, so the
agent's client fails it at once; a dead server is logged."""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.stdio_relay import NO_ANSWER, StdioRelay
from flakestorm.config import ToolFault

SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    name = message.get("params", {}).get("name")
    if name == "crash":
        sys.exit(3)  # dies on the call, without answering it
    result = {"content": [{"type": "text", "text": "AAPL 123.45"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


class AgentOut:
    """What the relay writes to the agent: each line as a message, in a queue."""

    def __init__(self) -> None:
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def write(self, data: bytes) -> int:
        for line in data.splitlines():
            if line.strip():
                self.lines.put(json.loads(line))
        return len(data)

    def flush(self) -> None:
        pass

    def next(self) -> dict[str, Any]:
        return self.lines.get(timeout=20)


def call(request_id: int, tool: str) -> bytes:
    params = {"name": tool, "arguments": {"ticker": "AAPL"}}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode() + b"\n"


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[tuple[ChaosProxy, AgentOut, Any, dict[str, int]]]:
    """(the proxy, what the agent reads, the agent's end of the relay's stdin, the exit)."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    read_end, write_end = os.pipe()
    out = AgentOut()
    exit_code: dict[str, int] = {}
    with ChaosProxy() as proxy, os.fdopen(read_end, "rb") as agent_in:
        relay = StdioRelay("quotes", [sys.executable, str(script)], proxy.url, agent_in, out)
        runner = threading.Thread(target=lambda: exit_code.update(code=relay.run()))
        runner.start()
        writer = os.fdopen(write_end, "wb", buffering=0)
        try:
            yield proxy, out, writer, exit_code
        finally:
            writer.close()
            runner.join(timeout=30)


def test_a_timeout_fault_holds_the_call_then_answers_its_id_with_an_error(
    relay: tuple[ChaosProxy, AgentOut, Any, dict[str, int]],
) -> None:
    proxy, out, agent, _ = relay
    agent.write(call(1, "get_quote"))
    assert out.next()["result"]["content"][0]["text"] == "AAPL 123.45"
    fault = ToolFault.model_validate(
        {"tool": "quotes.get_quote", "mode": "timeout", "delay_ms": 300}
    )
    proxy.activate(ActiveScenario("hangs", 1, tool_faults=(fault,)))
    sent = time.monotonic()
    agent.write(call(2, "get_quote"))
    answer = out.next()
    held_s = time.monotonic() - sent
    assert answer["id"] == 2 and answer["error"]["code"] == NO_ANSWER
    assert "no answer" in answer["error"]["message"]
    assert held_s >= 0.3  # the fault's hold, then the drop
    (_, dropped) = proxy.log.snapshot()
    assert dropped.fired == ("tool_faults[0] timeout(300 ms) on quotes.get_quote",)


def test_a_call_the_server_dies_on_is_answered_with_an_error_and_the_death_logged(
    relay: tuple[ChaosProxy, AgentOut, Any, dict[str, int]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, out, agent, _ = relay
    caplog.set_level(logging.WARNING, logger="flakestorm.mcp_stdio")
    agent.write(call(1, "crash"))
    answer = out.next()
    assert answer["id"] == 1 and answer["error"]["code"] == NO_ANSWER
    assert "the server exited (code 3)" in answer["error"]["message"]
    # a later call meets a server that is gone: answered, not left to the client's timeout
    agent.write(call(2, "get_quote"))
    later = out.next()
    assert later["id"] == 2 and "error" in later
    agent.close()
    deaths = [r.getMessage() for r in caplog.records if "MCP server exited" in r.getMessage()]
    assert deaths == [
        "mcp-stdio quotes: the MCP server exited with code 3: a request was left without an answer"
    ]
