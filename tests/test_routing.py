"""HTTP-level faults in process (SPEC §10): a python agent's HTTP clients are routed through the
run's chaos proxy for the URLs of ``proxy.tools``, so the tool's own client meets the fault and
the tool's own error handling runs, also when the tool was bound with ``from x import f``."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import textwrap
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests
from requests.adapters import HTTPAdapter
from support.server import LoopbackServer, Request, Response

from flakestorm.agents import Call
from flakestorm.agents.python import current_call
from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.routing import Router, Routing
from flakestorm.config import ToolFault, ToolFaultMode
from flakestorm.engine.runner import Overrides, run_ci, run_phases
from flakestorm.loader import load_config_text
from flakestorm.results.model import Status


def quote_api(request: Request) -> Response:
    return Response.json({"ticker": "AAPL", "price": "123.45", "path": request.path})


@pytest.fixture
def api() -> Iterator[LoopbackServer]:
    with LoopbackServer(quote_api) as server:
        yield server


@pytest.fixture
def other() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda r: Response.text("not a tool")) as server:
        yield server


def _get_requests(url: str) -> tuple[int, str]:
    reply = requests.get(url, timeout=10)
    return reply.status_code, reply.text


def _get_httpx(url: str) -> tuple[int, str]:
    with httpx.Client() as client:
        reply = client.get(url)
    return reply.status_code, reply.text


def _get_httpx_async(url: str) -> tuple[int, str]:
    async def get() -> tuple[int, str]:
        async with httpx.AsyncClient() as client:
            reply = await client.get(url)
        return reply.status_code, reply.text

    return asyncio.run(get())


def _get_urllib(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def _get_aiohttp(url: str) -> tuple[int, str]:
    async def get() -> tuple[int, str]:
        async with aiohttp.ClientSession() as session, session.get(url) as reply:
            return reply.status, await reply.text()

    return asyncio.run(get())


FAULT = ToolFault(tool="quotes", mode=ToolFaultMode.ERROR, error_code=503)

CLIENTS = {
    "aiohttp": _get_aiohttp,
    "requests": _get_requests,
    "httpx": _get_httpx,
    "httpx-async": _get_httpx_async,
    "urllib": _get_urllib,
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_each_client_meets_the_fault_on_a_tool_url_only(
    client: str, api: LoopbackServer, other: LoopbackServer
) -> None:
    get = CLIENTS[client]
    base = api.url_for("/v1")
    fault = ToolFault(tool="quotes", mode=ToolFaultMode.ERROR, error_code=503)
    with ChaosProxy(tools={"quotes": base}) as proxy:
        proxy.activate(ActiveScenario(name="down", seed=1, tool_faults=(fault,)))
        with Routing(Router(proxy.url, {"quotes": base})) as routing:
            token = current_call.set(Call(cell_id="answers[down]#0.0", scenario="down"))
            try:
                faulted = get(api.url_for("/v1/quote?ticker=AAPL"))
                untouched = get(other.url_for("/v1/quote"))
            finally:
                current_call.reset(token)
        assert set(routing.libraries) == {"requests", "httpx", "httpx2", "urllib", "aiohttp"}
        calls = proxy.log.snapshot()
    assert faulted[0] == 503 and "error" in json.loads(faulted[1])
    assert untouched == (200, "not a tool")
    assert [(c.tool, c.cell_id, c.fired) for c in calls] == [
        ("quotes", "answers[down]#0.0", ("tool_faults[0] error(503) on quotes",))
    ]
    assert calls[0].url == base + "/quote"
    assert api.requests == []  # the fault answered in place of the API
    # after the run, the tool URL goes where it went
    assert json.loads(get(api.url_for("/v1/quote"))[1])["path"] == "/v1/quote"


@pytest.mark.parametrize(
    ("client", "match"),
    [(c, "http://quotes.example.invalid/v1") for c in CLIENTS]
    + [
        (c, "https://api.market.example/v1") for c in ("requests", "httpx", "httpx-async", "urllib")
    ],
)
def test_a_match_forward_route_sends_a_hard_coded_api_to_a_local_stub(
    client: str, match: str, api: LoopbackServer
) -> None:
    """``{match, forward}``: the URL the agent's code hard-codes (https too, routed before TLS)
    goes to the stub, and its faults fire there as on any tool route."""
    get, stub = CLIENTS[client], api.url_for("/stub")
    with ChaosProxy(tools={"quotes": stub}, matches={"quotes": match}) as proxy:
        with Routing(Router(proxy.url, {"quotes": match})):
            answered = get(match + "/quote?ticker=AAPL")
            proxy.activate(ActiveScenario(name="down", seed=1, tool_faults=(FAULT,)))
            faulted = get(match + "/quote")
        calls = proxy.log.snapshot()
    assert answered[0] == 200, answered
    assert json.loads(answered[1])["path"] == "/stub/quote?ticker=AAPL"
    assert faulted[0] == 503
    assert [c.tool for c in calls] == ["quotes", "quotes"]
    assert [c.url.split("?")[0] for c in calls] == [stub + "/quote"] * 2
    assert calls[1].fired == ("tool_faults[0] error(503) on quotes",)


def test_an_https_match_tunnelled_through_the_proxy_is_refused_with_the_way_out(
    api: LoopbackServer,
) -> None:
    """A client that sends https calls as a CONNECT tunnel (an http agent's HTTPS_PROXY,
    aiohttp's proxy mode) cannot be redirected: the tunnel is refused, saying how to route."""
    match = "https://api.market.example/v1"
    with ChaosProxy(tools={"quotes": api.url}, matches={"quotes": match}) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            sock.sendall(b"CONNECT api.market.example:443 HTTP/1.1\r\nHost: x\r\n\r\n")
            head = sock.recv(65536).decode()
        calls = proxy.log.snapshot()
    assert head.startswith("HTTP/1.1 502")
    assert "neither read nor redirect" in head and "/tools/quotes" in head
    assert [(c.tool, c.upstream_error.split(":")[0]) for c in calls] == [
        ("quotes", "cannot_redirect")
    ]
    assert api.requests == []


def test_an_http_agents_forward_proxy_call_to_a_match_goes_to_its_forward(
    api: LoopbackServer,
) -> None:
    match = "http://quotes.example.invalid/v1"
    with ChaosProxy(tools={"quotes": api.url_for("/stub")}, matches={"quotes": match}) as proxy:
        reply = requests.get(match + "/quote?x=1", proxies={"http": proxy.url}, timeout=10)
        calls = proxy.log.snapshot()
    assert reply.status_code == 200 and reply.json()["path"] == "/stub/quote?x=1"
    assert [c.tool for c in calls] == ["quotes"]


def _closed_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _raised(get: object, url: str) -> BaseException:
    with pytest.raises(Exception) as caught:
        get(url)  # type: ignore[operator]
    return caught.value


@pytest.mark.parametrize("client", list(CLIENTS))
def test_an_unreachable_upstream_is_the_clients_own_connection_error(client: str) -> None:
    """With no fault on the call, a tool's API that is down looks to the agent's client as it
    would without flakestorm: the library's connection error, not the proxy's 502."""
    get, base = CLIENTS[client], _closed_url()
    direct = _raised(get, base + "/quote")
    with ChaosProxy(tools={"quotes": base}) as proxy, Routing(Router(proxy.url, {"quotes": base})):
        routed = _raised(get, base + "/quote")
        calls = proxy.log.snapshot()
    assert type(routed) is type(direct), (routed, direct)
    assert "is unreachable" in str(routed) and "through the flakestorm proxy" in str(routed)
    assert [(c.tool, c.status) for c in calls] == [("quotes", 502)]
    assert calls[0].upstream_error.startswith("upstream_unreachable")


def test_without_a_fault_the_call_reaches_the_api_through_the_proxy(api: LoopbackServer) -> None:
    base = api.url
    with ChaosProxy(tools={"quotes": base}) as proxy, Routing(Router(proxy.url, {"quotes": base})):
        status, text = _get_requests(api.url_for("/v1/quote?ticker=AAPL"))
        assert [c.tool for c in proxy.log.snapshot()] == ["quotes"]
    assert status == 200 and json.loads(text)["path"] == "/v1/quote?ticker=AAPL"
    assert "X-Flakestorm-Cell" not in api.requests[0].headers  # attribution stays with the proxy


def test_leaving_puts_the_originals_back() -> None:
    send = HTTPAdapter.send
    handle = httpx.HTTPTransport.handle_request
    session_init = aiohttp.ClientSession.__init__
    opener = getattr(urllib.request, "_opener", None)  # urlopen's, when it made one
    with Routing(Router("http://127.0.0.1:9", {"t": "http://127.0.0.1:8"})):
        assert HTTPAdapter.send is not send
        assert getattr(urllib.request, "_opener", None) is not opener
    assert HTTPAdapter.send is send and httpx.HTTPTransport.handle_request is handle
    assert getattr(urllib.request, "_opener", None) is opener
    assert aiohttp.ClientSession.__init__ is session_init


TOOLS = """
import requests

API = {api!r}


def get_quote(ticker):
    reply = requests.get(f"{{API}}/quote", params={{"ticker": ticker}}, timeout=10)
    reply.raise_for_status()
    return reply.json()["price"]
"""

AGENT = """
import requests
from {tools} import get_quote


def answer(prompt):
    try:
        price = get_quote("AAPL")
    except requests.RequestException as exc:
        status = getattr(exc.response, "status_code", None)
        return f"Live market data is unavailable ({{status}})."
    return f"AAPL trades at {{price}}."
"""

CONFIG = """
agent:
  type: python
  endpoint: "{agent}:answer"
  {tools_line}
proxy:
  tools: {{get_quote: "{api}"}}
golden_prompts: ["price of AAPL?"]
contract:
  name: quotes
  invariants:
    - {{id: price, type: contains, value: "123.45", severity: critical}}
    - {{id: honest, type: contains, value: "unavailable (503)", when: tool_faults_active}}
  chaos_matrix:
    - {{name: calm}}
    - name: down
      tool_faults: [{{tool: get_quote, mode: error, error_code: 503}}]
"""


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: str, named: bool) -> str:
    suffix = uuid.uuid4().hex[:8]
    agent, tools = f"rt_agent_{suffix}", f"rt_tools_{suffix}"
    (tmp_path / f"{tools}.py").write_text(textwrap.dedent(TOOLS.format(api=api)))
    (tmp_path / f"{agent}.py").write_text(textwrap.dedent(AGENT.format(tools=tools)))
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in (agent, tools):
        monkeypatch.delitem(sys.modules, module, raising=False)
    tools_line = f'tools: ["{tools}:get_quote"]' if named else ""
    return CONFIG.format(agent=agent, api=api, tools_line=tools_line)


PROJECT_VERDICTS = {
    "price[calm]": Status.PASSED,
    "price[down]": Status.FAILED,
    "honest[calm]": Status.SKIPPED,
    "honest[down]": Status.PASSED,
}
"""The project's verdicts when its tool's HTTP call takes the fault (``_project``)."""


@pytest.mark.parametrize("named", [False, True], ids=["from-import", "also-in-agent-tools"])
def test_a_tool_bound_with_from_import_gets_its_http_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: LoopbackServer, named: bool
) -> None:
    """``from tools import get_quote`` hides the function from wrapping, not its HTTP call;
    named in agent.tools as well, its fault is still taken at the HTTP level (the default)."""
    config = _project(tmp_path, monkeypatch, api.url_for("/v1"), named)
    result = run_ci(load_config_text(config, base_dir=tmp_path))
    cells = {c.id: c for c in result.phases["contract"].cells}
    assert {k: c.status for k, c in cells.items()} == PROJECT_VERDICTS
    down = cells["honest[down]"]
    assert down.faults_fired == ("tool_faults[0] error(503) on get_quote",)
    assert [(c.target, c.tool, c.status, c.fired) for c in down.calls] == [
        ("tool", "get_quote", 503, ("tool_faults[0] error(503) on get_quote",))
    ]
    calm = cells["price[calm]"]
    assert [(c.tool, c.status, c.fired) for c in calm.calls] == [("get_quote", 200, ())]
    assert "AAPL trades at 123.45." in calm.prompts[0].output
    assert result.exit_code == 1


def test_a_python_agent_hard_coding_an_https_api_runs_against_the_stub_its_route_forwards_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: LoopbackServer
) -> None:
    """The whole run with ``proxy.tools.NAME: {match, forward}``: the agent's code calls the
    real API's https URL, which flakestorm sends to a local stub, faults included."""
    hard_coded = "https://api.market.example/v1"
    config = _project(tmp_path, monkeypatch, hard_coded, named=False)
    route = f'{{match: "{hard_coded}", forward: "{api.url_for("/v1")}"}}'
    config = config.replace(f'get_quote: "{hard_coded}"', f"get_quote: {route}")
    result = run_ci(load_config_text(config, base_dir=tmp_path))
    cells = {c.id: c for c in result.phases["contract"].cells}
    assert {k: c.status for k, c in cells.items()} == PROJECT_VERDICTS
    assert cells["honest[down]"].faults_fired == ("tool_faults[0] error(503) on get_quote",)
    assert {r.path for r in api.requests} == {"/v1/quote?ticker=AAPL"}  # only the stub's


def test_a_tool_that_never_calls_its_url_is_not_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: LoopbackServer
) -> None:
    config = _project(tmp_path, monkeypatch, api.url_for("/v1"), named=False)
    config = config.replace(f'get_quote: "{api.url_for("/v1")}"', 'get_quote: "http://127.0.0.1:9"')
    result = run_ci(load_config_text(config, base_dir=tmp_path))
    down = next(s for s in result.phases["contract"].scenarios if s.name == "down")
    assert down.undelivered == ("tool_faults[0] error(503) on get_quote",)
    assert "proxy.tools.get_quote (http://127.0.0.1:9)" in down.hints[down.undelivered[0]]
    assert result.exit_code == 3


def test_a_python_agents_tool_calls_are_recorded_and_served_from_a_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: LoopbackServer
) -> None:
    config = _project(tmp_path, monkeypatch, api.url_for("/v1"), named=False)
    cassette = tmp_path / "quotes.cassette"
    recorded = run_ci(load_config_text(config, base_dir=tmp_path), Overrides(record=str(cassette)))
    sent = len(api.requests)
    assert sent >= 1 and '"target": "tool:get_quote"' in cassette.read_text()
    replaying = config.replace("proxy:\n", f'proxy:\n  llm_upstream: "cassette:{cassette}"\n')
    replayed = run_ci(load_config_text(replaying, base_dir=tmp_path))
    assert len(api.requests) == sent  # the cassette answered
    statuses = [{c.id: c.status for c in r.phases["contract"].cells} for r in (recorded, replayed)]
    assert statuses[0] == statuses[1] and statuses[0]["price[calm]"] is Status.PASSED


def test_a_replayed_session_answers_a_routed_tool_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: LoopbackServer
) -> None:
    config = _project(tmp_path, monkeypatch, api.url_for("/v1"), named=False) + (
        "replays:\n  sessions:\n    - id: recorded\n      input: price of AAPL?\n"
        "      tool_responses: [{tool: get_quote, status: 200, response: {price: '99.00'}}]\n"
        "      expected_output: AAPL trades at 99.00.\n"
        "      contract: quotes\n"
    )
    result = run_phases(load_config_text(config, base_dir=tmp_path), ["replay"])
    (cell,) = result.phases["replay"].cells
    assert cell.prompts[0].output == "AAPL trades at 99.00."  # the recorded price, not 123.45
    assert [(c.tool, c.status, c.response) for c in cell.calls] == [
        ("get_quote", 200, '{"price": "99.00"}')
    ]
    assert api.requests == []  # the recording answered, not the API


def test_tool_delivery_callable_takes_a_tool_named_in_both_at_its_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: LoopbackServer
) -> None:
    config = _project(tmp_path, monkeypatch, api.url_for("/v1"), named=True)
    config = config.replace("  tools: [", "  tool_delivery: callable\n  tools: [")
    result = run_ci(load_config_text(config, base_dir=tmp_path))
    cells = {c.id: c for c in result.phases["contract"].cells}
    (call,) = cells["honest[down]"].calls
    # the wrapper raised flakestorm.ToolFaultError in place of the tool: the tool's own
    # handling of an HTTP 503 never ran, and the agent failed
    assert call.url.startswith("python:") and call.status == 503
    assert "ToolFaultError" in (cells["honest[down]"].prompts[0].error_message or "")
    (calm,) = cells["price[calm]"].calls
    assert calm.url.startswith("python:")  # its URL was not routed either


MCP_AGENT = """
import asyncio, os

import mcp

URL = os.environ["QUOTES_MCP_URL"]


async def _ask(tool):
    try:
        async with mcp.Client(URL) as client:
            result = await client.call_tool(tool, {"symbol": "AAPL"})
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"
    text = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return f"unavailable ({text})" if result.is_error else text


def answer(prompt):
    async def both():
        return await asyncio.gather(_ask("get_quote"), _ask("get_news"))

    quote, news = asyncio.run(both())
    return f"quote: {quote}; news: {news}"
"""


def test_a_python_agents_mcp_client_gets_a_fault_on_one_mcp_tool_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official mcp client (httpx2) of a python agent, routed through the in-process proxy
    for the URL under proxy.mcp: the fault reaches get_quote only, get_news still answers."""
    from support.mcp_server import NEWS, McpServer

    (tmp_path / "mcp_agent_mod.py").write_text(MCP_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    with McpServer() as server:
        monkeypatch.setenv("QUOTES_MCP_URL", server.url)
        doc = {
            "agent": {"type": "python", "endpoint": "mcp_agent_mod:answer"},
            "golden_prompts": ["AAPL?"],
            "contract": {
                "name": "mcp in process",
                "invariants": [{"id": "news", "type": "contains", "value": "earnings beat"}],
                "chaos_matrix": [
                    {"name": "calm"},
                    {"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]},
                ],
            },
            "proxy": {"mcp": {"quotes": server.url}},
        }
        result = run_phases(load_config_text(json.dumps(doc), base_dir=tmp_path), ["contract"])
        served = dict(server.calls)
    cells = {c.id: c for c in result.phases["contract"].cells}
    down = cells["news[down]"]
    # the one MCP server's tool: the fault written `tool: get_quote` names its server
    assert down.status is Status.PASSED and down.faults_fired == (
        "tool_faults[0] error(503) on quotes.get_quote",
    )
    output = down.prompts[0].output or ""
    assert output.startswith("quote: unavailable (") and NEWS in output
    fired = {c.tool: c.fired for c in down.calls if c.target == "tool"}
    assert fired == {
        "quotes.get_quote": ("tool_faults[0] error(503) on quotes.get_quote",),
        "quotes.get_news": (),
    }
    # every invocation reached get_news; the fault answered in place of get_quote once
    assert served["get_news"] == served["get_quote"] + 1
