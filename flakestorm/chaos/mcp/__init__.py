"""MCP, as flakestorm speaks it (SPEC §11): parse, match, fault, edit — used by the chaos
proxy (streamable HTTP) and by the stdio relay (``flakestorm mcp-stdio``) alike. Nothing here
does I/O, and nothing imports the ``mcp`` SDK: flakestorm speaks JSON-RPC itself.

==============  ===============================================================================
module          what it holds
==============  ===============================================================================
``protocol``    JSON-RPC requests (:func:`read_request`: a ``tools/call`` names its tool) and
                responses, plain JSON or server-sent events (:func:`edit_response`)
``modes``       one registered unit per tool fault mode on an MCP tool (:data:`MCP_MODES`):
                the :class:`McpAnswer` a faulted ``tools/call`` gets
``results``     edits of real responses: context attacks on a result's text content
                (:func:`poisoned`), tools hidden from ``tools/list`` (:func:`without_tools`)
``replay``      an MCP server played from a replayed session's recording (the real one may
                be down)
``names``       MCP tool names: ``SERVER.TOOL`` as calls are logged, and which faults name
                which tool
==============  ===============================================================================
"""

from flakestorm.chaos.mcp.modes import MCP_MODES, McpAnswer, McpMode, text_result
from flakestorm.chaos.mcp.names import qualified, removed_tools, short_name
from flakestorm.chaos.mcp.protocol import (
    JSON_TYPE,
    SSE_TYPE,
    TOOLS_CALL,
    TOOLS_LIST,
    VERSION_HEADER,
    Message,
    Request,
    answering,
    completed,
    edit_response,
    keyed,
    media_type,
    message_bytes,
    messages_of,
    read_request,
    response_message,
)
from flakestorm.chaos.mcp.replay import offered, recorded_call, recorded_result, replayed_answer
from flakestorm.chaos.mcp.results import listed_tools, poisoned, without_tools

__all__ = [
    "JSON_TYPE",
    "MCP_MODES",
    "SSE_TYPE",
    "TOOLS_CALL",
    "TOOLS_LIST",
    "VERSION_HEADER",
    "McpAnswer",
    "McpMode",
    "Message",
    "Request",
    "answering",
    "completed",
    "edit_response",
    "keyed",
    "listed_tools",
    "media_type",
    "message_bytes",
    "messages_of",
    "offered",
    "poisoned",
    "qualified",
    "read_request",
    "recorded_call",
    "recorded_result",
    "removed_tools",
    "replayed_answer",
    "response_message",
    "short_name",
    "text_result",
    "without_tools",
]
