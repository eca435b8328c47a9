"""A real MCP server for tests: the official ``mcp`` SDK's ``MCPServer`` over streamable HTTP,
served by uvicorn on 127.0.0.1, port 0, in a background thread.

::

    with McpServer() as server:            # tools get_quote and get_news
        async with mcp.Client(server.url) as client: ...

``json_response=False`` (the default) answers POSTs as server-sent events; ``stateless=False``
keeps sessions (``Mcp-Session-Id``) for clients that initialize (``mode="legacy"``).
``server.calls`` counts the tool calls that reached the server, by tool.
"""

from __future__ import annotations

import collections
import socket
import sys
import threading
from types import TracebackType

import uvicorn
from mcp.server.mcpserver import MCPServer

QUOTE = "AAPL trades at 187.25 USD (source: Quotes Inc)"
NEWS = "AAPL news: earnings beat estimates (source: Newswire)"


def quotes_server(calls: collections.Counter[str] | None = None) -> MCPServer:
    """The MCP server of the tests: ``get_quote`` and ``get_news``."""
    counter = calls if calls is not None else collections.Counter()
    server = MCPServer("quotes")

    @server.tool()
    def get_quote(symbol: str) -> str:
        """The latest quote of a stock symbol."""
        counter["get_quote"] += 1
        return QUOTE.replace("AAPL", symbol)

    @server.tool()
    def get_news(symbol: str) -> str:
        """The latest news of a stock symbol."""
        counter["get_news"] += 1
        return NEWS.replace("AAPL", symbol)

    return server


class McpServer:
    """The quotes MCP server over streamable HTTP on a loopback port (module doc)."""

    def __init__(self, json_response: bool = False, stateless: bool = False) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        app = quotes_server(self.calls).streamable_http_app(
            json_response=json_response, stateless_http=stateless
        )
        self._socket = socket.socket()
        # accepted connections inherit it: no Nagle stall on a reply written in two parts
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._started = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> McpServer:
        original = self._server.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await original(sockets)
            self._started.set()

        self._server.startup = startup  # type: ignore[method-assign]
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("the MCP server did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()


if __name__ == "__main__":  # a stdio MCP server: python -m support.mcp_server
    quotes_server().run()
    sys.exit(0)
