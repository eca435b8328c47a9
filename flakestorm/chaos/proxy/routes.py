"""The data routes: which call a request is (tool, LLM or other traffic) and whose cell it is.

Routes (the data routes never use the ``/_flakestorm/`` prefix)::

    /llm/openai/v1/...       -> llm_upstream + /v1/...   (default https://api.openai.com)
    /llm/anthropic/v1/...    -> llm_upstream + /v1/...   (default https://api.anthropic.com)
    /tools/NAME/REST?QUERY   -> tools[NAME] + /REST?QUERY (unknown NAME: 404 naming the tools)
    /mcp/NAME/REST?QUERY     -> mcp[NAME] + /REST?QUERY   (an MCP server, streamable HTTP)
    /a2a/NAME/REST?QUERY     -> a2a[NAME] + /REST?QUERY   (a downstream A2A agent)
    GET http://host/path     forward-proxy mode (HTTP_PROXY): forwarded to that URL

What is a call of what:

- ``/llm/...``: an LLM call when the path is a generation endpoint (``is_llm_path``); other
  LLM-API paths (``GET /v1/models``) pass through untouched (no faults), but are recorded to
  and served from a cassette like LLM calls (cassette target ``llm``).
- ``/tools/NAME/...``: a call of tool ``NAME`` (while a replayed session is active, also a
  ``NAME`` with no route: the recording answers it, logged as ``replay:/REST``).
- ``/mcp/NAME/...``, and in forward mode a URL under ``mcp[NAME]``: MCP traffic of server
  ``NAME``, whose JSON-RPC :mod:`~flakestorm.chaos.proxy.mcp_calls` reads (a ``tools/call`` is
  a call of tool ``NAME.TOOL``; everything else passes through untouched).
- ``/a2a/NAME/...``, and in forward mode a URL under ``a2a[NAME]``: traffic of downstream A2A
  agent ``NAME``, which
  :mod:`~flakestorm.chaos.proxy.a2a_calls` reads (each A2A call is a call of tool ``NAME``; its
  card passes, its interface URLs pointed back through the proxy).
- ``/mcp-relay/ID/call`` with an ``X-Flakestorm-Mcp: NAME`` header (:data:`MCP_HEADER`): MCP
  traffic of server ``NAME``, sent by the stdio relay ``ID`` and answered through it
  (:mod:`~flakestorm.chaos.proxy.relays`); in forward mode with that header, MCP traffic of
  server ``NAME`` at the URL.
- forward mode: a call of tool ``NAME`` when the URL starts with ``tools[NAME]`` (or, for a
  ``{match, forward}`` route, with ``matches[NAME]``: the call then goes to ``tools[NAME]``
  plus the rest of its path), or when it
  matches the ``match_url`` of a tool fault (then the tool is that fault's ``tool``); else an LLM
  call when the path ends with ``/chat/completions``, ``/completions``, ``/responses`` or
  ``/messages`` (sent to the URL itself, or to the proxy's own LLM upstream, ``mock`` or a
  cassette, when ``llm_upstream`` is one of those); else other traffic, forwarded and logged
  without faults.

Attribution (:mod:`flakestorm.agents.attribution`): the cell of a call is its ``X-Flakestorm-Cell``
header, else the ``flakestorm-cell`` entry of a W3C ``baggage`` header (percent-decoded), else
the invocation whose trace its ``traceparent`` continues (:meth:`FaultBook.traced`), else the
active scenario's ``cell_id``. A call whose ``X-Flakestorm-Scenario`` names another scenario
than the active one is a straggler from an earlier scenario: it is passed through with no fault,
and logged under the scenario it names with no cell (``""``) and ``call_index`` -1, so it never
consumes the active scenario's ``after_calls`` counts nor proves one of its faults delivered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from flakestorm.agents import attribution
from flakestorm.agents.attribution import SCENARIO_HEADER
from flakestorm.chaos import llm
from flakestorm.chaos.faults.decisions import UNATTRIBUTED, FaultBook, Target, tool_matches
from flakestorm.chaos.proxy import relays
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.reply import HttpResponse, error_reply
from flakestorm.errors import UsageError

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.inbound import RequestHeaders
    from flakestorm.chaos.proxy.server import ChaosProxy

DEFAULT_LLM_UPSTREAMS = {
    llm.Provider.OPENAI: "https://api.openai.com",
    llm.Provider.ANTHROPIC: "https://api.anthropic.com",
}
"""Where LLM calls go when ``llm_upstream`` is not set: each provider's public API."""


_LLM_PREFIXES = tuple((f"/llm/{provider.value}", provider) for provider in llm.Provider)

MCP_HEADER = "X-Flakestorm-Mcp"
"""Marks a request as MCP traffic of the server it names: how the stdio relay
(:mod:`~flakestorm.chaos.proxy.stdio_relay`) sends a stdio server's calls to the proxy."""


def route(
    proxy: ChaosProxy, method: str, path: str, mcp_server: str | None = None
) -> ServedCall | HttpResponse:
    """The call a data request is, or the 404 it gets (``mcp_server``: the request's
    :data:`MCP_HEADER`)."""
    if path.startswith(("http://", "https://")):
        if mcp_server:
            parts = urlsplit(path)
            return ServedCall(
                Target.OTHER, method, path, parts.path, parts.query, mcp=unquote(mcp_server)
            )
        return _route_forward(proxy, method, path)
    rel, _, query = path.partition("?")
    relay = relays.call_relay(rel)
    if relay is not None:
        if not mcp_server:
            return error_reply(
                400, "bad_request", f"a stdio relay's call names its MCP server in {MCP_HEADER}"
            )
        upstream = f"{relays.SCHEME}{relay}"
        return ServedCall(Target.OTHER, method, upstream, "/", query, mcp=unquote(mcp_server))
    if rel.startswith("/llm/"):
        for prefix, provider in _LLM_PREFIXES:
            if rel == prefix or rel.startswith(prefix + "/"):
                return _llm_call(proxy, provider, rel[len(prefix) :], query, method)
    if rel.startswith("/mcp/"):
        return _mcp_call(proxy, method, rel, query)
    if rel.startswith("/a2a/"):
        return _a2a_call(proxy, method, rel, query)
    if rel.startswith("/tools/"):
        return _tool_call(proxy, method, rel, query)
    return error_reply(
        404,
        "not_found",
        f"no route for {rel}: use /llm/openai/v1/..., /llm/anthropic/v1/..., "
        "/tools/NAME/..., /mcp/NAME, /a2a/NAME, or this proxy as HTTP_PROXY",
    )


def _tool_call(proxy: ChaosProxy, method: str, rel: str, query: str) -> ServedCall | HttpResponse:
    name, rest = _named(rel, "/tools/")
    if name not in proxy.tools and proxy.book.scenario.replay is not None:
        # a replayed session serves it (a tool recorded nowhere is a replay miss)
        upstream = _with_query(f"replay:{rest}", query)
        return ServedCall(Target.TOOL, method, upstream, rest, query, tool=name)
    if name not in proxy.tools:
        return _unknown("unknown_tool", f"tool {name!r}", proxy.tools, "proxy.tools", "--tool")
    upstream = _with_query(_joined(proxy.tools[name], rest), query)
    return ServedCall(Target.TOOL, method, upstream, rest, query, tool=name)


def _mcp_call(proxy: ChaosProxy, method: str, rel: str, query: str) -> ServedCall | HttpResponse:
    name, rest = _named(rel, "/mcp/")
    if name not in proxy.mcp:
        return _unknown(
            "unknown_mcp_server", f"MCP server {name!r}", proxy.mcp, "proxy.mcp", "--mcp"
        )
    upstream = _with_query(_joined(proxy.mcp[name], rest), query)
    return ServedCall(Target.OTHER, method, upstream, rest, query, mcp=name)


def _a2a_call(proxy: ChaosProxy, method: str, rel: str, query: str) -> ServedCall | HttpResponse:
    name, rest = _named(rel, "/a2a/")
    if name not in proxy.a2a:
        return _unknown("unknown_a2a_agent", f"A2A agent {name!r}", proxy.a2a, "proxy.a2a", "--a2a")
    upstream = _with_query(_joined(proxy.a2a[name], rest), query)
    return ServedCall(Target.OTHER, method, upstream, rest, query, a2a=name)


def _named(rel: str, prefix: str) -> tuple[str, str]:
    """The name a ``/tools/NAME/...`` or ``/mcp/NAME/...`` path routes to, and the rest of it
    (``/v1/quotes``; "" for none)."""
    quoted, slash, rest = rel[len(prefix) :].partition("/")
    return unquote(quoted), slash + rest


def _unknown(
    code: str, what: str, configured: Iterable[str], section: str, option: str
) -> HttpResponse:
    """The 404 of a route to ``what`` that this proxy has no ``section`` entry for."""
    listed = ", ".join(sorted(configured)) or "none"
    return error_reply(
        404,
        code,
        f"no {what} is configured on this proxy (configured: {listed}); "
        f"add it under {section} or with {option} NAME=URL",
    )


def _with_query(url: str, query: str) -> str:
    return f"{url}?{query}" if query else url


def _llm_call(
    proxy: ChaosProxy, provider: llm.Provider, rest: str, query: str, method: str
) -> ServedCall:
    target = Target.LLM if llm.is_llm_path(rest) else Target.OTHER
    if proxy.llm_source is not None:
        upstream = _with_query(f"{proxy.llm_source}:{rest}", query)
        return ServedCall(target, method, upstream, rest, query, provider=provider, local=True)
    upstream = _with_query(
        _joined(proxy.llm_upstream or DEFAULT_LLM_UPSTREAMS[provider], rest), query
    )
    return ServedCall(target, method, upstream, rest, query, provider=provider)


def _route_forward(proxy: ChaosProxy, method: str, url: str) -> ServedCall:
    parts = urlsplit(url)
    for server, root in proxy.mcp.items():
        if is_under(url, root):
            return ServedCall(Target.OTHER, method, url, parts.path, parts.query, mcp=server)
    for agent, root in proxy.a2a.items():
        if is_under(url, root):
            rel = url[len(root.rstrip("/")) :].split("?", 1)[0]
            return ServedCall(Target.OTHER, method, url, rel, parts.query, a2a=agent)
    tool = tool_for_url(proxy, url)
    if tool is not None:
        base = proxy.matches.get(tool) or proxy.tools.get(tool)
        if base is not None and is_under(url, base):
            rest = url[len(base.rstrip("/")) :]
            rel = rest.split("?", 1)[0]
            if tool in proxy.matches:  # a {match, forward} route: sent on to its forward URL
                url = _joined(proxy.tools[tool], rest.split("?", 1)[0])
                url += f"?{parts.query}" if parts.query else ""
        else:
            rel = f"{parts.scheme}://{parts.netloc}{parts.path}"
        return ServedCall(Target.TOOL, method, url, rel, parts.query, tool=tool)
    if llm.is_llm_path(parts.path):
        provider = llm.provider_of(parts.path)
        if proxy.llm_source is not None:
            call = _llm_call(proxy, provider, parts.path, parts.query, method)
            call.target = Target.LLM
            return call
        return ServedCall(Target.LLM, method, url, parts.path, parts.query, provider=provider)
    return ServedCall(Target.OTHER, method, url, parts.path, parts.query)


def tool_for_url(proxy: ChaosProxy, url: str) -> str | None:
    """The configured tool whose match (its upstream, or its route's ``match``) ``url`` is
    under, else one a ``match_url`` names."""
    for name, base in proxy.tools.items():
        if is_under(url, proxy.matches.get(name, base)):
            return name
    for scenario in proxy.active_scenarios():
        for fault in scenario.tool_faults:
            if fault.match_url and tool_matches(fault, None, url):
                return fault.tool
    return None


def attribute(call: ServedCall, proxy: ChaosProxy, headers: RequestHeaders) -> FaultBook | None:
    """Set the call's scenario, cell and where the cell came from; the book to decide with
    (None: a straggler of another scenario). With scenarios in flight, the book of the
    scenario the call's invocation is under (:mod:`flakestorm.chaos.faults.flight`)."""
    book, flight = proxy.book, proxy.flight
    named = headers.get(SCENARIO_HEADER)
    if named is not None:
        named = unquote(named)  # percent-encoded by flakestorm's http agent
    lookup = book.traced
    if flight is not None:
        lookup = lambda trace: flight.traced(trace) or book.traced(trace)  # noqa: E731
    attributed, source = attribution.read(lambda name: headers.get_all(name, []), lookup)
    scenario = flight.scenario_of(attributed) if flight is not None else None
    if flight is not None and scenario is not None and named in (None, scenario):
        book = flight.books[scenario]
    elif named is not None and named != book.scenario.name:
        call.scenario, call.cell = named, UNATTRIBUTED
        return None
    call.scenario = book.scenario.name
    call.cell = book.cell_of(attributed)
    call.attribution = source.value if call.cell else ""
    return book


def check_url(value: str, what: str) -> str:
    """``value``, when it is an http(s) URL; else a UsageError naming ``what``."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{what}: {value!r} is not an http(s) URL (expected e.g. https://host)")
    return value


def _joined(base: str, rest: str) -> str:
    return base.rstrip("/") + rest if rest else base


def is_under(url: str, base: str) -> bool:
    """Whether ``url`` is ``base`` or below it (``http://a/x`` is not under ``http://a/xy``)."""
    if not url.startswith(base):
        return False
    return base.endswith("/") or len(url) == len(base) or url[len(base)] in "/?#"
