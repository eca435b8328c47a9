"""``flakestorm proxy``: the chaos proxy as a standalone service."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from flakestorm.cli.app import load, main


@main.command("proxy")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: any."
)
@click.option(
    "--llm-upstream",
    metavar="URL|mock|cassette:PATH",
    help="Where LLM calls go (default: each provider's public API, or the config's).",
)
@click.option(
    "--tool",
    "tool_routes",
    multiple=True,
    metavar="NAME=URL",
    help="A tool route /tools/NAME/... -> URL (repeatable; adds to the config's).",
)
@click.option(
    "--mcp",
    "mcp_routes",
    multiple=True,
    metavar="NAME=URL",
    help="An MCP server (streamable HTTP) /mcp/NAME -> URL (repeatable; adds to the config's).",
)
@click.option(
    "--a2a",
    "a2a_routes",
    multiple=True,
    metavar="NAME=URL",
    help="A downstream A2A agent /a2a/NAME -> its base URL (repeatable; adds to the config's).",
)
@click.option(
    "--record",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record real upstream exchanges to this cassette file.",
)
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Take llm_upstream, tools, mcp, a2a and token from this config's `proxy` section.",
)
def proxy(
    host: str,
    port: int,
    llm_upstream: str | None,
    tool_routes: tuple[str, ...],
    mcp_routes: tuple[str, ...],
    a2a_routes: tuple[str, ...],
    record: Path | None,
    config_path: Path | None,
) -> None:
    """Run the chaos proxy until Ctrl-C (SIGINT) or SIGTERM.

    Point the agent's OPENAI_BASE_URL at <url>/llm/openai/v1, ANTHROPIC_BASE_URL at
    <url>/llm/anthropic, tools at <url>/tools/NAME, MCP clients at <url>/mcp/NAME, A2A clients
    at <url>/a2a/NAME, and HTTP_PROXY/HTTPS_PROXY at <url>.
    Control calls (under /_flakestorm/) need `Authorization: Bearer $FLAKESTORM_PROXY_TOKEN`
    when that variable (or proxy.token) is set.
    """
    import os

    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.chaos.proxy.serving import parse_tools
    from flakestorm.chaos.proxy.upstreams.cassette import resolve_cassette
    from flakestorm.redaction import without_userinfo
    from flakestorm.stopping import stopping_on_signals

    token = os.environ.get("FLAKESTORM_PROXY_TOKEN") or None
    tools: dict[str, str] = {}
    servers: dict[str, str] = {}
    agents: dict[str, str] = {}
    matches: dict[str, str] = {}
    if config_path is not None:
        loaded = load(config_path)
        section = loaded.config.proxy
        if section is not None:
            tools.update(section.tool_upstreams)
            matches.update(section.redirected)
            servers.update(section.mcp_routes)
            agents.update(section.a2a)
            token = token or section.token
            upstream = section.llm_upstream
            llm_upstream = llm_upstream or resolve_cassette(upstream, loaded.base_dir)
    given = parse_tools(tool_routes, "--tool")
    tools.update(given)
    matches = {name: url for name, url in matches.items() if name not in given}
    servers.update(parse_tools(mcp_routes, "--mcp"))
    agents.update(parse_tools(a2a_routes, "--a2a"))
    chaos = ChaosProxy(
        host,
        port,
        llm_upstream,
        tools,
        token=token,
        mcp=servers,
        matches=matches,
        a2a=agents,
        record=record,
    )
    stop = threading.Event()
    with stopping_on_signals(stop), chaos:
        routes = ", ".join(sorted(tools)) or "none"
        if servers:
            routes += f"; mcp: {', '.join(sorted(servers))}"
        if agents:
            routes += f"; a2a: {', '.join(sorted(agents))}"
        llm = without_userinfo(llm_upstream) if llm_upstream else "provider APIs"
        click.echo(f"flakestorm proxy listening on {chaos.url} (llm: {llm}; tools: {routes})")
        while not stop.wait(0.5):
            pass
