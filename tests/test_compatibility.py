"""What works with what (``docs/compatibility.md``): every agent kind × every feature that meets
the agent, each cell proven by a run of a small config against a real agent of that kind.

Every agent here behaves the same: asked anything, it asks its quote tool for AAPL's price,
tries once more when the tool fails, and answers ``AAPL is at 123.45`` or ``AAPL is
unavailable``. So each feature has one hand-computed expectation for every kind, and a cell is
``exact`` when the run gives it, ``exact, one at a time`` when it gives it with the scenario's
cells run one at a time (the kind forwards no attribution and the faults depend on call
order), or ``refused by validate`` with why. The table in the docs is rendered from
:data:`TABLE`, and a test keeps the two equal.
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
from support.mcp_server import McpServer
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "compatibility.md"

PRICE = "123.45"
PRICED = {"id": "priced", "type": "regex", "pattern": r"\d+\.\d\d", "severity": "high"}


# --------------------------------------------------------------------------- the agent kinds


@dataclass(frozen=True)
class Kind:
    title: str
    tool: str
    """The name a fault gives the agent's quote tool."""
    http: bool
    forwards: bool = True
    """Whether each call carries its cell (the header, the wrappers' own attribution)."""
    reset: bool = False
    """Whether the agent is configured with a reset (``agent.reset_endpoint``): its cells run
    one at a time, each call in the cell declared active."""


KINDS = {
    "http-header": Kind("http, forwards the cell header", "quotes", http=True),
    "http-nothing": Kind("http, forwards nothing", "quotes", http=True, forwards=False),
    "http-otel": Kind(
        "http, traced with OpenTelemetry (trace context and baggage, no flakestorm code)",
        "quotes",
        http=True,
    ),
    "mcp-http": Kind(
        "http, its tool on an MCP server over streamable HTTP (the official `mcp` client)",
        "get_quote",
        http=True,
    ),
    "mcp-stdio": Kind(
        "http, its tool on a stdio MCP server through `flakestorm mcp-stdio` (with a reset)",
        "get_quote",
        http=True,
        forwards=False,
        reset=True,
    ),
    "python-callable": Kind("python callable (a wrapped function tool)", "get_quote", http=False),
    "python-framework": Kind(
        "python, a framework tool object (LangChain `StructuredTool`)", "get_quote", http=False
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
ANSWER = """
CALLS = []

def _ask():
    if hasattr(get_quote, "invoke"):  # a framework's tool object
        return get_quote.invoke({{"ticker": "AAPL"}})["price"]
    return get_quote("AAPL")["price"]

def answer(prompt, session_id=""):
    CALLS.append(prompt)
    for _ in range(2):  # one retry
        try:
            return f"AAPL is at {{_ask()}}"
        except Exception:
            continue
    return "AAPL is unavailable"
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


@dataclass
class Project:
    """A config for one cell, written where its agent is."""

    kind: Kind
    directory: Path
    agent: dict[str, Any]
    proxy: dict[str, Any] | None

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
        template = json.dumps({"input": "{prompt}", "proxy": proxy_service.url})
        agent = {"endpoint": endpoint, "session": session, "request_template": template}
        yield Project(kind, tmp_path, agent, proxy)
        return
    if request.param == "mcp-stdio":
        stdio = StdioAgent(proxy_service.url)
        try:
            with LoopbackServer(stdio.handle) as served:
                agent = {"endpoint": served.url_for("/chat")}
                routes = {"url": proxy_service.url, "mcp": {"quotes": "stdio"}}
                yield Project(kind, tmp_path, agent, routes)
        finally:
            stdio.close()
        return
    if request.param == "mcp-http":
        mcp = request.getfixturevalue("mcp_server")
        with LoopbackServer(mcp_agent(proxy_service.url)) as served:
            agent = {"endpoint": served.url_for("/chat"), "session": session}
            routes = {"url": proxy_service.url, "mcp": {"quotes": mcp.url}}
            yield Project(kind, tmp_path, agent, routes)
        return
    if kind.http:
        with LoopbackServer(http_agent(proxy_service.url, kind.forwards)) as served:
            agent = {"endpoint": served.url_for("/chat"), "session": session}
            yield Project(kind, tmp_path, agent, proxy)
        return
    module = f"compat_{uuid.uuid4().hex[:10]}"
    source = PYTHON_AGENT[request.param].format(price=PRICE) + ANSWER.format()
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


def serial(doc: dict[str, Any]) -> set[str]:
    return {s["name"] for s in doc["phases"]["contract"]["scenarios"] if s["serial"]}


DOWN = {"name": "down", "tool_faults": [{"tool": "TOOL", "mode": "error"}]}
CALM = {"name": "calm"}


def contract(*scenarios: dict[str, Any], invariants: list[dict[str, Any]] | None = None) -> Any:
    return {
        "name": "compat",
        "invariants": invariants or [PRICED],
        "chaos_matrix": list(scenarios),
    }


# --------------------------------------------------------------------------- the features


def turns(project: Project) -> str:
    invariant = {**PRICED, "turn": "every"}
    doc = {
        "golden_prompts": [{"turns": ["What is AAPL?", "And AAPL again?"]}],
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
    return "one at a time" if "turn-2" in serial(result) else "exact"


def schedules(project: Project) -> str:
    first = {
        "name": "first-fails",
        "tool_faults": [{"tool": "TOOL", "mode": "error", "calls": "1"}],
    }
    both = {"name": "both-fail", "tool_faults": [{"tool": "TOOL", "mode": "error", "calls": "1-2"}]}
    doc = {"golden_prompts": ["What is AAPL?"], "contract": contract(CALM, first, both)}
    result = run(project.write(doc), "contract", "run")
    # the retry recovers from one failure, not from two
    assert statuses(result) == {
        "priced[calm]": "passed",
        "priced[first-fails]": "passed",
        "priced[both-fail]": "failed",
    }
    return "one at a time" if serial(result) == {"first-fails", "both-fail"} else "exact"


def sweeps(project: Project) -> str:
    swept = {
        "name": "flaky",
        "tool_faults": [{"tool": "TOOL", "mode": "error", "probability": 0.5}],
        "sweep": {"field": "tool_faults[0].probability", "values": [0, 1]},
    }
    doc = {"golden_prompts": ["What is AAPL?"], "contract": contract(swept)}
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"priced[flaky[0]]": "passed", "priced[flaky[1]]": "failed"}
    (sweep,) = result["phases"]["contract"]["sweeps"]
    assert sweep["breaking"][0]["value"] == "1"
    return "one at a time" if serial(result) else "exact"


def probes(project: Project) -> str:
    probed = {**PRICED, "id": "probed", "probes": ["And MSFT?"]}
    doc = {
        "golden_prompts": ["What is AAPL?"],
        "contract": contract(CALM, DOWN, invariants=[probed]),
    }
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"probed[calm]": "passed", "probed[down]": "failed"}
    cell = result["phases"]["contract"]["cells"][1]
    assert [p["prompt"] for p in cell["prompts"]] == ["And MSFT?"]
    return "exact"


def behavior_unchanged(project: Project) -> str:
    same = {"id": "same", "type": "behavior_unchanged", "baseline": "auto", "severity": "high"}
    doc = {
        "golden_prompts": ["What is AAPL?"],
        "contract": contract(CALM, DOWN, invariants=[same]),
    }
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"same[calm]": "passed", "same[down]": "failed"}
    return "exact"


def repeat(project: Project) -> str:
    doc = {
        "golden_prompts": ["What is AAPL?"],
        "contract": contract(CALM, DOWN),
        "advanced": {"repeat": 3},
    }
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"priced[calm]": "passed", "priced[down]": "failed"}
    runs = {
        c["scenario"]: (c["runs_passed"], c["runs_total"])
        for c in result["phases"]["contract"]["cells"]
    }
    assert runs == {"calm": (3, 3), "down": (0, 3)}
    return "exact"


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
    return "one at a time" if reset else "exact"


def mutation(project: Project) -> str:
    doc = {
        "golden_prompts": ["What is AAPL?"],
        "invariants": [{"type": "regex", "pattern": r"\d+\.\d\d"}],
        "mutations": {"count": 2, "types": ["noise", "tone_shift"]},
    }
    result = run(project.write(doc), "run")
    assert [m["status"] for m in result["phases"]["mutation"]["mutations"]] == ["passed", "passed"]
    return "exact"


def shards(project: Project) -> str:
    doc = {"golden_prompts": ["What is AAPL?", "And AAPL?"], "contract": contract(CALM, DOWN)}
    path = project.write(doc)
    whole = statuses(run(path, "contract", "run"))
    for k in (1, 2):
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
    assert merged.exit_code in (0, 1), merged.output
    doc_merged = json.loads((project.directory / "merged" / "results.json").read_text())
    assert statuses(doc_merged) == whole == {"priced[calm]": "passed", "priced[down]": "failed"}
    return "exact"


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
    if all(flown.values()):
        return "exact"
    assert not any(flown.values())
    return "scenario by scenario"


def judged(project: Project) -> str:
    """An ``llm_judge`` invariant (the built-in deterministic judge): the reply is judged
    after it, apart from the agent and its chaos."""
    invariant = {
        "id": "judged",
        "type": "llm_judge",
        "rubric": 'PASS when the answer says "AAPL is at", with a price.',
        "severity": "high",
    }
    doc = {
        "golden_prompts": ["What is AAPL?"],
        "contract": contract(CALM, DOWN, invariants=[invariant]),
        "advanced": {"judge": "mock"},
    }
    result = run(project.write(doc), "contract", "run")
    assert statuses(result) == {"judged[calm]": "passed", "judged[down]": "failed"}
    assert result["judges"] and "2 verdict(s)" in result["judges"][0]
    return "exact"


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
    if project.kind.reset:  # a reset runs every scenario's cells one at a time
        how = "one at a time"
    expected = TABLE[kind, feature]
    assert HOW[how] == expected.split(" (")[0]


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
