"""What works with what (``docs/compatibility.md``): every agent kind × every feature that meets
the agent, each cell proven by a run of a small config against a real agent of that kind.

Every agent here behaves the same: asked anything, it asks its quote tool for AAPL's price,
tries once more when the tool fails, and answers ``AAPL is at 123.45`` (the MCP server's
``187.25``) or ``AAPL is unavailable``. Each agent also writes down what it received, in its
own words (``support/agent_log.py``): each reset, each invocation's prompt and its answer. So
each feature has hand-computed expectations for every kind — the verdicts, and what reached
the agent (the mutated prompts, the probes, each repeat, the baseline, a shard's own cells) —
and a cell is measured, never assumed:

- ``exact`` when the run gives them;
- ``exact, one at a time`` when it gives them with cells run one at a time: ``results.json``
  marks the scenario ``serial`` (the kind forwards no attribution and the faults depend on
  call order), or the agent's own log shows a reset before each cell and no invocation
  overlapping another (``agent.reset_endpoint``);
- ``exact, scenario by scenario`` when ``results.json`` says no scenario was ``in_flight``;
- ``refused by validate`` with why.

The table in the docs is rendered from :data:`TABLE`, and a test keeps the two equal.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from support.a2a_booking import BookingAgent
from support.agent_log import BEGIN, END, RESET, Received, record
from support.fake_judge import FakeJudge
from support.mcp_server import McpServer
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "compatibility.md"

PRICE = "123.45"
MCP_PRICE = "187.25"
"""The price in ``support/mcp_server.py``'s quote."""
PRICED = {"id": "priced", "type": "regex", "pattern": r"\d+\.\d\d", "severity": "high"}


# --------------------------------------------------------------------------- the agent kinds


@dataclass(frozen=True)
class Kind:
    title: str
    tool: str
    """The name a fault gives the agent's quote tool."""
    http: bool
    price: str = PRICE
    """The price its quote tool gives (the MCP server quotes one of its own)."""
    forwards: bool = True
    """Whether each call carries its cell (the header, the wrappers' own attribution)."""
    reset: bool = False
    """Whether the agent is configured with a reset (``agent.reset_endpoint``): its cells run
    one at a time, each call in the cell declared active."""
    probed: bool = True
    """Whether a contract run with chaos first sends the agent one chaos-free invocation of the
    first golden prompt to learn whether it forwards attribution (SPEC §4.2): its faults go
    through the proxy, and neither the wrappers (which attribute each call) nor a reset (cells
    one at a time) make it needless."""


KINDS = {
    "http-header": Kind("http, forwards the cell header", "quotes", http=True),
    "http-stream": Kind(
        "http, streams its reply (`agent.stream: openai`), forwards the cell header",
        "quotes",
        http=True,
    ),
    "http-nothing": Kind("http, forwards nothing", "quotes", http=True, forwards=False),
    "http-a2a": Kind(
        "http, its tool a downstream A2A agent (`proxy.a2a`, JSON-RPC), forwards the cell header",
        "quotes",
        http=True,
    ),
    "http-otel": Kind(
        "http, traced with OpenTelemetry (trace context and baggage, no flakestorm code)",
        "quotes",
        http=True,
    ),
    "mcp-http": Kind(
        "http, its tool on an MCP server over streamable HTTP (the official `mcp` client)",
        "get_quote",
        http=True,
        price=MCP_PRICE,
    ),
    "mcp-stdio": Kind(
        "http, its tool on a stdio MCP server through `flakestorm mcp-stdio` (with a reset)",
        "get_quote",
        http=True,
        price=MCP_PRICE,
        forwards=False,
        reset=True,
        probed=False,
    ),
    "python-callable": Kind(
        "python callable (a wrapped function tool)", "get_quote", http=False, probed=False
    ),
    "python-framework": Kind(
        "python, a framework tool object (LangChain `StructuredTool`)",
        "get_quote",
        http=False,
        probed=False,
    ),
    "python-a2a": Kind(
        "python, its tool a downstream A2A agent called with the official `a2a-sdk` client "
        "(routed)",
        "quotes",
        http=False,
        probed=False,
    ),
}

PYTHON_AGENT = {
    "python-callable": """
def get_quote(ticker):
    return {{"price": "{price}"}}
""",
    "python-framework": """
from langchain_core.tools import StructuredTool

def _fetch(ticker: str) -> dict:
    'The price of a ticker.'
    return {{"price": "{price}"}}

get_quote = StructuredTool.from_function(_fetch, name="get_quote")
""",
}
A2A_QUOTE = """
import asyncio
import uuid

from a2a.client import create_client
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

URL = {url!r}


async def _quote():
    client = await create_client(URL)
    try:
        message = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="AAPL")]
        )
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.HasField("task"):
                task = event.task
                if task.status.state != TaskState.TASK_STATE_COMPLETED:
                    raise RuntimeError(TaskState.Name(task.status.state))
                return {{"price": task.artifacts[0].parts[0].text}}
        raise RuntimeError("no task")
    finally:
        await client.close()


def get_quote(ticker):
    return asyncio.run(_quote())
"""
"""The python agent's quote tool: a downstream A2A agent, called with the official SDK's
client as it is (its HTTP calls routed through the in-process proxy, not wrapped)."""

ANSWER = """
from support.agent_log import BEGIN, END, record

LOG = {log!r}

def _ask():
    if hasattr(get_quote, "invoke"):  # a framework's tool object
        return get_quote.invoke({{"ticker": "AAPL"}})["price"]
    return get_quote("AAPL")["price"]

def answer(prompt, session_id=""):
    record(LOG, BEGIN, prompt=prompt)
    output = "AAPL is unavailable"
    for _ in range(2):  # one retry
        try:
            output = f"AAPL is at {{_ask()}}"
            break
        except Exception:
            continue
    record(LOG, END, prompt=prompt, output=output)
    return output
"""


@pytest.fixture(scope="module")
def otel_agent() -> Iterator[str]:
    """The OpenTelemetry-traced agent, a process of its own (its instrumentation is the
    process's): its URL. The proxy's address comes in each request."""
    script = ROOT / "tests" / "support" / "compat_otel_agent.py"
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=_clean_env()
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _clean_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k in keep}


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpServer]:
    with McpServer() as server:
        yield server


def logged(handler: Callable[[Request], Response], log: Path) -> Callable[[Request], Response]:
    """``handler``, writing what it receives to ``log`` (``support/agent_log.py``): each
    reset, and each invocation's prompt (the default request body's ``input``) and answer."""

    def handle(request: Request) -> Response:
        if request.path.startswith("/reset"):
            record(log, RESET)
            return handler(request)
        prompt = request.json()["input"]
        record(log, BEGIN, prompt=prompt)
        response = handler(request)
        assert isinstance(response.body, bytes)
        record(log, END, prompt=prompt, output=json.loads(response.body)["output"])
        return response

    return handle


def mcp_agent(proxy_url: str) -> Callable[[Request], Response]:
    """The quote agent with its tool on the MCP server behind the proxy (``/mcp/quotes``),
    through the official client, forwarding the invocation's ``X-Flakestorm-*`` headers."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def ask(headers: dict[str, str]) -> str:
        url = f"{proxy_url}/mcp/quotes"
        async with (
            create_mcp_http_client(headers) as http,
            Client(streamable_http_client(url, http_client=http)) as mcp,
        ):
            for _ in range(2):  # one retry
                result = await mcp.call_tool("get_quote", {"symbol": "AAPL"})
                text = " ".join(getattr(c, "text", "") for c in result.content)
                if not result.is_error:
                    return f"AAPL is at {text.split(' at ')[1].split()[0]}"
        return "AAPL is unavailable"

    def handle(request: Request) -> Response:
        if request.path.startswith("/reset"):
            return Response.json({"ok": True})
        headers = {
            k: v for k, v in request.headers.items() if k.lower().startswith("x-flakestorm-")
        }
        return Response.json({"output": asyncio.run(ask(headers))})

    return handle


class StdioAgent:
    """The quote agent with its tool on a stdio MCP server, reached as its MCP configuration
    says: ``flakestorm mcp-stdio --name quotes -- python -m support.mcp_server``, in one
    session for the agent's life (a long-running service's), on an event loop of its own."""

    def __init__(self, proxy_url: str) -> None:
        from mcp import StdioServerParameters

        relay = ["-m", "flakestorm", "mcp-stdio", "--name", "quotes", "--"]
        server = [sys.executable, "-m", "support.mcp_server"]
        self.params = StdioServerParameters(
            command=sys.executable,
            args=[*relay, *server],
            env={**_clean_env(), "FLAKESTORM_PROXY_URL": proxy_url},
            cwd=str(ROOT / "tests"),
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.opened = threading.Event()
        # the session lives in one task, entered and left there (anyio's cancel scopes)
        self.life = asyncio.run_coroutine_threadsafe(self._live(), self.loop)
        assert self.opened.wait(timeout=60), "the stdio MCP session did not open"

    async def _live(self) -> None:
        from mcp import Client

        self.closing = asyncio.Event()
        async with Client(self.params) as client:
            self.client = client
            self.opened.set()
            await self.closing.wait()

    async def _ask(self) -> str:
        for _ in range(2):  # one retry
            result = await self.client.call_tool("get_quote", {"symbol": "AAPL"})
            text = " ".join(getattr(c, "text", "") for c in result.content)
            if not result.is_error:
                return f"AAPL is at {text.split(' at ')[1].split()[0]}"
        return "AAPL is unavailable"

    def handle(self, request: Request) -> Response:
        if request.path.startswith("/reset"):
            return Response.json({"ok": True})
        answer = asyncio.run_coroutine_threadsafe(self._ask(), self.loop).result(timeout=60)
        return Response.json({"output": answer})

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.closing.set)
        self.life.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def tool_server() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda r: Response.json({"price": PRICE})) as server:
        yield server


@pytest.fixture
def proxy_service(tool_server: LoopbackServer) -> Iterator[ChaosProxy]:
    with ChaosProxy(tools={"quotes": tool_server.url}) as proxy:
        yield proxy


def http_agent(proxy_url: str, forwards: bool) -> Callable[[Request], Response]:
    session = requests.Session()
    session.trust_env = False

    def handle(request: Request) -> Response:
        if request.path.startswith("/reset"):
            return Response.json({"ok": True})
        headers = {}
        if forwards and "x-flakestorm-cell" in request.headers:
            headers["X-Flakestorm-Cell"] = request.headers["x-flakestorm-cell"]
        for _ in range(2):  # one retry
            got = session.get(f"{proxy_url}/tools/quotes/price", headers=headers, timeout=10)
            if got.ok:
                return Response.json({"output": f"AAPL is at {got.json()['price']}"})
        return Response.json({"output": "AAPL is unavailable"})

    return handle


def streaming(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``handler``, its answer streamed as OpenAI chat completion chunks over SSE: a role-only
    chunk, a chunk per word, a finish chunk and ``[DONE]``."""

    def chunk(delta: dict[str, str], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        doc = {"object": "chat.completion.chunk", "choices": [choice]}
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    def handle(request: Request) -> Response:
        response = handler(request)
        if request.path.startswith("/reset"):
            return response
        assert isinstance(response.body, bytes)
        words = json.loads(response.body)["output"].split(" ")
        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": (" " if n else "") + w}) for n, w in enumerate(words)]
        chunks += [chunk({}, "stop"), b"data: [DONE]\n\n"]
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=chunks)

    return handle


def a2a_agent(proxy_url: str) -> Callable[[Request], Response]:
    """The http agent whose quote tool is a downstream A2A agent: it sends ``SendMessage`` to
    the proxy's ``/a2a/quotes`` and answers with the task's artifact, trying once more after a
    failure (a JSON-RPC error, a dropped connection, a task that did not complete)."""
    session = requests.Session()
    session.trust_env = False

    def ask(headers: dict[str, str]) -> str | None:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "AAPL"}]}
        doc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        try:
            got = session.post(f"{proxy_url}/a2a/quotes", json=doc, headers=headers, timeout=10)
            task = got.json()["result"]["task"]
        except (requests.RequestException, ValueError, KeyError):
            return None
        if task["status"]["state"] != "TASK_STATE_COMPLETED":
            return None
        return str(task["artifacts"][0]["parts"][0]["text"])

    def handle(request: Request) -> Response:
        if request.path.startswith("/reset"):
            return Response.json({"ok": True})
        headers = {"A2A-Version": "1.0"}
        if "x-flakestorm-cell" in request.headers:
            headers["X-Flakestorm-Cell"] = request.headers["x-flakestorm-cell"]
        for _ in range(2):  # one retry
            price = ask(headers)
            if price is not None:
                return Response.json({"output": f"AAPL is at {price}"})
        return Response.json({"output": "AAPL is unavailable"})

    return handle


@dataclass
class Project:
    """A config for one cell, written where its agent is."""

    kind: Kind
    directory: Path
    agent: dict[str, Any]
    proxy: dict[str, Any] | None

    @property
    def log(self) -> Path:
        """Where the agent writes what it receives."""
        return self.directory / "received.jsonl"

    def received(self) -> Received:
        """What the agent received since the last call, as it tells it."""
        got = Received.read(self.log)
        self.log.unlink(missing_ok=True)
        return got

    def write(self, doc: dict[str, Any], reset: bool = False) -> Path:
        doc = json.loads(json.dumps(doc).replace('"TOOL"', json.dumps(self.kind.tool)))
        agent = dict(self.agent)
        if (reset or self.kind.reset) and self.kind.http:
            agent["reset_endpoint"] = "/reset"
            agent.pop("session", None)
        doc = {"agent": agent, **doc}
        if self.proxy is not None:
            doc["proxy"] = self.proxy
        doc["output"] = {"dir": str(self.directory / "reports"), "formats": ["json"]}
        doc.setdefault("advanced", {}).setdefault("concurrency", 4)
        path = self.directory / "flakestorm.yaml"
        path.write_text(json.dumps(doc, indent=2))
        return path


@pytest.fixture(params=list(KINDS))
def project(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tool_server: LoopbackServer,
    proxy_service: ChaosProxy,
) -> Iterator[Project]:
    kind = KINDS[request.param]
    proxy = {"url": proxy_service.url, "tools": {"quotes": tool_server.url}}
    session = {"header": "X-Session"}
    if request.param == "http-otel":
        endpoint = request.getfixturevalue("otel_agent")
        log = str(tmp_path / "received.jsonl")
        template = json.dumps({"input": "{prompt}", "proxy": proxy_service.url, "log": log})
        agent = {"endpoint": endpoint, "session": session, "request_template": template}
        yield Project(kind, tmp_path, agent, proxy)
        return
    if request.param == "mcp-stdio":
        stdio = StdioAgent(proxy_service.url)
        try:
            with LoopbackServer(logged(stdio.handle, tmp_path / "received.jsonl")) as served:
                agent = {"endpoint": served.url_for("/chat")}
                routes = {"url": proxy_service.url, "mcp": {"quotes": "stdio"}}
                yield Project(kind, tmp_path, agent, routes)
        finally:
            stdio.close()
        return
    if request.param == "mcp-http":
        mcp = request.getfixturevalue("mcp_server")
        handler = logged(mcp_agent(proxy_service.url), tmp_path / "received.jsonl")
        with LoopbackServer(handler) as served:
            agent = {"endpoint": served.url_for("/chat"), "session": session}
            routes = {"url": proxy_service.url, "mcp": {"quotes": mcp.url}}
            yield Project(kind, tmp_path, agent, routes)
        return
    if request.param == "http-a2a":
        handler = logged(a2a_agent(proxy_service.url), tmp_path / "received.jsonl")
        with BookingAgent(artifact=PRICE) as quotes, LoopbackServer(handler) as served:
            agent = {"endpoint": served.url_for("/chat"), "session": session}
            yield Project(
                kind, tmp_path, agent, {"url": proxy_service.url, "a2a": {"quotes": quotes.url}}
            )
        return
    if kind.http:
        handler = logged(http_agent(proxy_service.url, kind.forwards), tmp_path / "received.jsonl")
        streams = request.param == "http-stream"
        with LoopbackServer(streaming(handler) if streams else handler) as served:
            agent = {"endpoint": served.url_for("/chat"), "session": session}
            if streams:
                agent["stream"] = {"format": "openai"}
            yield Project(kind, tmp_path, agent, proxy)
        return
    module = f"compat_{uuid.uuid4().hex[:10]}"
    log = str(tmp_path / "received.jsonl")
    if request.param == "python-a2a":
        with BookingAgent(artifact=PRICE) as quotes:
            source = A2A_QUOTE.format(url=quotes.url) + ANSWER.format(log=log)
            (tmp_path / f"{module}.py").write_text(source)
            agent = {"type": "python", "endpoint": f"{module}:answer"}
            try:
                yield Project(kind, tmp_path, agent, {"a2a": {"quotes": quotes.url}})
            finally:
                sys.modules.pop(module, None)
        return
    source = PYTHON_AGENT[request.param].format(price=PRICE) + ANSWER.format(log=log)
    (tmp_path / f"{module}.py").write_text(source)
    try:
        yield Project(
            kind,
            tmp_path,
            {"type": "python", "endpoint": f"{module}:answer", "tools": [f"{module}:get_quote"]},
            None,
        )
    finally:
        sys.modules.pop(module, None)


def run(path: Path, *command: str) -> dict[str, Any]:
    done = CliRunner().invoke(main, [*command, "-c", str(path)])
    assert done.exit_code in (0, 1), done.output
    return json.loads((path.parent / "reports" / "results.json").read_text())


def statuses(doc: dict[str, Any], phase: str = "contract") -> dict[str, str]:
    return {
        f"{c['invariant_id']}[{c['scenario']}]": c["status"] for c in doc["phases"][phase]["cells"]
    }


def serial(doc: dict[str, Any], phase: str = "contract") -> set[str]:
    """The scenarios whose cells ran one at a time, as ``results.json`` says."""
    return {s["name"] for s in doc["phases"][phase]["scenarios"] if s["serial"]}


def side_by_side(doc: dict[str, Any], phase: str = "contract") -> str:
    """``exact`` when ``results.json`` marks none of the phase's scenarios ``serial``."""
    return "one at a time" if serial(doc, phase) else "exact"


DOWN = {"name": "down", "tool_faults": [{"tool": "TOOL", "mode": "error"}]}
CALM = {"name": "calm"}


def contract(*scenarios: dict[str, Any], invariants: list[dict[str, Any]] | None = None) -> Any:
    return {
        "name": "compat",
        "invariants": invariants or [PRICED],
        "chaos_matrix": list(scenarios),
    }


# --------------------------------------------------------------------------- the features

GOLDEN = "What is AAPL?"
UNAVAILABLE = "AAPL is unavailable"


def priced(project: Project) -> str:
    """The agent's answer when its quote tool answers (the MCP server quotes its own price)."""
    return f"AAPL is at {project.kind.price}"


def sent(project: Project, received: Received, *expected: tuple[str, str]) -> None:
    """The agent received exactly the invocations ``expected`` — (prompt, its answer), in any
    order — after the chaos-free invocation of the first golden prompt that learns whether it
    forwards attribution, for the kinds that get one (:attr:`Kind.probed`)."""
    learn = [(GOLDEN, priced(project))] if project.kind.probed else []
    assert sorted(received.answers) == sorted([*learn, *expected]), received.events


def ran(received: Received, how: str, cells: int) -> str:
    """How the cells ran, as measured: ``one at a time`` when the agent's own log holds resets
    and shows each of the ``cells`` runs (a cell's run, a baseline) after a reset of its own,
    no invocation overlapping another (resets that came otherwise fail here); else ``how``,
    what ``results.json`` says (a scenario's ``serial``, ``in_flight``)."""
    if not received.resets:
        return how
    groups = received.one_at_a_time()
    assert groups is not None and len(groups) == cells, received.events
    assert all(groups), received.events  # each reset before some cell's invocations
    return "one at a time"


def turns(project: Project) -> str:
    invariant = {**PRICED, "turn": "every"}
    doc = {
        "golden_prompts": [{"turns": [GOLDEN, "And AAPL again?"]}],
        "contract": contract(
            CALM,
            {"name": "turn-2", "tool_faults": [{"tool": "TOOL", "mode": "error", "turns": [2]}]},
            invariants=[invariant],
        ),
    }
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"priced[calm]": "passed", "priced[turn-2]": "failed"}
    cell = next(c for c in result["phases"]["contract"]["cells"] if c["scenario"] == "turn-2")
    assert cell["reason"].startswith("turn 2/2: ")
    how = "one at a time" if "turn-2" in serial(result) else "exact"
    return ran(project.received(), how, cells=2)


def schedules(project: Project) -> str:
    first = {
        "name": "first-fails",
        "tool_faults": [{"tool": "TOOL", "mode": "error", "calls": "1"}],
    }
    both = {"name": "both-fail", "tool_faults": [{"tool": "TOOL", "mode": "error", "calls": "1-2"}]}
    doc = {"golden_prompts": [GOLDEN], "contract": contract(CALM, first, both)}
    result = run(project.write(doc), "contract", "run")
    # the retry recovers from one failure, not from two
    assert statuses(result) == {
        "priced[calm]": "passed",
        "priced[first-fails]": "passed",
        "priced[both-fail]": "failed",
    }
    how = "one at a time" if serial(result) == {"first-fails", "both-fail"} else "exact"
    return ran(project.received(), how, cells=3)


def sweeps(project: Project) -> str:
    swept = {
        "name": "flaky",
        "tool_faults": [{"tool": "TOOL", "mode": "error", "probability": 0.5}],
        "sweep": {"field": "tool_faults[0].probability", "values": [0, 1]},
    }
    doc = {"golden_prompts": [GOLDEN], "contract": contract(swept)}
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"priced[flaky[0]]": "passed", "priced[flaky[1]]": "failed"}
    (sweep,) = result["phases"]["contract"]["sweeps"]
    assert sweep["breaking"][0]["value"] == "1"
    return ran(project.received(), side_by_side(result), cells=2)


def probes(project: Project) -> str:
    """An invariant's ``probes`` are the prompts its cells send, instead of the golden ones:
    the agent receives ``And MSFT?`` once per cell, and the golden prompt only to learn
    forwarding (before the matrix)."""
    probed = {**PRICED, "id": "probed", "probes": ["And MSFT?"]}
    doc = {"golden_prompts": [GOLDEN], "contract": contract(CALM, DOWN, invariants=[probed])}
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"probed[calm]": "passed", "probed[down]": "failed"}
    received = project.received()
    sent(project, received, ("And MSFT?", priced(project)), ("And MSFT?", UNAVAILABLE))
    reported = [[p["prompt"] for p in c["prompts"]] for c in result["phases"]["contract"]["cells"]]
    assert reported == [["And MSFT?"], ["And MSFT?"]]
    return ran(received, side_by_side(result), cells=2)


SIMILARITY_DOWN = 0.425
"""The lexical similarity of ``AAPL is unavailable`` to ``AAPL is at 123.45`` (or ``187.25``),
worked out by hand (``checks/similarity.py``: half word, half character-trigram cosine).
Words — unigrams and bigrams: {aapl, is, unavailable, aapl is, is unavailable} against {aapl,
is, at, 123, 45, aapl is, is at, at 123, 123 45}: 3 shared, 3 / (√5 · √9) = 0.4472. Trigrams
inside each word padded with spaces: 4 + 2 + 11 = 17 against 4 + 2 + 2 + 3 + 2 = 13, the 6
of ``aapl`` and ``is`` shared: 6 / √(17 · 13) = 0.4036. (0.4472 + 0.4036) / 2 = 0.425."""


def behavior_unchanged(project: Project) -> str:
    """``baseline: auto``: one chaos-free invocation of the prompt before the matrix (it
    answers the price; for the kinds that learn forwarding it is also the call that learns
    it, so no other is sent), and each cell's reply scored against that answer: the same
    answer 1.0, the outage :data:`SIMILARITY_DOWN`, below the default 0.75."""
    same = {"id": "same", "type": "behavior_unchanged", "baseline": "auto", "severity": "high"}
    doc = {"golden_prompts": [GOLDEN], "contract": contract(CALM, DOWN, invariants=[same])}
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"same[calm]": "passed", "same[down]": "failed"}
    received = project.received()
    baseline, calm, down = (
        (GOLDEN, priced(project)),
        (GOLDEN, priced(project)),
        (GOLDEN, UNAVAILABLE),
    )
    assert sorted(received.answers) == sorted([baseline, calm, down]), received.events
    scored = {
        c["scenario"]: (c["prompts"][0]["similarity"], c["prompts"][0]["reason"])
        for c in result["phases"]["contract"]["cells"]
    }
    to = "the baseline answer without chaos (lexical)"
    assert scored == {
        "calm": (1.0, f"similarity 1.000 ≥ 0.75 to {to}"),
        "down": (
            pytest.approx(SIMILARITY_DOWN, abs=5e-4),
            f"similarity 0.425 < 0.75 to {to}: `{UNAVAILABLE}`",
        ),
    }
    return ran(received, side_by_side(result), cells=3)  # the baseline, then the two cells


def repeat(project: Project) -> str:
    """``repeat: 3``: each cell's prompt is sent three times, each run judged on its own."""
    doc = {
        "golden_prompts": [GOLDEN],
        "contract": contract(CALM, DOWN),
        "advanced": {"repeat": 3},
    }
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"priced[calm]": "passed", "priced[down]": "failed"}
    received = project.received()
    sent(project, received, *[(GOLDEN, priced(project))] * 3, *[(GOLDEN, UNAVAILABLE)] * 3)
    runs = {
        c["scenario"]: (c["runs_passed"], c["runs_total"])
        for c in result["phases"]["contract"]["cells"]
    }
    assert runs == {"calm": (3, 3), "down": (0, 3)}
    return ran(received, side_by_side(result), cells=6)  # a reset before each run


def replay(project: Project) -> str:
    """Export the failed cell, replay it: the same failure, the tool's 503 served again."""
    reset = not project.kind.forwards  # without attribution, a cell's calls need a reset
    doc: dict[str, Any] = {"golden_prompts": ["What is AAPL?"], "contract": contract(CALM, DOWN)}
    path = project.write(doc, reset=reset)
    original = run(path, "contract", "run")
    down = next(c for c in original["phases"]["contract"]["cells"] if c["scenario"] == "down")
    sessions = project.directory / "sessions"
    exported = CliRunner().invoke(
        main,
        [
            "replay",
            "export",
            "--from-report",
            str(path.parent / "reports" / "results.json"),
            "-o",
            str(sessions),
        ],
    )
    assert exported.exit_code == 0, exported.output
    doc["replays"] = {"sessions": [{"file": str(p)} for p in sorted(sessions.glob("*.yaml"))]}
    result = run(project.write(doc, reset=reset), "replay", "run")
    (cell,) = result["phases"]["replay"]["cells"]
    assert cell["status"] == "failed", cell["reason"]

    # the retry met the recording too: the tool calls the failed cell made, served again
    def tool_calls(calls: list[dict[str, Any]]) -> list[int | None]:
        return [c["status"] for c in calls if c["target"] == "tool" and c["tool"]]

    assert tool_calls(cell["calls"]) == tool_calls(down["calls"])
    assert len(tool_calls(cell["calls"])) == 2
    hows = {side_by_side(original), side_by_side(result, "replay")}
    assert len(hows) == 1, hows
    return ran(project.received(), hows.pop(), cells=3)  # the two cells, then the replayed one


TEMPLATES = ["Please answer: {prompt}", "{prompt} Be brief."]
MUTATED = ["Please answer: What is AAPL?", "What is AAPL? Be brief."]
"""The two ``custom`` mutations of the golden prompt, filled in by hand."""


def mutation(project: Project) -> str:
    """The mutation phase sends the agent each mutated prompt — never the original — and
    judges each reply."""
    doc = {
        "golden_prompts": [GOLDEN],
        "invariants": [{"type": "regex", "pattern": r"\d+\.\d\d"}],
        "mutations": {"count": 2, "types": ["custom"], "templates": TEMPLATES},
    }
    result = run(project.write(doc), "run")
    mutations = result["phases"]["mutation"]["mutations"]
    assert [(m["sent"], m["status"]) for m in mutations] == [(p, "passed") for p in MUTATED]
    received = project.received()
    assert sorted(received.answers) == [(p, priced(project)) for p in MUTATED], received.events
    return ran(received, side_by_side(result, "mutation"), cells=2)


def comparable(doc: dict[str, Any]) -> Any:
    """What a run's ``results.json`` says of its cells and scores, timings and paths aside."""
    phase = doc["phases"]["contract"]
    cells = [
        {
            **{k: c[k] for k in ("index", "invariant_id", "scenario", "status", "reason")},
            **{k: c[k] for k in ("runs_passed", "runs_total", "faults_fired")},
            "prompts": [(p["prompt"], p["output"], p["passed"]) for p in c["prompts"]],
        }
        for c in phase["cells"]
    ]
    overall = doc["overall"]
    return cells, phase["score"], overall["score"], overall["passed"], doc["exit_code"]


def shards(project: Project) -> str:
    """``--shard 1/2`` and ``2/2`` each run their cells (dealt round-robin: the calm one, then
    the down one), and ``merge`` gives back what the unsharded run reported."""
    doc = {"golden_prompts": [GOLDEN, "And AAPL?"], "contract": contract(CALM, DOWN)}
    path = project.write(doc)
    whole = run(path, "contract", "run")
    assert statuses(whole) == {"priced[calm]": "passed", "priced[down]": "failed"}
    received = project.received()
    calm = [(GOLDEN, priced(project)), ("And AAPL?", priced(project))]
    down = [(GOLDEN, UNAVAILABLE), ("And AAPL?", UNAVAILABLE)]
    sent(project, received, *calm, *down)
    hows = {ran(received, side_by_side(whole), cells=2)}
    for k, cells in ((1, calm), (2, down)):
        done = CliRunner().invoke(
            main,
            [
                "contract",
                "run",
                "-c",
                str(path),
                "--shard",
                f"{k}/2",
                "--output",
                str(project.directory / f"shard-{k}"),
            ],
        )
        assert done.exit_code in (0, 1), done.output
        received = project.received()
        sent(project, received, *cells)  # its own cells, none of the other shard's
        shard = json.loads((project.directory / f"shard-{k}" / "results.json").read_text())
        hows.add(ran(received, side_by_side(shard), cells=1))
    merged = CliRunner().invoke(
        main,
        [
            "merge",
            str(project.directory / "shard-1"),
            str(project.directory / "shard-2"),
            "-o",
            str(project.directory / "merged"),
        ],
    )
    assert merged.exit_code == 0, merged.output  # no critical cell failed: the gate passes
    doc_merged = json.loads((project.directory / "merged" / "results.json").read_text())
    assert comparable(doc_merged) == comparable(whole)
    assert len(hows) == 1, hows  # the shards ran as the whole run did
    return hows.pop()


def flight(project: Project) -> str:
    """Every chaos scenario in flight together when each call is attributed: each cell still
    meets its own scenario's faults only."""
    slow = {"name": "slow", "tool_faults": [{"tool": "TOOL", "mode": "slow", "delay_ms": 10}]}
    twice = {
        "name": "down-twice",
        "tool_faults": [{"tool": "TOOL", "mode": "error", "error_code": 502}],
    }
    doc = {"golden_prompts": ["What is AAPL?"], "contract": contract(CALM, DOWN, slow, twice)}
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {
        "priced[calm]": "passed",
        "priced[down]": "failed",
        "priced[slow]": "passed",
        "priced[down-twice]": "failed",
    }
    if project.kind.forwards:  # each cell's calls met its own scenario's fault, none other
        fired = {c["scenario"]: c["faults_fired"] for c in result["phases"]["contract"]["cells"]}
        assert [f.split(" on ")[0] for f in fired["down"]] == ["tool_faults[0] error(503)"]
        assert [f.split(" on ")[0] for f in fired["down-twice"]] == ["tool_faults[0] error(502)"]
        assert [f.split(" on ")[0] for f in fired["slow"]] == ["tool_faults[0] slow(10 ms)"]
    flown = {s["name"]: s["in_flight"] for s in result["phases"]["contract"]["scenarios"]}
    assert len(set(flown.values())) == 1, flown
    how = "exact" if all(flown.values()) else "scenario by scenario"
    return ran(project.received(), how, cells=4)


JUDGED = 'PASS when the answer says "AAPL is at", with a price.'
"""The rubric: the built-in ``mock`` judge would give the same verdicts, so only the judge
server's record of what it was asked, and its own reason in the cell, tell which judged."""


def judged(project: Project) -> str:
    """An ``llm_judge`` invariant, judged by an OpenAI-compatible judge server apart from the
    agent and its chaos: the judge is asked about each cell's reply, once, and its verdict —
    PASS when the reply says ``AAPL is at`` — decides the cell, with the judge's own reason."""
    invariant = {"id": "judged", "type": "llm_judge", "rubric": JUDGED, "severity": "high"}
    with FakeJudge("well", keyword="AAPL is at") as judge:
        doc = {
            "golden_prompts": [GOLDEN],
            "contract": contract(CALM, DOWN, invariants=[invariant]),
            "advanced": {"judge": {"base_url": judge.base_url, "model": "judge-1"}},
        }
        result = run(project.write(doc), "contract", "run")
    assert judge.asked == {(JUDGED, priced(project)): 1, (JUDGED, UNAVAILABLE): 1}
    reasons = {c["scenario"]: c["reason"] for c in result["phases"]["contract"]["cells"]}
    assert statuses(result) == {"judged[calm]": "passed", "judged[down]": "failed"}
    assert "judge: FAIL: keyword missing" in reasons["down"], reasons
    received = project.received()
    sent(project, received, (GOLDEN, priced(project)), (GOLDEN, UNAVAILABLE))
    return ran(received, side_by_side(result), cells=2)


def counted(project: Project) -> str:
    """The invariants on what the agent did (SPEC §15), counted at the wire for each kind of
    agent: the agent tries its quote tool once more after a failure (its code above), so each
    cell's calls to the tool are 1 without chaos and 2 when every call fails — the same request
    twice, without an idempotency key."""
    invariants = [
        {"id": "tries", "type": "max_calls", "target": "TOOL", "max": 1, "severity": "high"},
        {
            "id": "same-call",
            "type": "no_duplicate_effects",
            "target": "TOOL",
            "methods": ["GET", "POST"],
        },
    ]
    doc = {"golden_prompts": [GOLDEN], "contract": contract(CALM, DOWN, invariants=invariants)}
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {
        "tries[calm]": "passed",
        "tries[down]": "failed",
        "same-call[calm]": "passed",
        "same-call[down]": "failed",
    }
    for cell in result["phases"]["contract"]["cells"]:
        tried = 1 if cell["scenario"] == "calm" else 2
        calls = cell["spend"]["calls"]
        # the tool as the calls name it (SERVER.TOOL for MCP, whose other traffic — initialize,
        # tools/list — is counted apart)
        (name,) = [n for n in calls if n.split(".")[-1] == project.kind.tool]
        assert calls[name] == tried, cell["spend"]
        if project.kind.title.startswith("http, its tool on"):
            pass  # an MCP server's other traffic (initialize, tools/list) is counted apart
        elif project.kind is KINDS["python-a2a"]:
            # so is the A2A SDK's card fetch: one before each SendMessage
            assert calls == {name: tried, "other": tried}, cell["spend"]
        else:
            assert calls == {name: tried}, cell["spend"]
        assert cell["spend"]["faulted"] == ({} if tried == 1 else {name: 2}), cell["spend"]
    received = project.received()
    sent(project, received, *[(GOLDEN, priced(project))] * 2, *[(GOLDEN, UNAVAILABLE)] * 2)
    return ran(received, side_by_side(result), cells=4)


FEATURES: dict[str, tuple[str, Callable[[Project], str]]] = {
    "turns": ("turn-scoped faults", turns),
    "schedules": ("schedules (`calls`)", schedules),
    "sweeps": ("sweeps", sweeps),
    "probes": ("probes", probes),
    "behavior_unchanged": ("`behavior_unchanged: auto`", behavior_unchanged),
    "repeat": ("`repeat`", repeat),
    "replay": ("replay export → replay", replay),
    "mutation": ("mutation phase", mutation),
    "shards": ("shards → merge", shards),
    "flight": ("scenarios in flight together", flight),
    "judge": ("`llm_judge`", judged),
    "counted": ("calls counted (`max_calls`, `no_duplicate_effects`)", counted),
}

ONE_AT_A_TIME = "exact, one at a time"
SCENARIO_BY_SCENARIO = "exact, scenario by scenario"
HOW = {
    "exact": "exact",
    "one at a time": ONE_AT_A_TIME,
    "scenario by scenario": SCENARIO_BY_SCENARIO,
}

TABLE: dict[tuple[str, str], str] = {
    (kind, feature): "exact" for kind in KINDS for feature in FEATURES
}
"""What each cell is: ``exact``, ``exact, one at a time``, or ``refused by validate: why``."""
TABLE |= {("mcp-stdio", f): f"{ONE_AT_A_TIME} (with `agent.reset_endpoint`)" for f in FEATURES}
TABLE |= {
    ("http-nothing", "turns"): ONE_AT_A_TIME,
    ("http-nothing", "schedules"): ONE_AT_A_TIME,
    ("http-nothing", "sweeps"): ONE_AT_A_TIME,
    # each invocation's own calls: the cells run one at a time
    ("http-nothing", "counted"): ONE_AT_A_TIME,
    # a cell's own calls, for the export: a reset runs the cells one at a time
    ("http-nothing", "replay"): f"{ONE_AT_A_TIME} (with `agent.reset_endpoint`)",
    # calls the proxy cannot tell apart: each scenario runs alone (its cells side by side)
    ("http-nothing", "flight"): SCENARIO_BY_SCENARIO,
}


@pytest.mark.parametrize("feature", list(FEATURES))
def test_each_feature_is_exact_with_each_kind_of_agent(project: Project, feature: str) -> None:
    _, check = FEATURES[feature]
    kind = next(k for k, v in KINDS.items() if v is project.kind)
    how = check(project)
    expected = TABLE[kind, feature]
    assert HOW[how] == expected.split(" (")[0]
    if kind == "http-stream" and feature != "mutation":
        # every reply of the last run — each turn of a conversation too — was read as the
        # stream it is: one content event per word the agent streamed, then [DONE] (a
        # mutation's result keeps its text, not its stream)
        doc = json.loads((project.directory / "reports" / "results.json").read_text())
        replies = [
            prompt
            for phase in doc["phases"].values()
            for cell in phase.get("cells", ())
            for prompt in cell["prompts"]
        ]
        assert replies and all(r["stream"]["ending"] == "done" for r in replies)
        streamed = [(r["stream"]["content_events"], len(r["output"].split(" "))) for r in replies]
        assert all(events == words for events, words in streamed), streamed


def render_table() -> str:
    """The table of ``docs/compatibility.md``."""
    head = "| agent | " + " | ".join(title for title, _ in FEATURES.values()) + " |"
    rule = "|---|" + "---|" * len(FEATURES)
    rows = [
        f"| {kind.title} | " + " | ".join(TABLE[name, f] for f in FEATURES) + " |"
        for name, kind in KINDS.items()
    ]
    return "\n".join([head, rule, *rows]) + "\n"


def test_the_docs_table_is_the_tested_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- table -->\n") + len("<!-- table -->\n")
    end = text.index("<!-- /table -->")
    assert text[start:end] == render_table(), "regenerate: print(render_table())"
