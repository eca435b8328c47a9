"""How MCP traffic reaches the chaos proxy (SPEC §11): the reverse route ``/mcp/NAME``, forward
mode by the server's URL, an unknown server's 404, and a cassette standing in for a server —
against the official SDK's server and client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.mcp_server import NEWS, QUOTE, McpServer

from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import ToolFault

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def tools_call(tool: str) -> tuple[bytes, dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"symbol": "AAPL"}, "_meta": META},
    }
    headers = {**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    return json.dumps(body).encode(), headers


@pytest.fixture
def rig() -> Iterator[tuple[McpServer, ChaosProxy]]:
    with (
        McpServer(json_response=True, stateless=True) as server,
        ChaosProxy(mcp={"quotes": server.url}) as proxy,
    ):
        fault = ToolFault.model_validate({"tool": "quotes.get_news", "mode": "error"})
        proxy.activate(ActiveScenario("s", 1, tool_faults=(fault,)))
        yield server, proxy


def test_forward_mode_knows_the_server_by_its_url(rig: tuple[McpServer, ChaosProxy]) -> None:
    server, proxy = rig
    with requests.Session() as session:
        session.trust_env = False
        proxies = {"http": proxy.url}
        body, headers = tools_call("get_news")
        faulted = session.post(server.url, data=body, headers=headers, proxies=proxies).json()
        body, headers = tools_call("get_quote")
        real = session.post(server.url, data=body, headers=headers, proxies=proxies).json()
    assert faulted["result"]["isError"] is True
    assert faulted["result"]["resultType"] == "complete"  # as the stateless protocol wants
    assert real["result"]["content"][0]["text"] == QUOTE
    assert server.calls == {"get_quote": 1}  # the faulted call never reached the server
    logged = [(i.tool, i.fired) for i in proxy.log.snapshot(None)]
    assert logged == [
        ("quotes.get_news", ("tool_faults[0] error(503) on quotes.get_news",)),
        ("quotes.get_quote", ()),
    ]


def test_an_unknown_server_is_a_404_naming_the_configured_ones(
    rig: tuple[McpServer, ChaosProxy],
) -> None:
    _, proxy = rig
    reply = requests.post(f"{proxy.url}/mcp/prices", data=b"{}", timeout=5)
    assert reply.status_code == 404
    assert "no MCP server 'prices' is configured on this proxy (configured: quotes)" in reply.text


async def both_tools(url: str, mode: str) -> list[tuple[bool, str]]:
    """What an agent on the official client gets from get_quote and get_news at ``url``."""
    from mcp import Client

    async with Client(url, mode=mode) as client:
        out = []
        for tool in ("get_quote", "get_news"):
            result = await client.call_tool(tool, {"symbol": "AAPL"})
            texts = [getattr(c, "text", "") for c in result.content]
            out.append((bool(result.is_error), " ".join(texts)))
        return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_cassette_of_an_mcp_server_stands_in_for_it(tmp_path: Path, mode: str) -> None:
    cassette = tmp_path / "mcp.jsonl"
    with McpServer() as server, ChaosProxy(mcp={"quotes": server.url}, record=cassette) as proxy:
        recorded = asyncio.run(both_tools(f"{proxy.url}/mcp/quotes", mode))
        down = server.url
    assert recorded == [(False, QUOTE), (False, NEWS)]
    # the server is gone: the cassette answers the handshake, the listing and the calls,
    # each response made to answer the new request's id; faults still act on top
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", mcp={"quotes": down}) as proxy:
        assert asyncio.run(both_tools(f"{proxy.url}/mcp/quotes", mode)) == recorded
        fault = ToolFault.model_validate({"tool": "get_news", "mode": "error"})
        proxy.activate(ActiveScenario("s", 1, tool_faults=(fault,)))
        faulted = asyncio.run(both_tools(f"{proxy.url}/mcp/quotes", mode))
    assert faulted == [(False, QUOTE), (True, "Service Unavailable")]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-06-18"])
def test_a_replayed_result_has_the_shape_of_the_sessions_protocol(version: str) -> None:
    """A client whose session began with the real server (a long-lived stdio session, say)
    reads the replayed result as it read the real ones: with ``resultType`` in a stateless
    protocol session, without it in a handshake-era one (the SDK refuses either otherwise)."""
    from flakestorm.chaos.faults.recording import Recording
    from flakestorm.config import OnMiss, ToolResponse

    recorded = ToolResponse.model_validate(
        {"tool": "quotes.get_quote", "status": 503, "response": "Service Unavailable"}
    )
    recording = Recording.build("s", [recorded], [], OnMiss.ERROR)
    call = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {
            "name": "get_quote",
            "arguments": {"symbol": "AAPL"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": version},
        },
    }
    with ChaosProxy(mcp={"quotes": "http://127.0.0.1:9/mcp"}) as proxy:
        proxy.activate(ActiveScenario("replay:s", 1, replay=recording))
        reply = requests.post(
            f"{proxy.url}/mcp/quotes",
            json=call,
            headers={"Accept": "application/json, text/event-stream"},
            timeout=10,
        )
    result = reply.json()["result"]
    assert result["isError"] is True and result["content"][0]["text"] == "Service Unavailable"
    assert result.get("resultType") == ("complete" if version == "2026-07-28" else None)
