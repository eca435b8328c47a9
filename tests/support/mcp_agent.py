"""An HTTP agent whose tools live on an MCP server, reached with the official ``mcp`` client.

``python -m support.mcp_agent --port P [--mcp URL]`` (default: the run's proxy, its
``/mcp/quotes`` route; with ``MCP_AGENT_STDIO=1``, the server over stdio through
``flakestorm mcp-stdio``) answers ``POST /chat {"input": ...}`` with
``{"output": "quote: ...; news: ..."}``: it asks the server's ``get_quote`` and ``get_news``,
each in a session of its own (a tool that fails, hangs up or expires its session costs that
tool only), and says which tool was unavailable and why. It forwards the invocation's
``X-Flakestorm-*`` headers on its MCP requests, as an instrumented agent forwards its trace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOLS = ("get_quote", "get_news")
TESTS = Path(__file__).resolve().parent.parent
STDIO = os.environ.get("MCP_AGENT_STDIO") == "1"
CALL_TIMEOUT_S = 10.0
"""A call that gets no answer (a stdio server that hangs) is given up after this."""


def stdio_server(proxy_url: str) -> StdioServerParameters:
    """The quotes server over stdio, through ``flakestorm mcp-stdio``: the agent's MCP
    configuration changes only the command."""
    relay = ["-m", "flakestorm", "mcp-stdio", "--name", "quotes", "--"]
    server = [sys.executable, "-m", "support.mcp_server"]
    env = {"FLAKESTORM_PROXY_URL": proxy_url, "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(
        command=sys.executable, args=[*relay, *server], env=env, cwd=str(TESTS)
    )


async def ask(url: str, tool: str, symbol: str, headers: dict[str, str]) -> str:
    """What ``tool`` said, or why it could not say it."""
    try:
        with anyio.fail_after(CALL_TIMEOUT_S):
            if STDIO:
                server: Any = stdio_server(url)
            else:
                server = streamable_http_client(url, http_client=create_mcp_http_client(headers))
            async with Client(server) as client:
                listed = await client.list_tools()
                if tool not in {t.name for t in listed.tools}:
                    return "unavailable (not offered)"
                result = await client.call_tool(tool, {"symbol": symbol})
    except Exception as exc:  # an agent that handles a failing tool: it says so
        cause: BaseException = exc
        while getattr(cause, "exceptions", None):  # an exception group: its first leaf
            cause = cause.exceptions[0]  # type: ignore[attr-defined]
        return f"unavailable ({type(cause).__name__})"
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    if result.is_error:
        return f"unavailable (error: {' '.join(texts)})"
    return " ".join(texts) or "unavailable (empty)"


async def answer(url: str, prompt: str, headers: dict[str, str]) -> str:
    symbol = "AAPL"
    replies = await asyncio.gather(*(ask(url, tool, symbol, headers) for tool in TOOLS))
    return "; ".join(
        f"{tool.removeprefix('get_')}: {reply}" for tool, reply in zip(TOOLS, replies, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mcp", help="the MCP server's URL (default: the proxy's /mcp/quotes)")
    args = parser.parse_args()
    proxy = os.environ["FLAKESTORM_PROXY_URL"]
    url = proxy if STDIO else args.mcp or f"{proxy}/mcp/quotes"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._send({"ok": True})

        def do_POST(self) -> None:
            if self.path == "/reset":
                self._send({"reset": True})
                return
            length = int(self.headers.get("Content-Length") or 0)
            prompt = json.loads(self.rfile.read(length) or b"{}").get("input", "")
            forwarded = {
                k: v for k, v in self.headers.items() if k.lower().startswith("x-flakestorm-")
            }
            self._send({"output": asyncio.run(answer(url, prompt, forwarded))})

        def _send(self, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
