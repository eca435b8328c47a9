"""``flakestorm mcp-stdio --name NAME -- CMD ...``: the stdio MCP relay (SPEC §11)."""

from __future__ import annotations

import os
import sys

import click

from flakestorm.cli.app import main
from flakestorm.errors import UsageError


@main.command(
    "mcp-stdio", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--name", required=True, help="The MCP server's name: faults name NAME.TOOL.")
@click.option(
    "--proxy",
    "proxy_url",
    metavar="URL",
    help="The run's chaos proxy (default: $FLAKESTORM_PROXY_URL).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def mcp_stdio(name: str, proxy_url: str | None, command: tuple[str, ...]) -> None:
    """Relay a stdio MCP server, with the run's faults on its tools.

    Put `flakestorm mcp-stdio --name NAME --` before the server's command in the agent's MCP
    configuration: its tool calls go through the run's chaos proxy, which faults and records
    them as for a streamable HTTP server.
    """
    from flakestorm.chaos.proxy.stdio_relay import StdioRelay

    url = proxy_url or os.environ.get("FLAKESTORM_PROXY_URL")
    if not url:
        raise UsageError(
            "mcp-stdio: no chaos proxy: set FLAKESTORM_PROXY_URL (flakestorm sets it for an "
            "agent it starts; pass it on to the MCP server's environment) or --proxy URL"
        )
    relay = StdioRelay(name, command, url, sys.stdin.buffer, sys.stdout.buffer)
    raise SystemExit(relay.run())
