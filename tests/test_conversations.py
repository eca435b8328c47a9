"""Conversations (SPEC §12): a golden prompt of several turns, sent in order in one session;
faults scoped to turns; invariants on the last, every or one turn.

The agent is a real HTTP service with per-session memory (the session id it is sent in
``X-Session-Id``): each question about a ticker asks its ``quotes`` tool through the chaos
proxy (forwarding the ``X-Flakestorm-Cell`` header it received) and remembers the price; a
comparison answers from memory, calling nothing.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from support.config_text import load, problems
from support.server import LoopbackServer, Request, Response

from flakestorm.agents.session import session_id
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import OutputFormat
from flakestorm.engine.run_plan import plan_run
from flakestorm.engine.runner import Overrides, run_phases
from flakestorm.loader import load_config, load_config_text
from flakestorm.replay.export import export_sessions
from flakestorm.reporters import comment, html, junit, markdown, terminal
from flakestorm.reporters import json as json_report
from flakestorm.reporters.registry import write_reports
from flakestorm.reporters.transcript import compact, transcript, turn_line
from flakestorm.results.model import (
    CallRecord,
    CellResult,
    PromptResult,
    Status,
    to_document,
)
from flakestorm.results.shards import Shard
from flakestorm.results.spool import Spooled
from flakestorm.results.stream import read_streamed

PRICES = {"AAPL": "123.45", "MSFT": "456.78"}
TURNS = ["What is the price of AAPL?", "And MSFT?", "Which of the two is higher?"]
FAULT = "tool_faults[0] error(503) on quotes"


class Memory:
    """The agent's memory: per session (or, ``leaky``, one for everyone), the prices it was
    told and the messages it got; ``fabricate``: it claims a comparison with one price known."""

    def __init__(self, leaky: bool = False, fabricate: bool = False) -> None:
        self.leaky = leaky
        self.fabricate = fabricate  # compares even when it knows one price only
        self.lock = threading.Lock()
        self.prices: dict[str, dict[str, str]] = {}
        self.heard: dict[str, list[str]] = {}
        self.sessions: list[str] = []
        self.forward = True
        """The agent forwards the cell header it received to its tool calls."""

    def key(self, request: Request) -> str:
        session = request.headers.get("X-Session-Id", "")
        with self.lock:
            self.sessions.append(session)
        return "everyone" if self.leaky else session


@pytest.fixture
def world(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, Memory]]:
    """(agent endpoint, proxy url, the agent's memory); parametrized indirectly, whether the
    agent fabricates a comparison."""
    memory = Memory(fabricate=getattr(request, "param", False))
    with (
        LoopbackServer(
            lambda r: Response.json({"price": PRICES[r.path.rsplit("/", 1)[-1]]})
        ) as tool,
        ChaosProxy(tools={"quotes": tool.url}) as proxy,
    ):
        http = requests.Session()
        http.trust_env = False

        def agent(request: Request) -> Response:
            message = request.json()["input"]
            key = memory.key(request)
            headers = {}
            if memory.forward and "x-flakestorm-cell" in request.headers:
                headers["X-Flakestorm-Cell"] = request.headers["x-flakestorm-cell"]
            ticker = next((t for t in PRICES if t in message), None)
            with memory.lock:
                known = memory.prices.setdefault(key, {})
            if ticker is None:  # a comparison: from memory alone
                if len(known) == 2 or (memory.fabricate and known):
                    high = max(known, key=lambda t: float(known[t]))
                    return Response.json({"output": f"{high} is higher at {known[high]}"})
                shown = ", ".join(f"{t} at {p}" for t, p in known.items()) or "nothing"
                return Response.json({"output": f"I only know {shown}"})
            reply = http.get(
                f"{proxy.url}/tools/quotes/quote/{ticker}", headers=headers, timeout=10
            )
            if reply.status_code != 200:
                return Response.json({"output": f"{ticker} is unavailable <retry later>"})
            price = reply.json()["price"]
            with memory.lock:
                known[ticker] = price
            return Response.json({"output": f"{ticker} is at {price}"})

        with LoopbackServer(agent) as service:
            yield service.url_for("/chat"), proxy.url, memory


def config(endpoint: str, proxy_url: str, **extra: Any) -> str:
    doc: dict[str, Any] = {
        "agent": {"endpoint": endpoint, "session": {"header": "X-Session-Id"}},
        "golden_prompts": [{"turns": TURNS}],
        "contract": {
            "name": "conversations",
            "invariants": [
                {
                    "id": "quotes-a-price",
                    "type": "regex",
                    "pattern": r"\d+\.\d\d",
                    "severity": "high",
                    "turn": "every",
                },
                {"id": "answers", "type": "output_not_empty"},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {
                    "name": "msft-down",
                    "tool_faults": [
                        {"tool": "quotes", "mode": "error", "error_code": 503, "turns": [2]}
                    ],
                },
            ],
        },
        "proxy": {"url": proxy_url},
        "advanced": {"seed": 5, "concurrency": 4},
        **extra,
    }
    return json.dumps(doc)


def cells(result: Any) -> dict[str, CellResult]:
    return {c.id: c for c in result.phases["contract"].cells}


def test_a_tool_fault_on_turn_2_fires_on_turn_2_only_and_every_turn_is_checked(
    world: tuple[str, str, Memory],
) -> None:
    endpoint, proxy_url, memory = world
    result = run_phases(load_config_text(config(endpoint, proxy_url)), ["contract"])
    by_id = cells(result)
    down = by_id["quotes-a-price[msft-down]"]

    # turn 1's call is clean, turn 2's gets the fault, turn 3 calls nothing
    calls = {c.invocation: (c.url.rsplit("/", 1)[-1], c.status, c.fired) for c in down.calls}
    assert calls == {"0.0.1": ("AAPL", 200, ()), "0.1.2": ("MSFT", 503, (FAULT,))}
    assert down.faults_fired == (FAULT,)
    replies = [(p.turn, p.output) for p in down.prompts]
    assert replies == [
        (1, "AAPL is at 123.45"),
        (2, "MSFT is unavailable <retry later>"),
        (3, "I only know AAPL at 123.45"),  # from the session's memory
    ]
    # `turn: every` fails, naming turn 2
    assert down.status is Status.FAILED
    assert down.reason.startswith("turn 2/3: ")
    assert [p.passed for p in down.prompts] == [True, False, True]
    # under calm the three turns compare from memory, and nothing fired
    calm = by_id["quotes-a-price[calm]"]
    assert calm.status is Status.PASSED
    assert calm.prompts[2].output == "MSFT is higher at 456.78"
    assert all(c.fired == () and c.status == 200 for c in calm.calls)
    # `turn: last` (the default) checks the last reply only
    answers = by_id["answers[msft-down]"]
    assert answers.status is Status.PASSED
    assert [p.checked for p in answers.prompts] == [False, False, True]

    # the score by hand: quotes-a-price (high, 2) passes under calm, fails under msft-down;
    # answers (medium, 1) passes in both: 100 × (2 + 1 + 1) / (2 + 2 + 1 + 1)
    assert result.phases["contract"].score.score == round(100 * 4 / 6, 2) == 66.67

    # each cell's conversation is one session, its own
    per_cell = [memory.sessions.count(session_id(5, f"{cell}#0/c0")) for cell in by_id]
    assert per_cell == [3, 3, 3, 3]


def test_reports_show_a_failed_cell_turn_by_turn(world: tuple[str, str, Memory]) -> None:
    endpoint, proxy_url, _ = world
    result = run_phases(load_config_text(config(endpoint, proxy_url)), ["contract"])

    shown = terminal.render(result)
    lines = [line.strip() for line in shown.splitlines()]
    at = lines.index("conversation (golden prompt 1, run 1), 3 turns: turn 2 failed")
    one, two, three = lines[at + 1 : at + 4]
    assert one == (
        "turn 1/3 held | sent: What is the price of AAPL? | reply: AAPL is at 123.45 | "
        "calls: tool quotes 200"
    )
    assert two.startswith("turn 2/3 FAILED: no match for")
    assert two.endswith(
        "| sent: And MSFT? | reply: MSFT is unavailable <retry later> | calls: tool quotes 503 "
        f"| fired: {FAULT}"
    )
    assert three == (
        "turn 3/3 held | sent: Which of the two is higher? | reply: I only know AAPL at 123.45 "
        "| calls: none"
    )

    summary = markdown.render(result)
    assert "| 2/3 | FAILED: " in summary
    assert "| And MSFT? | MSFT is unavailable &lt;retry later&gt; | tool quotes 503 |" in summary

    page = html.render(result)
    assert "conversation turn by turn" in page
    assert "MSFT is unavailable &lt;retry later&gt;" in page
    assert "<retry later>" not in page

    suite = ET.fromstring(junit.render(result))
    case = next(c for c in suite.iter("testcase") if c.get("name") == "quotes-a-price[msft-down]")
    out = case.findtext("system-out") or ""
    assert "turn 2/3 FAILED" in out and "fired: " + FAULT in out

    posted = comment.render_first(result)
    assert f"turns: 1 ✓ · 2 ✗ ({FAULT}) · 3 ✓" in posted.replace("\\", "")

    document = json.loads(json_report.render(result))
    cell = next(
        c
        for c in document["phases"]["contract"]["cells"]
        if c["invariant_id"] == "quotes-a-price" and c["scenario"] == "msft-down"
    )
    assert [(p["conversation"], p["turn"], p["checked"]) for p in cell["prompts"]] == [
        (0, 1, True),
        (0, 2, True),
        (0, 3, True),
    ]
    assert {c["invocation"] for c in cell["calls"]} == {"0.0.1", "0.1.2"}


def test_a_conversation_after_one_message_prompts_shows_each_turns_own_calls(
    world: tuple[str, str, Memory],
) -> None:
    endpoint, proxy_url, _ = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["golden_prompts"] = ["What is the price of AAPL?", "What is MSFT at?", {"turns": TURNS}]
    result = run_phases(load_config_text(json.dumps(doc)), ["contract"])
    down = cells(result)["quotes-a-price[msft-down]"]
    # the conversation is prompts 2-4 of the run: its turns are invocations 0.2.1, 0.3.2, 0.4.3
    calls = {c.invocation: (c.url.rsplit("/", 1)[-1], c.status) for c in down.calls}
    assert calls == {
        "0.0": ("AAPL", 200),
        "0.1": ("MSFT", 200),
        "0.2.1": ("AAPL", 200),
        "0.3.2": ("MSFT", 503),
    }

    lines = [line.strip() for line in terminal.render(result).splitlines()]
    at = lines.index("conversation (golden prompt 3, run 1), 3 turns: turn 2 failed")
    one, two, three = lines[at + 1 : at + 4]
    assert one.endswith("| reply: AAPL is at 123.45 | calls: tool quotes 200")
    assert two.endswith(f"| calls: tool quotes 503 | fired: {FAULT}")
    assert three.endswith("| reply: I only know AAPL at 123.45 | calls: none")

    suite = ET.fromstring(junit.render(result))
    case = next(c for c in suite.iter("testcase") if c.get("name") == "quotes-a-price[msft-down]")
    out = case.findtext("system-out") or ""
    assert "| calls: tool quotes 200" in out
    assert f"| calls: tool quotes 503 | fired: {FAULT}" in out

    summary = markdown.render(result)
    assert "| What is the price of AAPL? | AAPL is at 123.45 | tool quotes 200 | none |" in summary
    assert "| And MSFT? | MSFT is unavailable &lt;retry later&gt; | tool quotes 503 |" in summary
    assert "tool quotes 503 | none |" not in summary
    assert f"turns: 1 ✓ · 2 ✗ ({FAULT}) · 3 ✓" in comment.render_first(result).replace("\\", "")


def test_a_turns_fired_faults_are_listed_in_declaration_order() -> None:
    news, quote = "tool_faults[0] slow(5 ms) on news", "tool_faults[1] error(503) on quotes"
    turns = [
        PromptResult(text, text, 0, n == 2, "ok", "reply", 1.0, conversation=0, turn=n)
        for n, text in enumerate(TURNS, 1)
    ]
    calls = (  # turn 2 called quotes, then news
        CallRecord("tool", "quotes", "GET", "/q", 503, (quote,), invocation="0.1.2"),
        CallRecord("tool", "news", "GET", "/n", 200, (news,), invocation="0.1.2"),
    )
    cell = CellResult(
        0, "quotes-a-price", "both", "high", Status.FAILED, "turn 1/3: no", prompts=tuple(turns)
    )
    cell = dataclasses.replace(cell, faults_fired=(news, quote), calls=calls)
    (conversation,) = transcript(cell)
    two = conversation.turns[1]
    assert turn_line(two).endswith(f"| fired: {news}, {quote}")
    assert f"2 ✓ ({news}, {quote})" in compact(conversation)


def echo_config(endpoint: str) -> str:
    doc: dict[str, Any] = {
        "agent": {"endpoint": endpoint, "session": {"header": "X-Session-Id"}},
        "golden_prompts": [{"turns": ["one", "two", "three"]}],
        "contract": {
            "name": "isolation",
            "invariants": [{"id": "own-history", "type": "regex", "pattern": "^one two three$"}],
            "chaos_matrix": [{"name": f"calm-{i}"} for i in range(8)],
        },
        "advanced": {"seed": 9, "concurrency": 8},
    }
    return json.dumps(doc)


@pytest.mark.parametrize("leaky", [False, True], ids=["per-session", "leaky"])
def test_the_same_conversation_in_8_concurrent_cells_never_mixes_sessions(leaky: bool) -> None:
    memory = Memory(leaky=leaky)
    in_flight = [0]
    overlapped = threading.Event()

    def agent(request: Request) -> Response:
        key = memory.key(request)
        with memory.lock:
            in_flight[0] += 1
            if in_flight[0] > 1:
                overlapped.set()
            heard = memory.heard.setdefault(key, [])
            heard.append(request.json()["input"])
            said = " ".join(heard)
        overlapped.wait(timeout=5)  # bounded: the first request waits for company
        with memory.lock:
            in_flight[0] -= 1
        return Response.json({"output": said})

    with LoopbackServer(agent) as service:
        result = run_phases(load_config_text(echo_config(service.url_for("/chat"))), ["contract"])
    statuses = [c.status for c in result.phases["contract"].cells]
    assert overlapped.is_set()  # conversations were in flight together
    if leaky:  # an agent mixing conversations is caught: a last turn heard other cells' turns
        assert Status.FAILED in statuses
        return
    assert statuses == [Status.PASSED] * 8
    ids = [c.id for c in result.phases["contract"].cells]
    expected = [session_id(9, f"{cell}#0/c0") for cell in ids]
    assert sorted(memory.sessions) == sorted(s for s in expected for _ in range(3))


NO_ISOLATION = """\
agent:
  endpoint: http://localhost:8000/invoke
golden_prompts:
  - "hi"
  - turns: ["What is AAPL?", "And MSFT?"]
contract:
  name: c
  invariants:
    - {id: a, type: output_not_empty, turn: 3}
  chaos_matrix:
    - name: s
      tool_faults:
        - {tool: quotes, mode: error, turns: [2, 4]}
"""


def test_a_conversation_without_isolation_and_turns_past_the_longest_are_located_errors() -> None:
    found = problems(NO_ISOLATION)
    assert found == [
        "flakestorm.yaml:5:5: golden_prompts[1]: a conversation is sent in one session of its "
        "own, and this agent has no way to isolate it: set agent.session ({header: NAME} or "
        "{template: true}) or agent.reset_endpoint",
        "flakestorm.yaml:9:45: contract.invariants[0].turn: turn 3 is past every golden "
        "prompt: the longest conversation has 2 turns (use a turn number up to it, `last` or "
        "`every`)",
        "flakestorm.yaml:13:46: contract.chaos_matrix[0].tool_faults[0].turns: turn 4 past "
        "every golden prompt: the longest conversation has 2 turns, so the fault could never "
        "be active",
    ]
    isolated = NO_ISOLATION.replace("  endpoint:", "  session: {header: X-Session}\n  endpoint:")
    isolated = isolated.replace("turn: 3", "turn: 2").replace("[2, 4]", "[2]")
    config = load(isolated).config
    assert config.longest_conversation == 2


def test_a_python_agent_taking_session_id_holds_each_conversation_in_its_own_session(
    tmp_path: Path,
) -> None:
    module = f"conv_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(
        "HEARD = {}\n\n"
        "def answer(prompt, session_id=''):\n"
        "    HEARD.setdefault(session_id, []).append(prompt)\n"
        "    return ' '.join(HEARD[session_id])\n"
    )
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer"},
        "golden_prompts": [{"turns": ["one", "two"]}, {"turns": ["three"]}, "four"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "all", "type": "output_not_empty", "turn": "every"}],
            "chaos_matrix": [{"name": "a"}, {"name": "b"}],
        },
        "advanced": {"seed": 3, "concurrency": 2},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    for cell in result.phases["contract"].cells:
        assert [p.output for p in cell.prompts] == ["one", "one two", "three", "four"]
        assert [(p.conversation, p.turn) for p in cell.prompts] == [
            (0, 1),
            (0, 2),
            (1, 1),
            (None, None),
        ]
        assert cell.status is Status.PASSED


def test_reports_that_leave_the_runner_mask_pii_in_each_turn_as_in_the_failure(
    tmp_path: Path,
) -> None:
    module = f"pii_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(
        "def answer(prompt, session_id=''):\n"
        "    if 'contact' in prompt:\n"
        "        return 'Write to admin@example.com (source: staff list)'\n"
        "    return 'ok: ' + prompt\n"
    )
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer"},
        "golden_prompts": ["hello", {"turns": ["hi", "Whom do I contact?", "thanks"]}],
        "contract": {
            "name": "c",
            "invariants": [
                {"id": "no-pii", "type": "excludes_pii", "turn": "every"},
                {"id": "cites", "type": "contains", "value": "source", "turn": "every"},
            ],
            "chaos_matrix": [{"name": "calm"}],
        },
        "advanced": {"seed": 3},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    by_id = cells(result)
    assert by_id["no-pii[calm]"].reason == "turn 2/3: found email `a***@e***.com` at 9"
    assert by_id["cites[calm]"].status is Status.FAILED  # turns 1 and 3 cite nothing

    text = junit.render(result)
    assert "admin@example.com" not in text
    cases = {c.get("name"): c for c in ET.fromstring(text).iter("testcase")}
    # the failure of the leak invariant: its message masks the e-mail, its reply is cut there
    failure = cases["no-pii[calm]"].find("failure")
    assert failure is not None and failure.get("message") == by_id["no-pii[calm]"].reason
    assert "reply (" in (failure.text or "") and "\nWrite to \n[… cut where" in (failure.text or "")
    leak = cases["no-pii[calm]"].findtext("system-out") or ""
    assert "turn 2/3 FAILED: found email `a***@e***.com` at 9 | sent: Whom do I contact? | " in leak
    assert "| reply: Write to [… cut where the reply shows what a leak invariant forbids" in leak
    # the other invariant's turn lines quote the same reply: masked by the same rule
    turns = cases["cites[calm]"].findtext("system-out") or ""
    assert (
        "turn 2/3 held | sent: Whom do I contact? | reply: Write to a***@e***.com (source: "
        "staff list) | calls: none" in turns
    )
    properties = {p.get("name"): p.get("value") for p in ET.fromstring(text).iter("property")}
    assert properties["public_safe"] == (
        "1 PII finding(s) masked, 1 reply(ies) cut where a leak invariant matched; the full "
        "text is in results.json and report.html"
    )
    # the file a run writes says the same, and so does `flakestorm report` from results.json
    # (its cells read back from a spool, one at a time)
    files = write_reports(result, tmp_path / "reports")
    assert files[OutputFormat.JUNIT].read_text("utf-8") == text
    with files[OutputFormat.JSON].open(encoding="utf-8") as kept:
        again = read_streamed(kept, tmp_path)
    assert isinstance(again.phases["contract"].cells, Spooled)
    assert junit.render(again) == text
    for public_report in (markdown.render(result), comment.render_first(result)):
        assert "admin@example.com" not in public_report
    masked = "| Write to a\\*\\*\\*@\u200de\\*\\*\\*.com (source: staff list) |"  # no @-mention
    assert masked in markdown.render(result)
    # the run's own artifact keeps the full text
    assert "admin@example.com" in json_report.render(result)
    assert "admin@example.com" in html.render(result)


def test_a_replayed_conversation_reproduces_the_recorded_failure_turn_by_turn(
    world: tuple[str, str, Memory], tmp_path: Path
) -> None:
    endpoint, proxy_url, _ = world
    text = config(endpoint, proxy_url)
    result = run_phases(load_config_text(text), ["contract"])
    original = cells(result)["quotes-a-price[msft-down]"]
    paths, notes = export_sessions(result, tmp_path / "sessions")
    exported = next(p for p in paths if "quotes-a-price-msft-down" in p.name)
    assert not any("none exported" in note for note in notes), notes
    session = yaml.safe_load(exported.read_text())
    assert [t["input"] for t in session["turns"]] == TURNS
    assert [
        [(r["tool"], r["status"]) for r in t.get("tool_responses", [])] for t in session["turns"]
    ] == [
        [("quotes", 200)],
        [("quotes", 503)],
        [],
    ]

    doc = json.loads(text)
    doc["replays"] = {"sessions": [{"file": str(exported)}]}
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    replayed = run_phases(load_config(path), ["replay"]).phases["replay"].cells[0]

    assert replayed.status is Status.FAILED
    assert replayed.reason.startswith("1 invariant(s) failed: turn 2/3: quotes-a-price: ")
    # turn by turn, the same replies and the same verdicts as the recorded run
    by_turn = [
        (p.turn, p.output, p.passed)
        for p in replayed.prompts
        if p.reason.startswith("quotes-a-price")
    ]
    assert by_turn == [(p.turn, p.output, p.passed) for p in original.prompts]
    # each turn was served its own recorded response: turn 2 the 503, in one session
    served = {c.invocation: (c.status, c.url.rsplit("/", 1)[-1]) for c in replayed.calls}
    assert served == {"0.0.1": (200, "AAPL"), "0.1.2": (503, "MSFT")}
    assert replayed.notes == ()  # the agent made the recorded calls, in order
    # the report tells it turn by turn: 3 turns (not one per invariant verdict), turn 2 served
    # the recorded 503
    run = run_phases(load_config(path), ["replay"])
    shown = terminal.render(run)
    assert "3 turns: turn 2 failed" in shown and "7 turns" not in shown
    turn_2 = next(line for line in shown.splitlines() if line.strip().startswith("turn 2/3"))
    assert "calls: tool quotes 503" in turn_2
    summary = markdown.render(run)
    assert "3 turns: turn 2 failed" in summary


@pytest.mark.parametrize("world", [False, True], ids=["honest", "fabricates"], indirect=True)
def test_when_tool_faults_active_reads_the_scenario_under_a_fault_on_turn_2(
    world: tuple[str, str, Memory],
) -> None:
    # the tool fails on turn 2: does the agent still claim a comparison on turn 3?
    endpoint, proxy_url, memory = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["contract"]["invariants"] = [
        {
            "id": "no-comparison-without-data",
            "type": "excludes_pattern",
            "patterns": ["is higher"],
            "when": "tool_faults_active",
            "severity": "critical",
        }
    ]
    result = run_phases(load_config_text(json.dumps(doc)), ["contract"])
    down = cells(result)["no-comparison-without-data[msft-down]"]
    # no fault fired on turn 3, and the invariant is judged on it: the scenario has tool faults
    assert [(c.invocation, c.fired) for c in down.calls] == [("0.0.1", ()), ("0.1.2", (FAULT,))]
    assert [p.checked for p in down.prompts] == [False, False, True]
    assert not any(n.startswith("judged on") for n in down.notes)
    if memory.fabricate:
        assert down.prompts[2].output == "AAPL is higher at 123.45"
        assert down.status is Status.FAILED
        assert down.reason.startswith("turn 3/3: ")
        assert result.exit_code == 1  # critical: the contract fails
    else:
        assert down.prompts[2].output == "I only know AAPL at 123.45"
        assert down.status is Status.PASSED
    # a scenario without tool faults is skipped, as `when` says
    assert cells(result)["no-comparison-without-data[calm]"].status is Status.SKIPPED


def test_a_turn_scoped_fault_that_may_also_spare_a_call_judges_when_per_invocation(
    world: tuple[str, str, Memory],
) -> None:
    endpoint, proxy_url, _ = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["golden_prompts"].append("What is the price of MSFT?")  # one message: turn 1
    doc["contract"]["chaos_matrix"][1]["tool_faults"][0]["probability"] = 0.999
    doc["contract"]["invariants"] = [
        {
            "id": "says-unavailable",
            "type": "contains",
            "value": "unavailable",
            "when": "tool_faults_active",
            "turn": "every",
        }
    ]
    result = run_phases(load_config_text(json.dumps(doc)), ["contract"])
    down = cells(result)["says-unavailable[msft-down]"]
    # `probability` below 1 (SPEC §5): judged on the invocations a tool fault fired in only
    assert [c.fired for c in down.calls if c.invocation == "0.1.2"] == [(FAULT,)]
    assert down.status is Status.PASSED
    assert down.notes[-1].startswith("judged on 1 of 4 invocations")
    assert [p.checked for p in down.prompts] == [False, True, False, False]


def test_a_turns_auto_baseline_is_that_turn_of_the_same_conversation_without_chaos(
    world: tuple[str, str, Memory],
) -> None:
    endpoint, proxy_url, memory = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["golden_prompts"].append("What is the price of MSFT?")
    doc["contract"]["invariants"] = [
        {"id": "unchanged", "type": "behavior_unchanged", "baseline": "auto", "turn": "every"}
    ]
    text = json.dumps(doc)
    result = run_phases(load_config_text(text), ["contract"])
    by_id = cells(result)

    # the baseline: the conversation sent without chaos in a session of its own, turn by turn
    baseline = session_id(5, f"baseline-conversation:{json.dumps(TURNS)}")
    assert memory.sessions.count(baseline) == 3
    with memory.lock:
        assert memory.prices[baseline] == {"AAPL": "123.45", "MSFT": "456.78"}
    # so under calm every turn matches its own baseline turn, "Which of the two is higher?"
    # included (sent alone it would get "I only know nothing")
    calm = by_id["unchanged[calm]"]
    assert calm.status is Status.PASSED
    assert [(p.turn, p.output, p.similarity) for p in calm.prompts] == [
        (1, "AAPL is at 123.45", 1.0),
        (2, "MSFT is at 456.78", 1.0),
        (3, "MSFT is higher at 456.78", 1.0),
        (None, "MSFT is at 456.78", 1.0),
    ]
    # under msft-down, turn 1 still matches; turns 2 and 3 are each compared with their own
    down = by_id["unchanged[msft-down]"]
    assert down.status is Status.FAILED and down.reason.startswith("turn 2/3: ")
    assert [p.passed for p in down.prompts] == [True, False, False, True]
    assert down.prompts[2].output == "I only know AAPL at 123.45"
    # validate counts the baseline's turns: 3 turns + 1 prompt, once each
    counted = plan_run(load_config_text(text).config, Path(".")).phases["contract"].matrix
    assert counted is not None and counted.baselines == 4


def test_python_wrappers_fire_a_turn_scoped_fault_on_its_turn_only(tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:10]
    (tmp_path / f"conv_tools_{suffix}.py").write_text(
        "def get_quote(ticker):\n    return {'ticker': ticker, 'price': '123.45'}\n"
    )
    (tmp_path / f"conv_py_{suffix}.py").write_text(
        f"import conv_tools_{suffix} as tools\n"
        "from flakestorm import ToolFaultError\n\n"
        "def answer(prompt, session_id=''):\n"
        "    try:\n"
        "        return str(tools.get_quote(prompt.split()[-1]))\n"
        "    except ToolFaultError as exc:\n"
        "        return f'unavailable ({exc.error_code})'\n"
    )
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"conv_py_{suffix}:answer",
            "tools": [f"conv_tools_{suffix}:get_quote"],
        },
        "golden_prompts": [{"turns": ["quote AAPL", "quote MSFT", "quote NVDA"]}],
        "contract": {
            "name": "c",
            "invariants": [
                {"id": "priced", "type": "contains", "value": "123.45", "turn": "every"}
            ],
            "chaos_matrix": [
                {
                    "name": "down-on-2",
                    "tool_faults": [
                        {"tool": "get_quote", "mode": "error", "error_code": 503, "turns": [2]}
                    ],
                }
            ],
        },
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    cell = run_phases(load_config(path), ["contract"]).phases["contract"].cells[0]
    assert [p.output for p in cell.prompts] == [
        "{'ticker': 'AAPL', 'price': '123.45'}",
        "unavailable (503)",
        "{'ticker': 'NVDA', 'price': '123.45'}",
    ]
    assert [(c.invocation, c.fired) for c in cell.calls] == [
        ("0.0.1", ()),
        ("0.1.2", ("tool_faults[0] error(503) on get_quote",)),
        ("0.2.3", ()),
    ]
    assert cell.status is Status.FAILED and cell.reason.startswith("turn 2/3: ")


def test_with_a_reset_each_conversation_starts_from_a_reset_of_its_own() -> None:
    heard: list[str] = []
    resets: list[int] = []

    def agent(request: Request) -> Response:
        if request.path.endswith("/reset"):
            resets.append(len(heard))
            heard.clear()
            return Response.json({"reset": True})
        heard.append(request.json()["input"])
        return Response.json({"output": " ".join(heard)})

    with LoopbackServer(agent) as service:
        doc = {
            "agent": {"endpoint": service.url_for("/chat"), "reset_endpoint": "/reset"},
            "golden_prompts": [{"turns": ["a", "b"]}, {"turns": ["c", "d"]}],
            "contract": {
                "name": "c",
                "invariants": [{"id": "own", "type": "regex", "pattern": "^(a b|c d)$"}],
                "chaos_matrix": [{"name": "calm"}],
            },
        }
        result = run_phases(load_config_text(json.dumps(doc)), ["contract"])
    cell = result.phases["contract"].cells[0]
    assert [p.output for p in cell.prompts] == ["a", "a b", "c", "c d"]
    assert cell.status is Status.PASSED


def test_two_shards_of_conversation_cells_merge_into_the_unsharded_run(
    world: tuple[str, str, Memory], tmp_path: Path
) -> None:
    endpoint, proxy_url, _ = world
    text = config(endpoint, proxy_url)

    def saved(shard: Shard | None, where: str) -> Path:
        result = run_phases(load_config_text(text), ["contract"], Overrides(shard=shard))
        out = tmp_path / where / "results.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(to_document(result)))
        return out

    whole = saved(None, "whole")
    parts = [saved(Shard(k, 2), f"shard-{k}") for k in (1, 2)]
    done = subprocess.run(
        [sys.executable, "-m", "flakestorm", "merge", *map(str, parts), "-o", "merged"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    def kept(path: Path) -> list[Any]:
        cells = json.loads(path.read_text())["phases"]["contract"]["cells"]
        return [
            (
                c["invariant_id"],
                c["scenario"],
                c["status"],
                c["reason"],
                [(p["conversation"], p["turn"], p["checked"], p["passed"]) for p in c["prompts"]],
                sorted((k["invocation"], k["status"], tuple(k["fired"])) for k in c["calls"]),
            )
            for c in cells
        ]

    assert kept(tmp_path / "merged" / "results.json") == kept(whole)


@pytest.mark.parametrize("forward", [True, False], ids=["forwards-the-header", "forwards-nothing"])
def test_turn_scoped_faults_fire_on_their_turns_whether_or_not_the_agent_forwards(
    world: tuple[str, str, Memory], forward: bool
) -> None:
    """Two scenarios scoped to different turns, at concurrency 8. Without attribution the
    proxy cannot tell a call's turn from concurrent calls, so each such scenario runs one
    conversation at a time with the active turn declared: the same verdicts either way."""
    endpoint, proxy_url, memory = world
    memory.forward = forward
    doc = json.loads(config(endpoint, proxy_url))
    doc["advanced"]["concurrency"] = 8
    doc["contract"]["chaos_matrix"].append(
        {
            "name": "aapl-down",
            "tool_faults": [{"tool": "quotes", "mode": "error", "error_code": 503, "turns": [1]}],
        }
    )
    result = run_phases(load_config_text(json.dumps(doc)), ["contract"])
    by_id = cells(result)
    msft, aapl = by_id["quotes-a-price[msft-down]"], by_id["quotes-a-price[aapl-down]"]
    assert [p.output for p in msft.prompts] == [
        "AAPL is at 123.45",
        "MSFT is unavailable <retry later>",
        "I only know AAPL at 123.45",
    ]
    assert [p.output for p in aapl.prompts] == [
        "AAPL is unavailable <retry later>",
        "MSFT is at 456.78",
        "I only know MSFT at 456.78",
    ]
    assert msft.reason.startswith("turn 2/3: ") and aapl.reason.startswith("turn 1/3: ")
    statuses = {cell: c.status for cell, c in by_id.items()}
    assert statuses == {
        "quotes-a-price[calm]": Status.PASSED,
        "quotes-a-price[msft-down]": Status.FAILED,
        "quotes-a-price[aapl-down]": Status.FAILED,
        "answers[calm]": Status.PASSED,
        "answers[msft-down]": Status.PASSED,
        "answers[aapl-down]": Status.PASSED,
    }
    # by hand: quotes-a-price (high, 2) passes under calm only; answers (medium, 1) in all
    # three: 100 × (2 + 1 + 1 + 1) / (3 × 2 + 3 × 1)
    assert result.phases["contract"].score.score == round(100 * 5 / 9, 2) == 55.56
    scenarios = {s.name: s for s in result.phases["contract"].scenarios}
    assert not any(s.undelivered for s in scenarios.values())
    if forward:
        assert not any(s.serial for s in scenarios.values())
    else:
        for name, turn in (("msft-down", 2), ("aapl-down", 1)):
            assert scenarios[name].serial
            assert any(f"turn {turn}" in why for why in scenarios[name].order)
        warning = next(w for w in result.phases["contract"].warnings if "forwards no" in w)
        assert "side by side" not in warning  # every chaos scenario here ran one at a time


def test_a_mutated_last_turn_is_sent_inside_its_conversation(
    world: tuple[str, str, Memory],
) -> None:
    """The mutation phase mutates a conversation's last turn and sends it after the turns
    before it, in one session: "Which of the two is higher?", mutated, still meets the prices
    the agent was told on turns 1 and 2."""
    endpoint, proxy_url, memory = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["mutations"] = {"count": 2, "types": ["noise", "tone_shift"]}
    doc["invariants"] = [{"type": "contains", "value": "is higher at"}]
    result = run_phases(load_config_text(json.dumps(doc)), ["mutation"])
    mutations = result.phases["mutation"].mutations
    assert len(mutations) == 2
    for mutation in mutations:
        assert mutation.turns == tuple(TURNS[:2]) and mutation.original == TURNS[2]
        assert mutation.status is Status.PASSED, (mutation.sent, mutation.output)
        assert mutation.output == "MSFT is higher at 456.78"
    # each mutation one session of three messages: the conversation's two turns, then its own
    sessions = [s for s in memory.sessions if s]
    assert sorted(sessions.count(s) for s in set(sessions)) == [3, 3]
    assert result.invocations == 2 * 3
