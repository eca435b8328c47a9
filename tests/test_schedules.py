"""Schedules (SPEC §4.1): faults that fail the first N calls, every K-th, or for a window of
time, decided the same way through the proxy (an http agent) and the python wrappers.

The agent under test asks its quote tool for AAPL and then MSFT, retrying a failed call after
a backoff; it counts the calls it makes itself. Its answer holds both prices only when every
ticker was eventually fetched, which is what the contract checks.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.faults.decisions import ActiveScenario, FaultBook
from flakestorm.chaos.faults.schedule import Schedule, ScheduleError, parse_calls
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import ToolFault
from flakestorm.engine.runner import run_phases
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config, load_config_text
from flakestorm.results.model import RunResult, Status

PRICES = {"AAPL": "187.23", "MSFT": "402.10"}

AGENT = """
import time
import {tools}
from flakestorm import ToolFaultError

TICKERS = {tickers!r}
BACKOFF_S = {backoff!r}
CALLS = []


def answer(prompt):
    made, parts = 0, []
    for ticker in TICKERS:
        for attempt in range(len(BACKOFF_S) + 1):
            made += 1
            try:
                parts.append(f"{{ticker}} {{{tools}.get_quote(ticker)['price']}}")
                break
            except ToolFaultError:
                if attempt < len(BACKOFF_S):
                    time.sleep(BACKOFF_S[attempt])
        else:
            parts.append(f"{{ticker}} unavailable")
    CALLS.append(made)
    return "; ".join(parts)
"""
TOOLS = """
PRICES = {prices!r}


def get_quote(ticker):
    return {{"ticker": ticker, "price": PRICES[ticker]}}


def reset():
    pass
"""


@dataclass
class HttpAgent:
    """The same agent served over HTTP: its tool calls go through the chaos proxy, with the
    invocation's cell header forwarded."""

    proxy_url: str
    tickers: tuple[str, ...]
    backoff_s: tuple[float, ...]
    calls: list[tuple[str, int]] = field(default_factory=list)
    """(the invocation's cell header, the calls it made)."""

    def __call__(self, request: Request) -> Response:
        if request.path in ("/health", "/reset"):
            return Response.json({"ok": True})
        cell = request.headers.get("X-Flakestorm-Cell", "")
        made, parts = 0, []
        with requests.Session() as session:
            session.trust_env = False
            for ticker in self.tickers:
                for attempt in range(len(self.backoff_s) + 1):
                    made += 1
                    reply = session.get(
                        f"{self.proxy_url}/tools/get_quote/quote/{ticker}",
                        headers={"X-Flakestorm-Cell": cell},
                        timeout=10,
                    )
                    if reply.status_code == 200:
                        parts.append(f"{ticker} {reply.json()['price']}")
                        break
                    if attempt < len(self.backoff_s):
                        time.sleep(self.backoff_s[attempt])
                else:
                    parts.append(f"{ticker} unavailable")
        self.calls.append((cell, made))
        return Response.json({"output": "; ".join(parts)})


def quote_tool(request: Request) -> Response:
    ticker = request.path.rsplit("/", 1)[-1]
    return Response.json({"ticker": ticker, "price": PRICES[ticker]})


def contract(scenarios: list[dict[str, Any]], tickers: tuple[str, ...] = PRICES) -> dict[str, Any]:
    """Every ticker's price in the answer (critical)."""
    pattern = r"[\s\S]*".join(f"{t} {PRICES[t]}".replace(".", r"\.") for t in tickers)
    return {
        "name": "retries",
        "invariants": [
            {"id": "prices", "type": "regex", "pattern": pattern, "severity": "critical"}
        ],
        "chaos_matrix": scenarios,
    }


def down(**schedule: Any) -> list[dict[str, Any]]:
    return [{"tool": "get_quote", "mode": "error", "error_code": 503, **schedule}]


@dataclass
class Outcome:
    result: RunResult
    calls: list[int]
    """The agent's own count of the calls it made, one entry per invocation."""

    def cell(self, scenario: str) -> Any:
        (found,) = [c for c in self.result.phases["contract"].cells if c.scenario == scenario]
        return found


def run_python(
    tmp: Path,
    scenarios: list[dict[str, Any]],
    tickers: tuple[str, ...] = ("AAPL", "MSFT"),
    backoff_s: tuple[float, ...] = (0.0, 0.0),
) -> Outcome:
    suffix = uuid.uuid4().hex[:10]
    agent, tools = f"sched_agent_{suffix}", f"sched_tools_{suffix}"
    (tmp / f"{agent}.py").write_text(
        AGENT.format(tools=tools, tickers=list(tickers), backoff=list(backoff_s))
    )
    (tmp / f"{tools}.py").write_text(TOOLS.format(prices=PRICES))
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"{agent}:answer",
            "tools": [f"{tools}:get_quote"],
            "reset_function": f"{tools}:reset",  # no stateful check: the counts are the cells'
        },
        "golden_prompts": ["quotes please"],
        "contract": contract(scenarios, tickers),
    }
    path = tmp / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    import importlib
    import sys

    sys.path.insert(0, str(tmp))
    try:
        result = run_phases(load_config(path), ["contract"])
        calls = list(importlib.import_module(agent).CALLS)
    finally:
        sys.path.remove(str(tmp))
    return Outcome(result, calls)


@pytest.fixture
def tool_server() -> Iterator[LoopbackServer]:
    with LoopbackServer(quote_tool) as server:
        yield server


def run_http(
    tmp: Path,
    tool_server: LoopbackServer,
    scenarios: list[dict[str, Any]],
    tickers: tuple[str, ...] = ("AAPL", "MSFT"),
    backoff_s: tuple[float, ...] = (0.0, 0.0),
) -> Outcome:
    with ChaosProxy() as proxy:
        agent = HttpAgent(proxy.url, tickers, backoff_s)
        with LoopbackServer(agent) as server:
            doc = {
                "agent": {
                    "type": "http",
                    "endpoint": server.url_for("/chat"),
                    "health_endpoint": server.url_for("/health"),
                    "reset_endpoint": "/reset",  # no stateful check: the counts are the cells'
                },
                "golden_prompts": ["quotes please"],
                "contract": contract(scenarios, tickers),
                "proxy": {"url": proxy.url, "tools": {"get_quote": tool_server.url}},
            }
            loaded = load_config_text(json.dumps(doc), base_dir=tmp)
            result = run_phases(loaded, ["contract"])
    # the matrix's invocations
    return Outcome(result, [made for cell, made in agent.calls if "[" in cell])


RETRIES = [
    {"name": "first-two-fail", "tool_faults": down(calls="1-2")},
    {"name": "first-three-fail", "tool_faults": down(calls="1-3")},
    {"name": "every-second-fails", "tool_faults": down(every=2)},
]


def test_a_retry_recovers_from_the_first_two_failures_not_from_three(
    tmp_path: Path, tool_server: LoopbackServer
) -> None:
    by_path = {
        "python": run_python(tmp_path, RETRIES),
        "proxy": run_http(tmp_path, tool_server, RETRIES),
    }
    for path, outcome in by_path.items():
        verdicts = {s["name"]: outcome.cell(s["name"]).status for s in RETRIES}
        assert verdicts == {
            "first-two-fail": Status.PASSED,
            "first-three-fail": Status.FAILED,
            "every-second-fails": Status.PASSED,
        }, path
        # the agent's own counters: AAPL three times then MSFT once; AAPL given up after three
        # then MSFT once; AAPL once, MSFT twice
        assert sorted(outcome.calls) == [3, 4, 4], (path, outcome.calls)
    # both paths fired the faults on the same calls of each invocation
    fired = {
        path: {
            s["name"]: [
                (number, call.status, bool(call.fired))
                for number, call in enumerate(outcome.cell(s["name"]).calls, 1)
            ]
            for s in RETRIES
        }
        for path, outcome in by_path.items()
    }
    assert fired["proxy"] == {
        "first-two-fail": [(1, 503, True), (2, 503, True), (3, 200, False), (4, 200, False)],
        "first-three-fail": [(1, 503, True), (2, 503, True), (3, 503, True), (4, 200, False)],
        "every-second-fails": [(1, 200, False), (2, 503, True), (3, 200, False)],
    }
    # python: a fault raises into the agent (no status); the same calls, the same faults
    assert {k: [(n, f) for n, _, f in v] for k, v in fired["python"].items()} == {
        k: [(n, f) for n, _, f in v] for k, v in fired["proxy"].items()
    }


@pytest.mark.parametrize("path", ["python", "proxy"])
def test_an_outage_window_heals_for_an_agent_that_backs_off_long_enough(
    tmp_path: Path, tool_server: LoopbackServer, path: str
) -> None:
    scenarios = [{"name": "down-500ms", "tool_faults": down(window_ms=[0, 500])}]
    patient_dir, hasty_dir = tmp_path / "patient", tmp_path / "hasty"
    patient_dir.mkdir()
    hasty_dir.mkdir()
    if path == "python":
        patient = run_python(patient_dir, scenarios, ("AAPL",), (0.6,))
        hasty = run_python(hasty_dir, scenarios, ("AAPL",), (0.1, 0.1, 0.1))
    else:
        patient = run_http(patient_dir, tool_server, scenarios, ("AAPL",), (0.6,))
        hasty = run_http(hasty_dir, tool_server, scenarios, ("AAPL",), (0.1, 0.1, 0.1))
    contract_patient = contract_of(patient)
    assert patient.cell("down-500ms").status is Status.PASSED, contract_patient
    assert patient.calls == [2]
    assert hasty.cell("down-500ms").status is Status.FAILED, contract_of(hasty)
    assert hasty.calls == [4]
    assert [bool(c.fired) for c in hasty.cell("down-500ms").calls] == [True] * 4


def contract_of(outcome: Outcome) -> str:
    return "\n".join(
        f"{c.id}: {c.status.value} {c.reason}" for c in outcome.result.phases["contract"].cells
    )


def test_a_fault_no_call_reached_inside_its_schedule_is_not_delivered(tmp_path: Path) -> None:
    scenarios = [{"name": "late", "tool_faults": down(calls="3-4")}]
    outcome = run_python(tmp_path, scenarios, ("AAPL",), ())
    cell = outcome.cell("late")
    assert cell.status is Status.ERRORED
    assert (
        "the agent made at most 1 matching call per invocation; the fault acts on calls 3-4"
        in cell.reason
    ), cell.reason
    (info,) = [s for s in outcome.result.phases["contract"].scenarios if s.name == "late"]
    assert info.undelivered == ("tool_faults[0] error(503) on get_quote",)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            {"calls": "2-1"},
            "tool_faults[0].calls: '2-1': a range goes up, from its first call to its last",
        ),
        ({"calls": "0-2"}, "tool_faults[0].calls: '0-2': calls are numbered from 1"),
        ({"calls": "first"}, "tool_faults[0].calls: 'first' is not a call number or range"),
        (
            {"calls": "2-", "after_calls": 1},
            'tool_faults[0].after_calls: after_calls: 1 is a shorthand for calls: "2-"; give '
            "one of them",
        ),
        (
            {"window_ms": [500, 100]},
            "tool_faults[0].window_ms: window_ms [500, 100] closes before it opens",
        ),
        (
            {"calls": "1-2", "every": 3},
            "tool_faults[0]: this schedule acts on no call (calls 1-2, every 3rd call)",
        ),
        ({"every": 0}, "tool_faults[0].every: "),
    ],
)
def test_schedules_that_cannot_be_read_or_cannot_fire_are_located_errors(
    tmp_path: Path, fault: dict[str, Any], message: str
) -> None:
    doc = {
        "agent": {"type": "http", "endpoint": "http://127.0.0.1:9/chat"},
        "golden_prompts": ["p"],
        "contract": contract([{"name": "s", "tool_faults": down(**fault)}]),
    }
    with pytest.raises(ConfigError) as caught:
        load_config_text(yaml.safe_dump(doc, sort_keys=False), base_dir=tmp_path)
    shown = str(caught.value)
    assert f"contract.chaos_matrix[0].{message}" in shown, shown
    assert ":" in shown.split(" ", 1)[0]  # file:line:col


def test_a_memory_poisoning_attack_has_no_schedule(tmp_path: Path) -> None:
    attack = {"type": "memory_poisoning", "payload": "x", "calls": "1"}
    doc = {
        "agent": {"type": "http", "endpoint": "http://127.0.0.1:9/chat"},
        "golden_prompts": ["p"],
        "contract": contract([{"name": "s", "context_attacks": [attack]}]),
    }
    with pytest.raises(ConfigError) as caught:
        load_config_text(json.dumps(doc), base_dir=tmp_path)
    assert (
        "context_attacks[0].calls: 'calls' does not apply to a 'memory_poisoning' context attack"
        in (str(caught.value))
    )


def test_the_schedule_decides_by_call_number_and_time() -> None:
    assert parse_calls("1-2,5,7-") == ((1, 2), (5, 5), (7, None))
    with pytest.raises(ScheduleError):
        parse_calls("1-2,,3")
    first_two = Schedule.of(calls="1-2")
    assert [first_two.covers(n) for n in (1, 2, 3)] == [True, True, False]
    assert Schedule.of(after_calls=2) == Schedule.of(calls="3-")
    assert [Schedule.of(every=3).covers(n) for n in range(1, 7)] == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    window = Schedule.of(window_ms=[100, 200])
    assert [window.covers(1, t) for t in (0.0, 100.0, 199.9, 200.0)] == [
        False,
        True,
        True,
        False,
    ]
    assert not window.covers(1, None)  # an invocation whose start is not known
    assert Schedule.of(calls="1-3", every=2).describe() == "calls 1-3, every 2nd call"


def test_a_window_counts_from_when_the_invocation_began() -> None:
    fault = ToolFault(tool="t", mode="error", window_ms=(0, 50))
    book = FaultBook(ActiveScenario("s", 1, tool_faults=(fault,)))
    book.begin("cell#0.0", at=time.monotonic())
    book.begin("cell#0.1", at=time.monotonic() - 1.0)  # began a second ago: window over
    assert book.tool_call("t", "u", "cell#0.0").tool_fault is not None
    late = book.tool_call("t", "u", "cell#0.1")
    assert late.tool_fault is None and late.unscheduled == ("tool_faults[0] error(503) on t",)
    unknown = book.tool_call("t", "u", "cell#0.2")  # never began: outside the window
    assert unknown.tool_fault is None and not unknown.matched
