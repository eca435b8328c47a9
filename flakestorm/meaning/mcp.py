"""Meaning checks of MCP tools (SPEC §11): the ``proxy.mcp`` routes, and faults that name MCP
tools. A server's tools are known only at run time, so a fault's ``tool`` that names no HTTP
tool route is a warning when MCP servers are configured; an MCP-only mode (``tool_removed``,
``session_expired``) or ``as`` without any MCP server is an error."""

from __future__ import annotations

from flakestorm.config import AgentType
from flakestorm.config.contract import STDIO_SERVER
from flakestorm.meaning.agent import URL
from flakestorm.meaning.scope import Scope, fields_set, listing
from flakestorm.meaning.sections import path_segment_problem


def check_mcp(scope: Scope) -> None:
    """Reads ``agent`` and ``proxy``."""
    proxy, agent = scope.parts.proxy, scope.parts.agent
    servers = dict(proxy.mcp) if proxy is not None else {}
    tools = set(proxy.tools) | set(proxy.a2a) if proxy is not None else set()
    for name, url in servers.items():
        problem = path_segment_problem(name, "MCP server name")
        if problem:
            scope.error(("proxy", "mcp", name), problem, key=True)
        if not URL.match(url) and url != STDIO_SERVER:
            scope.error(
                ("proxy", "mcp", name),
                f"{url!r} is not an http(s) URL (nor 'stdio', for a server relayed by "
                "flakestorm mcp-stdio)",
            )
    http_agent = agent is not None and agent.type is AgentType.HTTP
    warned: set[str] = set()
    for faults in scope.parts.fault_sets:
        for item in faults.tool_faults:
            fault = item.model
            if fault is None:
                continue
            uses_mcp = fault.mode.mcp_only or "as" in fields_set(fault)
            if uses_mcp and not servers:
                what = f"mode {fault.mode.value!r}" if fault.mode.mcp_only else "'as'"
                scope.error(
                    (*item.path, "mode" if fault.mode.mcp_only else "as"),
                    f"{what} acts on MCP tools, and proxy.mcp names no MCP server (add "
                    "proxy.mcp: {NAME: URL} for the server that hosts the tool)",
                )
                continue
            if not servers or not http_agent or fault.match_url or fault.tool == "*":
                continue
            server = fault.tool.partition(".")[0] if "." in fault.tool else None
            if fault.tool in tools or server in servers or fault.tool in warned:
                continue
            warned.add(fault.tool)
            which = (
                f"the MCP server {next(iter(servers))!r}, named {next(iter(servers))}."
                f"{fault.tool} in reports"
                if len(servers) == 1
                else f"an MCP server ({listing(sorted(servers))}): write SERVER.{fault.tool} "
                "to say which, and reports name it"
            )
            scope.warn(
                (*item.path, "tool"),
                f"{fault.tool!r} is not an HTTP tool of proxy.tools; it must be a tool of "
                f"{which}; a server's tools are known only at run time (a fault no call "
                "reaches is reported as not delivered)",
            )
