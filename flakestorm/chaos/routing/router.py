"""Which request is a tool's, and where it goes instead: :class:`Router`.

A request whose URL is under ``proxy.tools.NAME`` (``http://a/x`` is not under ``http://a/xy``)
is sent to ``<proxy>/tools/NAME`` plus the rest of its path and its query (under
``proxy.mcp.NAME``, an MCP server's, to ``<proxy>/mcp/NAME``; under ``proxy.a2a.NAME``, a
downstream A2A agent's, to ``<proxy>/a2a/NAME``), with the headers
that attribute it (SPEC §4.2): ``X-Flakestorm-Cell`` and ``X-Flakestorm-Scenario`` of the
invocation in progress (:data:`~flakestorm.agents.python.current_call`). A request made outside
an invocation (a thread the agent started without its context) carries none, and the proxy
gives it to the cell the runner declared active.

The proxy's own threads (:data:`~flakestorm.chaos.proxy.framing.serving`) are never routed:
the requests they send to a tool's real upstream go there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from flakestorm.agents.attribution import CELL_HEADER, SCENARIO_HEADER, header_value
from flakestorm.agents.python import current_call
from flakestorm.chaos.proxy.framing import serving
from flakestorm.chaos.proxy.routes import is_under


@dataclass(frozen=True)
class Routed:
    """Where a tool's request goes instead, and the headers it gets."""

    url: str
    tool: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Router:
    """Routes the requests of ``tools`` (name -> base URL) through the proxy at ``proxy_url``."""

    proxy_url: str
    tools: Mapping[str, str]
    servers: Mapping[str, str] = field(default_factory=dict)
    """MCP servers (``proxy.mcp``, streamable HTTP): name -> URL, routed to ``/mcp/NAME``."""
    agents: Mapping[str, str] = field(default_factory=dict)
    """Downstream A2A agents (``proxy.a2a``): name -> URL, routed to ``/a2a/NAME``."""

    def route(self, url: str) -> Routed | None:
        """Where the request for ``url`` goes instead; None when it is no tool's, MCP
        server's or A2A agent's (or this thread serves the proxy). A request to an A2A agent's
        route on the proxy itself (where the card it got through the proxy points) keeps its
        URL and gets the attribution headers."""
        if serving.get():
            return None
        proxy = self.proxy_url.rstrip("/")
        for name in self.agents:
            if is_under(url, f"{proxy}/a2a/{quote(name, safe='')}"):
                return Routed(url, name, attribution())
        for kind, routes in (("tools", self.tools), ("mcp", self.servers), ("a2a", self.agents)):
            for name, base in routes.items():
                if is_under(url, base):
                    rest = url[len(base.rstrip("/")) :]
                    if rest and rest[0] not in "/?":
                        rest = "/" + rest
                    proxied = f"{proxy}/{kind}/{quote(name, safe='')}{rest}"
                    return Routed(proxied, name, attribution())
        return None


UNREACHABLE = "upstream_unreachable"


def unreachable(status: int, marker: str | None, body: bytes) -> str | None:
    """The proxy's reason when its reply (``status``, its
    :data:`~flakestorm.chaos.proxy.reply.UPSTREAM_ERROR_HEADER`
    ``marker``, ``body``) says the tool's real upstream could not be reached, else None: the
    routed client then raises its own connection error, which the agent would have met without
    flakestorm (SPEC §2.5)."""
    if status != 502 or marker != UNREACHABLE:
        return None
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError, RecursionError):
        message = "the upstream is unreachable"
    return f"{message} (through the flakestorm proxy)"


def attribution() -> dict[str, str]:
    """The headers that attribute a request to the invocation in progress (none outside one)."""
    call = current_call.get(None)
    if call is None:
        return {}
    headers = {}
    if call.cell_id:
        headers[CELL_HEADER] = header_value(call.cell_id)
    if call.scenario:
        headers[SCENARIO_HEADER] = header_value(call.scenario)
    return headers
