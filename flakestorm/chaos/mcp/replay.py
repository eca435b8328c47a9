"""An MCP server played from a replayed session's recording (SPEC §7, §11): while a session is
replayed, flakestorm answers an MCP client itself, so the real server may be down.

It is a handshake-era server (:data:`REPLAY_VERSION`): ``server/discover`` gets "method not
found" (a client that probes falls back to ``initialize``, as with any such server);
``initialize`` states the tools capability; ``tools/list`` lists the recorded tools (their
MCP names, an open input schema); ``ping`` and notifications are acknowledged; a
``tools/call`` gets its recorded response (:func:`recorded_result`: the response as text, an
error status as ``isError``), counted per tool by the fault book like every tool call.
"""

from __future__ import annotations

import json
from typing import Any

from flakestorm.chaos.mcp.protocol import (
    JSON_TYPE,
    SSE_TYPE,
    Message,
    Request,
    messages_of,
    read_request,
    response_message,
)
from flakestorm.config import ToolResponse

REPLAY_VERSION = "2025-06-18"
"""The protocol version the replayed server speaks."""
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
METHOD_NOT_FOUND = -32601


def replayed_answer(request: Request, server: str, tools: tuple[str, ...]) -> Message | None:
    """The replayed server's answer to a request that is not a ``tools/call`` (None: a
    notification, acknowledged without a message)."""
    if request.id is None:
        return None
    if request.method == "initialize":
        version = request.version if request.version in HANDSHAKE_VERSIONS else REPLAY_VERSION
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": server, "version": "flakestorm replay"},
        }
        return response_message(request.id, result)
    if request.method == "tools/list":
        listed = [{"name": t, "inputSchema": {"type": "object"}} for t in tools]
        return response_message(request.id, {"tools": listed})
    if request.method == "ping":
        return response_message(request.id, {})
    error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {request.method}"}
    return response_message(request.id, error=error)


def recorded_result(request_id: Any, response: ToolResponse) -> Message:
    """A recorded tool response as an MCP tool result: its text (a value other than text as
    JSON), ``isError`` when its status is not 2xx."""
    value = response.response
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    result = {"content": [{"type": "text", "text": text}], "isError": response.failed}
    return response_message(request_id, result)


def offered(server: str, recorded: tuple[str, ...]) -> tuple[str, ...]:
    """The MCP names of the tools a recording gives server ``server``: its own
    (``server.TOOL``) and those named without a server."""
    out = []
    for name in recorded:
        own, dot, tool = name.partition(".")
        if not dot:
            out.append(name)
        elif own == server:
            out.append(tool)
    return tuple(dict.fromkeys(out))


def recorded_call(request: str | None, response: str | None) -> tuple[int, Any, Any] | None:
    """What a logged MCP ``tools/call`` recorded, as a session's tool response: ``(status,
    response, arguments)`` — its result's text (``isError`` or a JSON-RPC error as 500);
    None when ``request`` is not a ``tools/call`` (a ``tools/list``, or not MCP)."""
    parsed = read_request(request or "")
    if parsed is None or not parsed.is_tool_call:
        return None
    params = json.loads(request or "{}").get("params") or {}
    arguments = params.get("arguments") if isinstance(params, dict) else None
    text = response or ""
    kind = SSE_TYPE if text.lstrip().startswith(("event:", "data:", "id:", ":")) else JSON_TYPE
    for message in messages_of(text.encode(), kind):
        if message.get("id") != parsed.id:
            continue
        error = message.get("error")
        if isinstance(error, dict):
            return 500, str(error.get("message", "")), arguments
        result = message.get("result")
        if isinstance(result, dict):
            content = result.get("content")
            texts = [
                item["text"]
                for item in (content if isinstance(content, list) else [])
                if isinstance(item, dict) and isinstance(item.get("text"), str)
            ]
            status = 500 if result.get("isError") else 200
            return status, "\n".join(texts), arguments
    return None
