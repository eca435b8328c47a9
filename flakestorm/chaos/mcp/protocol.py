"""MCP's JSON-RPC messages as flakestorm reads and writes them (SPEC §11).

An MCP client sends one JSON-RPC message per request (streamable HTTP: one POST; stdio: one
line). :func:`read_request` says what it is (a ``tools/call`` names its tool); anything that is
not one JSON-RPC object (a batch, a body that is not JSON) is ``None``: it passes through.

A server answers a request with one response message, as a plain JSON body or inside a
server-sent event stream (streamable HTTP), or as one line (stdio). :func:`edit_response`
rewrites the response to one request id in either form, keeping every other message and
event as it was; :func:`response_message` builds one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TOOLS_CALL = "tools/call"
TOOLS_LIST = "tools/list"

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"
VERSION_HEADER = "MCP-Protocol-Version"
VERSION_META = "io.modelcontextprotocol/protocolVersion"
FIRST_STATELESS = "2026-07-28"

Message = dict[str, Any]
"""One JSON-RPC message."""
Edit = Callable[[Message], Message]


@dataclass(frozen=True)
class Request:
    """One JSON-RPC message a client sent."""

    method: str
    id: Any = None
    """The request id; None for a notification."""
    tool: str | None = None
    """The tool a ``tools/call`` names."""
    version: str = ""
    """The protocol version the request states (``_meta``), "" when it states none."""
    arguments: Any = None
    """The arguments a ``tools/call`` passes (None when it passes none)."""

    @property
    def is_tool_call(self) -> bool:
        return self.method == TOOLS_CALL and self.tool is not None


def read_request(body: bytes | str) -> Request | None:
    """The JSON-RPC request (or notification) ``body`` holds; None when it is not one object
    with a method (a response, a batch, not JSON)."""
    message = _message(body)
    if message is None or not isinstance(message.get("method"), str):
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    tool = name if message["method"] == TOOLS_CALL and isinstance(name, str) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(VERSION_META) if isinstance(meta, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) and tool else None
    return Request(message["method"], message.get("id"), tool, str(version or ""), arguments)


def stateless(version: str) -> bool:
    """Whether ``version`` is one of the stateless protocol versions (2026-07-28 on), whose
    results carry ``resultType``."""
    return version >= FIRST_STATELESS


def completed(message: Message, version: str) -> Message:
    """``message`` as ``version`` wants a result: with ``resultType: complete`` from 2026-07-28."""
    result = message.get("result")
    if not stateless(version) or not isinstance(result, dict) or "resultType" in result:
        return message
    return {**message, "result": {**result, "resultType": "complete"}}


def response_message(
    request_id: Any, result: Message | None = None, error: Message | None = None
) -> Message:
    """A JSON-RPC response to ``request_id``: its ``result``, else its ``error``."""
    out: Message = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result if result is not None else {}
    return out


def message_bytes(message: Message) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def edit_response(body: bytes, content_type: str, request_id: Any, edit: Edit) -> bytes | None:
    """``body`` (plain JSON or server-sent events) with the response to ``request_id`` rewritten
    by ``edit``; None when the body holds no such response."""
    if media_type(content_type) == SSE_TYPE:
        return _edit_events(body, request_id, edit)
    message = _message(body)
    if message is None or not _answers(message, request_id):
        return None
    return message_bytes(edit(message))


def messages_of(body: bytes, content_type: str) -> list[Message]:
    """The JSON-RPC messages a reply body carries: one plain JSON object, or the ``data`` of
    each server-sent event (what is not a JSON object is left out)."""
    if media_type(content_type) == SSE_TYPE:
        text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
        datas = [
            "\n".join(
                line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")
            )
            for event in text.split("\n\n")
        ]
    else:
        datas = [body.decode("utf-8", errors="replace")]
    return [message for message in map(_message, datas) if message is not None]


def keyed(body: bytes) -> bytes:
    """A request as a cassette matches it: without its ``id`` and ``params._meta``, which
    change with every client (a body that is not one JSON-RPC object, as it is)."""
    message = _message(body)
    if message is None:
        return body
    message = {k: v for k, v in message.items() if k != "id"}
    params = message.get("params")
    if isinstance(params, dict):
        message["params"] = {k: v for k, v in params.items() if k != "_meta"}
    return message_bytes(message)


def answering(body: bytes, content_type: str, request: bytes) -> bytes:
    """A recorded response ``body`` (JSON or SSE) made to answer ``request``'s id."""
    parsed = read_request(request)
    if parsed is None or parsed.id is None:
        return body
    recorded = messages_of(body, content_type)
    old = next((m["id"] for m in recorded if "id" in m and "method" not in m), None)
    if old is None:
        return body
    edited = edit_response(body, content_type, old, lambda m: {**m, "id": parsed.id})
    return body if edited is None else edited


def _event_data(lines: list[str]) -> str:
    """The ``data`` of one server-sent event, given its lines."""
    return "\n".join(line[5:].lstrip(" ") for line in lines if line.startswith("data:"))


def _message(text: bytes | str) -> Message | None:
    """``text`` parsed, when it is one JSON object; else None."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _answers(message: Message, request_id: Any) -> bool:
    return message.get("id") == request_id and ("result" in message or "error" in message)


def _edit_events(body: bytes, request_id: Any, edit: Edit) -> bytes | None:
    """The events of an SSE body, the one carrying the response to ``request_id`` edited."""
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
    events = text.split("\n\n")
    for i, event in enumerate(events):
        lines = event.split("\n")
        data = _event_data(lines)
        if not data:
            continue
        message = _message(data)
        if message is None or not _answers(message, request_id):
            continue
        kept = [line for line in lines if not line.startswith("data:")]
        edited = message_bytes(edit(message)).decode()
        events[i] = "\n".join([*kept, f"data: {edited}"])
        return "\n\n".join(events).encode()
    return None
