"""Which channel a run's faults take to the agent, decided once from the config (SPEC §13), and
the channel opened.

:func:`choose` is read by ``validate`` (through the plan) and by the run alike, so both say the
same: an http agent's faults go through the chaos proxy — a service (``proxy.url``) or one
flakestorm starts in process; a python agent's through wrappers around its callables, and its
HTTP tool calls (``proxy.tools``, streamable-HTTP ``proxy.mcp``) through a proxy flakestorm runs
in process with the process's HTTP clients routed to it. :func:`undeliverable` says what a
python agent lacks for a set of faults (an ``agent.llm`` for LLM faults, something to wrap or
route for tool faults): a config error at ``validate``, never a refusal the run alone makes.
:func:`open_channel` opens the chosen channel for the run.
"""

from __future__ import annotations

import contextlib
import enum
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from flakestorm.agents.importer import Locate
from flakestorm.config import AgentConfig, AgentType, Config, Faults, Proxy, ToolDelivery
from flakestorm.config.vocabulary import LLM_REQUEST_ATTACKS, TOOL_RESULT_ATTACKS
from flakestorm.errors import UsageError

if TYPE_CHECKING:
    from flakestorm.chaos.channels.channel import Channel, ProxyChannel
    from flakestorm.chaos.delivery.interactions import InteractionLog
    from flakestorm.chaos.proxy.server import ChaosProxy


class ChannelKind(enum.Enum):
    """How faults reach the agent."""

    NONE = "none"
    PROXY_SERVICE = "proxy service"
    PROXY = "proxy"
    WRAPPERS = "wrappers"
    WRAPPERS_AND_PROXY = "wrappers and routes"

    def describe(self, choice: ChannelChoice) -> str:
        """One line for ``validate``."""
        if self is ChannelKind.NONE:
            return "none: no fault travels with the agent's calls"
        if self is ChannelKind.PROXY_SERVICE:
            return f"the chaos proxy service at {choice.proxy_url}"
        if self is ChannelKind.PROXY:
            return "the chaos proxy flakestorm starts (in process)"
        if self is ChannelKind.WRAPPERS:
            return "wrappers around the python agent's callables"
        routed = ", ".join(
            [
                *choice.routes,
                *(f"MCP server {n}" for n in choice.mcp),
                *(f"A2A agent {n}" for n in choice.a2a),
            ]
        )
        return (
            "wrappers around the python agent's callables, and a proxy flakestorm runs in "
            f"process for the HTTP calls of {routed}"
        )


@dataclass(frozen=True)
class ChannelChoice:
    kind: ChannelKind
    proxy_url: str | None = None
    """The proxy service's URL (``proxy.url``)."""
    routes: dict[str, str] = field(default_factory=dict)
    """A python agent's tools whose HTTP calls are routed through the in-process proxy."""
    mcp: dict[str, str] = field(default_factory=dict)
    """A python agent's streamable-HTTP MCP servers routed through the in-process proxy."""
    a2a: dict[str, str] = field(default_factory=dict)
    """A python agent's downstream A2A agents routed through the in-process proxy."""

    @property
    def exact_attribution(self) -> bool:
        """Whether the channel attributes every call to its cell whatever the concurrency
        (the wrappers do; the proxy only from what the agent forwards)."""
        return self.kind in (ChannelKind.WRAPPERS, ChannelKind.WRAPPERS_AND_PROXY)

    def describe(self) -> str:
        return self.kind.describe(self)


def python_routes(config: Config) -> dict[str, str]:
    """The tools whose HTTP calls a python agent's clients are routed through the in-process
    proxy for (SPEC §10): ``proxy.tools``; none for an http agent. A tool also named in
    ``agent.tools`` (or its registry) by the same name takes its faults at the HTTP level,
    unless ``agent.tool_delivery`` is ``callable`` (then its URL is not routed)."""
    if config.agent.type is not AgentType.PYTHON or config.proxy is None:
        return {}
    return config.proxy.tool_matches


def python_mcp(config: Config) -> dict[str, str]:
    """The MCP servers (``proxy.mcp``, streamable HTTP) whose calls a python agent's clients
    are routed through the in-process proxy for; none for an http agent."""
    if config.agent.type is not AgentType.PYTHON or config.proxy is None:
        return {}
    return dict(config.proxy.mcp_routes)


def python_a2a(config: Config) -> dict[str, str]:
    """The downstream A2A agents (``proxy.a2a``) whose calls a python agent's clients are
    routed through the in-process proxy for; none for an http agent."""
    if config.agent.type is not AgentType.PYTHON or config.proxy is None:
        return {}
    return dict(config.proxy.a2a)


def choose(config: Config, chaos: bool, record: bool = False) -> ChannelChoice:
    """The channel of a run of ``config``; ``chaos``: some fault of the run travels with the
    agent's calls; ``record``: the run records a cassette (``--record``). Raises
    :class:`UsageError` for a combination no channel serves."""
    agent = config.agent
    proxy = config.proxy or Proxy()
    routes, mcp, a2a = python_routes(config), python_mcp(config), python_a2a(config)
    if record and ((agent.type is not AgentType.HTTP and not routes) or proxy.url):
        raise UsageError(
            "--record needs the in-process proxy: an http agent, or a python agent with "
            "proxy.tools, and no proxy.url (to record through a proxy service, start it "
            "with `flakestorm proxy --record`)"
        )
    if agent.type is AgentType.HTTP:
        if not (chaos or config.proxy is not None or record):
            return ChannelChoice(ChannelKind.NONE)
        if proxy.url:
            return ChannelChoice(ChannelKind.PROXY_SERVICE, proxy_url=proxy.url)
        return ChannelChoice(ChannelKind.PROXY)
    if not (chaos or (routes and record)):
        return ChannelChoice(ChannelKind.NONE)
    if routes or mcp or a2a:
        if proxy.url:
            raise UsageError(
                f"proxy.url ({proxy.url}) is for http agents: a python agent's HTTP tool "
                "calls (proxy.tools) go through a proxy flakestorm runs in process; remove "
                "proxy.url"
            )
        return ChannelChoice(ChannelKind.WRAPPERS_AND_PROXY, routes=routes, mcp=mcp, a2a=a2a)
    return ChannelChoice(ChannelKind.WRAPPERS)


def undeliverable(agent: AgentConfig, proxy: Proxy | None, faults: Faults) -> list[tuple[str, str]]:
    """What a python agent lacks to receive ``faults`` (none for an http agent, whose faults
    go through the proxy): LLM faults and LLM-request attacks need ``agent.llm``; tool faults
    and tool-result attacks need tools to wrap (``agent.tools``, a registry) or HTTP calls to
    route (``proxy.tools``, streamable-HTTP ``proxy.mcp``). One (fault list, message) per
    lack: the list the message is about (``llm_faults``, ``tool_faults``, ``context_attacks``)."""
    if agent.type is not AgentType.PYTHON:
        return []
    attacks = {a.type for a in faults.context_attacks}
    routed = proxy is not None and bool(proxy.tools or proxy.mcp_routes or proxy.a2a)
    sides = (
        (
            faults.llm_faults,
            attacks & LLM_REQUEST_ATTACKS,
            agent.llm is not None,
            ("llm_faults", "LLM faults", "an attack on the LLM's requests"),
            "names no `agent.llm` callable to wrap: set agent.llm to the module:attr the agent "
            "calls its LLM through (LLM faults are never skipped silently)",
        ),
        (
            faults.tool_faults,
            attacks & TOOL_RESULT_ATTACKS,
            bool(agent.tools or agent.tool_registry or routed),
            ("tool_faults", "tool faults", "an attack on tool results"),
            "names no tools: set agent.tools (module:attr of each tool), agent.tool_registry, "
            "proxy.tools (the URLs its tools call) or proxy.mcp (its MCP servers' URLs)",
        ),
    )
    out = []
    for declared, attacked, reached, (where, what, attack), lack in sides:
        if (declared or attacked) and not reached:
            if not declared:
                where, what = "context_attacks", attack
            out.append((where, f"has {what} but the python agent {lack}"))
    return out


def proxy_env(proxy_url: str, agent_endpoint: str) -> dict[str, str]:
    """The environment an agent started by flakestorm gets so its traffic goes through the
    chaos proxy: LLM SDK base URLs, ``HTTP_PROXY``/``HTTPS_PROXY`` for everything else (HTTPS
    as ``CONNECT`` tunnels; not for the agent's own address), and ``FLAKESTORM_PROXY_URL`` for
    ``/tools/<name>`` routes."""
    host = urllib.parse.urlsplit(agent_endpoint).hostname or "127.0.0.1"
    no_proxy = ",".join(dict.fromkeys([host, "localhost"]))
    return {
        "FLAKESTORM_PROXY_URL": proxy_url,
        "OPENAI_BASE_URL": f"{proxy_url}/llm/openai/v1",
        "ANTHROPIC_BASE_URL": f"{proxy_url}/llm/anthropic",
        "HTTP_PROXY": proxy_url,
        "http_proxy": proxy_url,
        "HTTPS_PROXY": proxy_url,
        "https_proxy": proxy_url,
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


@dataclass(frozen=True)
class Opened:
    """An open channel (None for :attr:`ChannelKind.NONE`), and the environment an agent
    flakestorm starts gets so its traffic goes through the proxy."""

    channel: Channel | None
    env: dict[str, str]


@contextlib.contextmanager
def open_channel(
    config: Config,
    base_dir: Path,
    choice: ChannelChoice,
    locate: Locate,
    notice: Callable[[str], None],
    record: str | None = None,
    warnings: list[str] | None = None,
) -> Iterator[Opened]:
    """Open ``choice`` for a run of ``config``, closed afterwards. A route of the config
    overriding the proxy service's is a warning, appended to ``warnings`` and noticed."""
    with contextlib.ExitStack() as stack:
        if choice.kind in (ChannelKind.PROXY_SERVICE, ChannelKind.PROXY):
            channel = _proxy(config, base_dir, choice, stack, notice, record, warnings)
            yield Opened(channel, proxy_env(channel.url, config.agent.endpoint))
        elif choice.kind is ChannelKind.NONE:
            yield Opened(None, {})
        else:
            yield Opened(_wrappers(config, base_dir, choice, locate, stack, notice, record), {})


def _proxy(
    config: Config,
    base_dir: Path,
    choice: ChannelChoice,
    stack: contextlib.ExitStack,
    notice: Callable[[str], None],
    record: str | None,
    warnings: list[str] | None,
) -> ProxyChannel:
    """The chaos proxy of an http agent: the service, its routes pushed from the config (the
    one source of truth, SPEC §9), or one started in process."""
    from flakestorm.chaos.proxy.control import ProxyControl
    from flakestorm.chaos.proxy.upstreams.cassette import resolve_cassette

    proxy_config = config.proxy or Proxy()
    llm_upstream = resolve_cassette(proxy_config.llm_upstream, base_dir)
    if choice.kind is ChannelKind.PROXY_SERVICE:
        assert choice.proxy_url is not None
        control = ProxyControl(choice.proxy_url, proxy_config.token)
        stack.callback(control.close)
        health = control.health()  # ProxyUnreachable (exit 3) with how to fix it
        flies = health.get("flight") is True  # an older proxy service runs scenarios in turn
        control.reset()
        routed = control.route(
            proxy_config.tool_upstreams,
            llm_upstream,
            proxy_config.mcp_routes,
            proxy_config.redirected,
            proxy_config.a2a,
        )
        for warning in routed:
            if warnings is not None:
                warnings.append(warning)
            notice(f"warning: {warning}")
    else:
        tools, mcp = proxy_config.tool_upstreams, proxy_config.mcp_routes
        proxy = _started(config, base_dir, stack, tools, mcp, record)
        notice(f"chaos proxy (in-process) listening on {proxy.url}")
        control = ProxyControl(proxy.url, proxy_config.token)
        stack.callback(control.close)
        flies = True
    from flakestorm.chaos.channels.channel import ProxyChannel

    return ProxyChannel(control, proxy_config.mcp, flies=flies)


def _wrappers(
    config: Config,
    base_dir: Path,
    choice: ChannelChoice,
    locate: Locate,
    stack: contextlib.ExitStack,
    notice: Callable[[str], None],
    record: str | None,
) -> Channel:
    """A python agent's callables wrapped, and with routes, the in-process proxy its HTTP
    clients are routed through for them (``agent.tool_delivery: callable``: a wrapped tool's
    URL is not routed)."""
    from flakestorm.chaos.channels.channel import InProcessChannel, WrapperChannel
    from flakestorm.chaos.delivery.interactions import InteractionLog
    from flakestorm.chaos.wrappers.wrapping import Wrapping

    agent = config.agent
    at_http = agent.tool_delivery in (None, ToolDelivery.HTTP)
    routes = choice.routes
    wrapping = stack.enter_context(
        Wrapping(agent, base_dir, InteractionLog(), locate, routed=routes if at_http else ())
    )
    routes = {k: v for k, v in routes.items() if at_http or not wrapping.wraps(k)}
    if choice.kind is ChannelKind.WRAPPERS or not (routes or choice.mcp or choice.a2a):
        return WrapperChannel(wrapping)
    from flakestorm.chaos.routing import Router, Routing

    proxy_config = config.proxy or Proxy()
    upstreams = proxy_config.tool_upstreams
    tools = {name: upstreams[name] for name in routes}
    proxy = _started(config, base_dir, stack, tools, choice.mcp, record, wrapping.log)
    routing = stack.enter_context(Routing(Router(proxy.url, routes, proxy.mcp, proxy.a2a)))
    routed = [*routes, *(f"MCP server {name}" for name in proxy.mcp)]
    routed += [f"A2A agent {name}" for name in proxy.a2a]
    notice(
        f"chaos proxy (in-process) listening on {proxy.url}: the HTTP calls of "
        f"{', '.join(routed)} through {', '.join(routing.libraries)} are routed through it"
    )
    return InProcessChannel(wrapping, proxy, routes, proxy_config.mcp)


def _started(
    config: Config,
    base_dir: Path,
    stack: contextlib.ExitStack,
    tools: Mapping[str, str],
    mcp: Mapping[str, str],
    record: str | None,
    log: InteractionLog | None = None,
) -> ChaosProxy:
    """The proxy flakestorm starts itself on 127.0.0.1 (``proxy.port``, else a free port),
    routing ``tools`` (name -> upstream; a ``{match, forward}`` route's calls are recognised by
    its match) and the ``mcp`` servers, stopped with ``stack``."""
    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.chaos.proxy.upstreams.cassette import resolve_cassette

    proxy_config = config.proxy or Proxy()
    proxy = ChaosProxy(
        "127.0.0.1",
        proxy_config.port or 0,
        llm_upstream=resolve_cassette(proxy_config.llm_upstream, base_dir),
        tools=tools,
        mcp=mcp,
        matches={n: m for n, m in proxy_config.redirected.items() if n in tools},
        a2a=proxy_config.a2a,
        token=proxy_config.token,
        log=log,
        record=record,
    )
    return stack.enter_context(proxy)
