"""MCP tool names: a call of tool ``get_quote`` on server ``quotes`` is logged as the tool
``quotes.get_quote``; a fault names it ``get_quote`` or, when two servers share the name,
``quotes.get_quote`` (SPEC §11)."""

from __future__ import annotations

from collections.abc import Iterable

from flakestorm.config import ToolFault, ToolFaultMode


def qualified(server: str, tool: str) -> str:
    """``quotes.get_quote``: how calls and reports name an MCP tool."""
    return f"{server}.{tool}"


def short_name(server: str, name: str) -> str | None:
    """``get_quote`` for ``quotes.get_quote`` on server ``quotes``; None for another server's."""
    prefix = f"{server}."
    return name[len(prefix) :] if name.startswith(prefix) else None


def removed_tools(server: str, faults: Iterable[ToolFault]) -> frozenset[str]:
    """The MCP names of the tools of ``server`` that a ``tool_removed`` fault hides."""
    out = set()
    for fault in faults:
        if fault.mode is ToolFaultMode.TOOL_REMOVED and fault.match_url is None:
            out.add(short_name(server, fault.tool) or fault.tool)
    return frozenset(out)
