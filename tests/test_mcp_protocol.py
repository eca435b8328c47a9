"""The MCP package (flakestorm.chaos.mcp): requests read, responses edited in plain JSON and
server-sent events, each fault mode's answer, and the config checks of MCP tools."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from flakestorm.chaos import mcp
from flakestorm.config import Config, ContextAttack, ToolFault, ToolFaultMode
from flakestorm.errors import Problem
from flakestorm.meaning import Parts, check

CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {
        "name": "get_quote",
        "arguments": {"symbol": "AAPL"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    },
}
RESULT = {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {
        "content": [{"type": "text", "text": "AAPL at 187.25"}],
        "structuredContent": {"result": "AAPL at 187.25"},
        "isError": False,
    },
}
ATTACK = ContextAttack.model_validate({"type": "indirect_injection", "payloads": ["OBEY"]})


def test_a_tools_call_names_its_tool_and_other_traffic_is_not_a_call() -> None:
    request = mcp.read_request(json.dumps(CALL).encode())
    assert request == mcp.Request(
        "tools/call", 7, "get_quote", "2026-07-28", arguments={"symbol": "AAPL"}
    )
    assert request.is_tool_call
    listing = mcp.read_request(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    assert listing is not None and not listing.is_tool_call
    notification = mcp.read_request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert notification is not None and notification.id is None
    for body in (b"[{}]", b"not json", b'{"jsonrpc":"2.0","id":1,"result":{}}'):
        assert mcp.read_request(body) is None


def test_a_json_response_is_poisoned_in_its_text_and_structured_content() -> None:
    body = json.dumps(RESULT).encode()
    rng = random.Random(1)
    edited = mcp.edit_response(
        body, "application/json", 7, lambda m: mcp.poisoned(m, [ATTACK], rng)
    )
    assert edited is not None
    result = json.loads(edited)["result"]
    assert result["content"][0]["text"] == "AAPL at 187.25\n\nOBEY"
    assert "OBEY" in json.dumps(result["structuredContent"])
    assert mcp.edit_response(body, "application/json", 8, lambda m: m) is None


def test_an_sse_response_is_edited_in_its_event_and_the_other_events_are_kept() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    body = (
        f"event: message\ndata: {json.dumps(progress)}\n\n"
        f"event: message\nid: 2\ndata: {json.dumps(RESULT)}\n\n"
    ).encode()
    edited = mcp.edit_response(
        body,
        "text/event-stream",
        7,
        lambda m: mcp.without_tools(mcp.poisoned(m, [ATTACK], random.Random(1)), ()),
    )
    assert edited is not None
    events = edited.decode().split("\n\n")
    assert events[0] == f"event: message\ndata: {json.dumps(progress)}"
    assert events[1].startswith("event: message\nid: 2\ndata: ")
    message = json.loads(events[1].split("data: ", 1)[1])
    assert message["result"]["content"][0]["text"].endswith("OBEY")


def test_tool_removed_hides_the_tool_from_the_listing_only() -> None:
    listing = {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"tools": [{"name": "get_quote"}, {"name": "get_news"}]},
    }
    assert mcp.listed_tools(mcp.without_tools(listing, {"get_quote"})) == ("get_news",)
    faults = [
        ToolFault.model_validate({"tool": "get_quote", "mode": "tool_removed"}),
        ToolFault.model_validate({"tool": "other.get_news", "mode": "tool_removed"}),
        ToolFault.model_validate({"tool": "get_news", "mode": "error"}),
    ]
    assert mcp.removed_tools("quotes", faults) == {"get_quote", "other.get_news"}
    assert "get_news" not in mcp.removed_tools("quotes", faults)


def answer(mode: str, version: str = "2026-07-28", **fields: Any) -> mcp.McpAnswer:
    fault = ToolFault.model_validate({"tool": "get_quote", "mode": mode, **fields})
    return mcp.MCP_MODES[fault.mode].answer(fault, 7, "get_quote")


def test_each_mode_answers_as_an_mcp_server_would() -> None:
    error = answer("error")
    assert error.message == mcp.response_message(7, mcp.text_result("Service Unavailable", True))
    jsonrpc = answer("error", **{"as": "jsonrpc", "error_code": 429})
    assert jsonrpc.message is not None
    assert jsonrpc.message["error"]["data"] == {"status": 429}
    assert answer("timeout", delay_ms=5) == mcp.McpAnswer(delay_ms=5, drop=True)
    assert answer("slow", delay_ms=5) == mcp.McpAnswer(delay_ms=5, through=True)
    removed = answer("tool_removed").message
    assert removed is not None and removed["result"]["isError"] is True
    assert removed["result"]["content"][0]["text"] == "Unknown tool: get_quote"
    expired = answer("session_expired")
    assert expired.status == 404 and expired.message is not None and "error" in expired.message
    empty = answer("empty").message
    assert empty is not None and empty["result"]["content"] == []
    malformed = answer("malformed").message
    assert malformed is not None and "structuredContent" not in malformed["result"]
    with pytest.raises(ValueError):
        json.loads(malformed["result"]["content"][0]["text"])
    assert set(mcp.MCP_MODES) == set(ToolFaultMode)


def test_a_stateless_protocol_result_says_it_is_complete() -> None:
    message = mcp.response_message(7, {"content": []})
    assert mcp.completed(message, "2026-07-28")["result"]["resultType"] == "complete"
    assert mcp.completed(message, "2025-06-18") == message


# --------------------------------------------------------------------------- config checks


def checked(proxy: dict[str, Any], faults: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    data = {
        "agent": {"endpoint": "http://localhost:8000/invoke"},
        "proxy": proxy,
        "golden_prompts": ["q"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "a", "type": "output_not_empty"}],
            "chaos_matrix": [{"name": "s", "tool_faults": faults}],
        },
    }

    def locate(path: tuple[str | int, ...], message: str, key: bool = False) -> Problem:
        return Problem("f.yaml", 1, 1, ".".join(map(str, path)), message)

    found = check(Parts.of_config(Config.model_validate(data)), locate, Path("."))
    shown = [f"{p.path}: {p.message}" for p in found.errors]
    return shown, [f"{p.path}: {p.message}" for p in found.warnings]


def test_an_mcp_only_mode_without_an_mcp_server_is_a_located_error() -> None:
    errors, _ = checked({}, [{"tool": "get_quote", "mode": "session_expired"}])
    assert errors == [
        "contract.chaos_matrix.0.tool_faults.0.mode: mode 'session_expired' acts on MCP tools, "
        "and proxy.mcp names no MCP server (add proxy.mcp: {NAME: URL} for the server that "
        "hosts the tool)"
    ]
    errors, _ = checked({}, [{"tool": "get_quote", "mode": "error", "as": "jsonrpc"}])
    assert errors[0].startswith("contract.chaos_matrix.0.tool_faults.0.as: 'as' acts on MCP")


def test_a_tool_known_only_at_run_time_is_a_warning_once() -> None:
    mcp_proxy = {"mcp": {"quotes": "http://127.0.0.1:9/mcp"}, "tools": {"search": "http://x"}}
    faults = [
        {"tool": "get_quote", "mode": "error"},
        {"tool": "get_quote", "mode": "timeout"},
        {"tool": "quotes.get_news", "mode": "error"},
        {"tool": "search", "mode": "error"},
    ]
    errors, warnings = checked(mcp_proxy, faults)
    assert errors == []
    assert warnings == [
        "contract.chaos_matrix.0.tool_faults.0.tool: 'get_quote' is not an HTTP tool of "
        "proxy.tools; it must be a tool of the MCP server 'quotes', named quotes.get_quote in "
        "reports; a server's tools are known only at run time (a fault no call reaches is "
        "reported as not delivered)"
    ]


def test_with_several_servers_the_warning_asks_which() -> None:
    servers = {"mcp": {"quotes": "http://127.0.0.1:9/mcp", "news": "stdio"}}
    _, warnings = checked(servers, [{"tool": "get_quote", "mode": "error"}])
    assert warnings == [
        "contract.chaos_matrix.0.tool_faults.0.tool: 'get_quote' is not an HTTP tool of "
        "proxy.tools; it must be a tool of an MCP server (news, quotes): write "
        "SERVER.get_quote to say which, and reports name it; a server's tools are known only "
        "at run time (a fault no call reaches is reported as not delivered)"
    ]


def test_an_mcp_server_route_is_checked_like_a_tool_route() -> None:
    errors, _ = checked({"mcp": {"_flakestorm": "ftp://x"}}, [])
    assert errors == [
        "proxy.mcp._flakestorm: MCP server name '_flakestorm' cannot be a URL path segment (use "
        "letters, digits, '.', '_', '~', '-'; not starting with '_flakestorm')",
        "proxy.mcp._flakestorm: 'ftp://x' is not an http(s) URL (nor 'stdio', for a server "
        "relayed by flakestorm mcp-stdio)",
    ]


def test_the_stdio_relay_without_a_proxy_says_how_to_give_it_one() -> None:
    from click.testing import CliRunner

    from flakestorm.cli import main

    result = CliRunner().invoke(
        main,
        ["mcp-stdio", "--name", "quotes", "--", "python", "server.py"],
        env={"FLAKESTORM_PROXY_URL": None},
    )
    assert result.exit_code == 2
    assert "mcp-stdio: no chaos proxy: set FLAKESTORM_PROXY_URL" in result.output
