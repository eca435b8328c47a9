"""What each tool fault mode does to a call of an MCP tool, one registered unit per mode
(SPEC §11), beside the HTTP units of :mod:`flakestorm.chaos.faults.tool_modes` (whose fields, labels
and delays these share).

As an MCP client meets them:

- ``error``: a tool result with ``isError: true`` and the error text (``as: jsonrpc``: a
  JSON-RPC error response, ``-32603`` with the fault's ``error_code`` in its ``data``);
- ``timeout``: the response is held ``delay_ms``, then the stream (connection) is dropped;
- ``slow``: the real response, after ``delay_ms``;
- ``malformed``: a result that breaks the tool's declared output: its text is not JSON and
  it has no ``structuredContent``;
- ``empty``: a result with no content at all;
- ``malicious_response``: a result whose text is ``payload`` (an object ``payload`` is also
  its ``structuredContent``, as a tool with an output schema returns);
- ``tool_removed``: the call gets ``Unknown tool: NAME`` (``isError``), as an MCP server
  answers a tool it does not have; the tool also vanishes from ``tools/list``
  (:func:`flakestorm.chaos.mcp.results.without_tools`);
- ``session_expired``: HTTP 404 with a JSON-RPC error, as a server answers a session it no
  longer knows, so the client must initialize again;
- ``lost_reply``: the call reaches the server, which acts on it, then the connection is
  dropped before its response (``task_state``, for A2A agents, is refused by validate here).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flakestorm.chaos.attacks.tool_results import DEFAULT_INJECTION
from flakestorm.chaos.faults.modes import registry
from flakestorm.chaos.faults.tool_modes import MALFORMED_TEXT, TOOL_MODES, error_message
from flakestorm.chaos.mcp.protocol import Message, response_message
from flakestorm.config import McpErrorForm, ToolFault, ToolFaultMode

INTERNAL_ERROR = -32603
SESSION_NOT_FOUND = -32001


@dataclass(frozen=True)
class McpAnswer:
    """What one faulted ``tools/call`` gets: after ``delay_ms``, the connection dropped
    (``drop``), or the real response (``through``; with ``drop`` too, the server acts on the
    call and its response is lost), or ``message`` with HTTP ``status``."""

    message: Message | None = None
    status: int = 200
    delay_ms: int = 0
    drop: bool = False
    through: bool = False


def text_result(text: str, is_error: bool = False) -> Message:
    """A tool result holding one text content item."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class McpMode(abc.ABC):
    """One tool fault mode on an MCP tool call (see the module doc)."""

    @abc.abstractmethod
    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        """What the call to ``tool`` (its MCP name), request ``request_id``, gets."""


class _Timeout(McpMode):
    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        return McpAnswer(delay_ms=TOOL_MODES[fault.mode].delay_ms(fault), drop=True)


class _Slow(McpMode):
    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        return McpAnswer(delay_ms=TOOL_MODES[fault.mode].delay_ms(fault), through=True)


class _Error(McpMode):
    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        text = error_message(fault)
        if fault.as_ is McpErrorForm.JSONRPC:
            error = {"code": INTERNAL_ERROR, "message": text, "data": {"status": fault.error_code}}
            return McpAnswer(response_message(request_id, error=error))
        return McpAnswer(response_message(request_id, text_result(text, is_error=True)))


class _Result(McpMode):
    """A result in place of the tool's."""

    def __init__(self, result: Message | None = None) -> None:
        self.result = result

    def make(self, fault: ToolFault, tool: str) -> Message:
        assert self.result is not None
        copied: Message = json.loads(json.dumps(self.result))  # never share the template
        return copied

    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        return McpAnswer(response_message(request_id, self.make(fault, tool)))


class _Malicious(_Result):
    def make(self, fault: ToolFault, tool: str) -> Message:
        payload = fault.payload if fault.payload is not None else DEFAULT_INJECTION
        if isinstance(payload, str):
            return text_result(payload)
        result = text_result(json.dumps(payload, ensure_ascii=False))
        if isinstance(payload, dict):  # what a tool with an output schema returns
            result["structuredContent"] = json.loads(json.dumps(payload))
        return result


class _Removed(_Result):
    def make(self, fault: ToolFault, tool: str) -> Message:
        return text_result(fault.message or f"Unknown tool: {tool}", is_error=True)


class _Expired(McpMode):
    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        error = {"code": SESSION_NOT_FOUND, "message": fault.message or "Session not found"}
        return McpAnswer(response_message(request_id, error=error), status=404)


class _Lost(McpMode):
    def answer(self, fault: ToolFault, request_id: Any, tool: str) -> McpAnswer:
        return McpAnswer(through=True, drop=True)


MCP_MODES: Mapping[ToolFaultMode, McpMode] = registry(
    [
        (ToolFaultMode.TIMEOUT, _Timeout()),
        (ToolFaultMode.ERROR, _Error()),
        (ToolFaultMode.MALFORMED, _Result({"content": [{"type": "text", "text": MALFORMED_TEXT}]})),
        (ToolFaultMode.SLOW, _Slow()),
        (ToolFaultMode.MALICIOUS_RESPONSE, _Malicious()),
        (ToolFaultMode.EMPTY, _Result({"content": []})),
        (ToolFaultMode.TOOL_REMOVED, _Removed()),
        (ToolFaultMode.SESSION_EXPIRED, _Expired()),
        (ToolFaultMode.TASK_STATE, _Removed()),
        (ToolFaultMode.LOST_REPLY, _Lost()),
        (ToolFaultMode.STREAM_CUT, _Removed()),
        (ToolFaultMode.CARD, _Removed()),
    ]
)
"""Every tool fault mode's unit on an MCP tool."""
