"""Same seed, same faults: probabilistic and `after_calls` faults fire identically, cell by
cell, at concurrency 1 and — with the cell header forwarded — at concurrency 8.

The agent is a real HTTP service that answers each prompt by calling its tool four times
through the chaos proxy (a separate, already running proxy: `proxy.url`), forwarding the
`X-Flakestorm-Cell` header it received, and reporting which calls failed.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.engine.phases import matrix
from flakestorm.engine.runner import Overrides, run_contract_phase
from flakestorm.loader import load_config_text
from flakestorm.reporters import comment, markdown
from flakestorm.results.model import PhaseOutcome, RunResult

CALLS_PER_PROMPT = 4


class InFlight:
    """The most requests of each scenario the agent had in flight at once. With ``company``
    on, the first request of a scenario waits (up to 2 s) for a second one to arrive, so
    cells sent side by side are seen side by side whatever the machine's speed."""

    def __init__(self) -> None:
        self.company = False
        self.most: dict[str, int] = {}
        self._now: dict[str, int] = {}
        self._arrived: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def enter(self, scenario: str) -> None:
        with self._lock:
            self._now[scenario] = now = self._now.get(scenario, 0) + 1
            self.most[scenario] = max(self.most.get(scenario, 0), now)
            first = scenario not in self._arrived
            arrived = self._arrived.setdefault(scenario, threading.Event())
            if not first:
                arrived.set()
        if first and self.company:
            arrived.wait(timeout=2)

    def leave(self, scenario: str) -> None:
        with self._lock:
            self._now[scenario] -= 1


@pytest.fixture
def world() -> Iterator[tuple[str, str, list[bool], InFlight]]:
    """(agent endpoint, proxy url, forwarding switch, what the agent had in flight)."""
    forwarding = [True]
    flight = InFlight()
    with (
        LoopbackServer(lambda r: Response.json({"price": 1.0})) as tool,
        ChaosProxy(tools={"quotes": tool.url}) as proxy,
    ):
        session = requests.Session()
        session.trust_env = False

        def agent(request: Request) -> Response:
            prompt = request.json()["input"]
            scenario = request.headers.get("x-flakestorm-scenario", "")
            headers = {}
            if forwarding[0] and "x-flakestorm-cell" in request.headers:
                headers["X-Flakestorm-Cell"] = request.headers["x-flakestorm-cell"]
            flight.enter(scenario)
            statuses = []
            for i in range(CALLS_PER_PROMPT):
                name = urllib.parse.quote(prompt)
                url = f"{proxy.url}/tools/quotes/quote/{name}/{i}"
                statuses.append(session.get(url, headers=headers, timeout=10).status_code)
            flight.leave(scenario)
            return Response.json({"output": f"answer {statuses}"})

        with LoopbackServer(agent) as service:
            yield service.url_for("/chat"), proxy.url, forwarding, flight


def config(endpoint: str, proxy_url: str) -> str:
    doc: dict[str, Any] = {
        "agent": {"endpoint": endpoint, "response_path": "output"},
        "golden_prompts": [f"prompt {i}" for i in range(4)],
        "contract": {
            "name": "determinism",
            "invariants": [
                {"id": "all-ok", "type": "contains", "value": "[200, 200, 200, 200]"},
                {"id": "answers", "type": "output_not_empty", "severity": "high"},
            ],
            "chaos_matrix": [
                {
                    "name": "flaky-tool",
                    "tool_faults": [{"tool": "quotes", "mode": "error", "probability": 0.5}],
                },
                {
                    "name": "degrading-tool",
                    "tool_faults": [
                        {"tool": "quotes", "mode": "error", "error_code": 500, "after_calls": 2},
                    ],
                },
            ],
        },
        "proxy": {"url": proxy_url},
    }
    return json.dumps(doc)


def run(endpoint: str, proxy_url: str, concurrency: int, seed: int) -> RunResult:
    loaded = load_config_text(config(endpoint, proxy_url))
    return run_contract_phase(loaded, Overrides(concurrency=concurrency, seed=seed))


def injected(result: RunResult) -> dict[str, list[tuple[str, int | None, tuple[str, ...]]]]:
    """Per cell: every tool call (url, status the agent got, faults fired), in a stable order."""
    assert "contract" in result.phases
    return {
        cell.id: sorted((c.url, c.status, c.fired) for c in cell.calls)
        for cell in result.phases["contract"].cells
    }


def test_the_same_seed_injects_the_same_faults_at_concurrency_1_and_8(
    world: tuple[str, str, list[bool], InFlight],
) -> None:
    endpoint, proxy_url, _, _ = world
    first = run(endpoint, proxy_url, concurrency=1, seed=7)
    again = run(endpoint, proxy_url, concurrency=1, seed=7)
    parallel = run(endpoint, proxy_url, concurrency=8, seed=7)
    pattern = injected(first)
    assert injected(again) == pattern
    assert injected(parallel) == pattern
    # every invocation made its 4 calls; the probabilistic fault fired on some, not all
    flaky = pattern["all-ok[flaky-tool]"]
    assert len(flaky) == 4 * CALLS_PER_PROMPT
    fired = sum(1 for _, status, _ in flaky if status == 503)
    assert 0 < fired < len(flaky)
    # after_calls 2: in every invocation the first two calls succeed and the rest fail
    degrading = pattern["all-ok[degrading-tool]"]
    for prompt in range(4):
        statuses = [s for url, s, _ in degrading if f"/prompt%20{prompt}/" in url]
        assert statuses == [200, 200, 500, 500]
    assert all(
        c.status.value == "passed"
        for c in parallel.phases["contract"].cells
        if c.invariant_id == "answers"
    )  # type: ignore[union-attr]
    # the verdicts agree too
    assert [c.status for c in parallel.phases["contract"].cells] == [  # type: ignore[union-attr]
        c.status
        for c in first.phases["contract"].cells  # type: ignore[union-attr]
    ]


def test_scenarios_in_flight_inject_and_judge_as_scenarios_run_one_after_another(
    world: tuple[str, str, list[bool], InFlight], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (that they are in flight together: tests/test_flight.py)
    endpoint, proxy_url, _, _ = world
    together = run(endpoint, proxy_url, concurrency=16, seed=7)
    monkeypatch.setattr(matrix, "in_flight", lambda *args: False)
    apart = run(endpoint, proxy_url, concurrency=16, seed=7)
    assert injected(together) == injected(apart)

    def verdicts(result: RunResult) -> list[tuple[str, str, str]]:
        cells = result.phases["contract"].cells
        return [(c.id, c.status.value, c.reason) for c in cells]  # type: ignore[union-attr]

    assert verdicts(together) == verdicts(apart)
    flown = together.phases["contract"].scenarios
    assert all(s.in_flight for s in flown)  # the report says how each ran: only that differs
    assert not any(s.in_flight for s in apart.phases["contract"].scenarios)
    same = tuple(dataclasses.replace(s, in_flight=False) for s in flown)
    assert same == apart.phases["contract"].scenarios


def test_another_seed_injects_differently(world: tuple[str, str, list[bool], InFlight]) -> None:
    endpoint, proxy_url, _, _ = world
    seven = injected(run(endpoint, proxy_url, concurrency=4, seed=7))
    eight = injected(run(endpoint, proxy_url, concurrency=4, seed=8))
    assert seven["all-ok[flaky-tool]"] != eight["all-ok[flaky-tool]"]


def test_without_forwarding_cells_run_one_at_a_time_and_stay_deterministic(
    world: tuple[str, str, list[bool], InFlight],
) -> None:
    endpoint, proxy_url, forwarding, _ = world
    reference = injected(run(endpoint, proxy_url, concurrency=8, seed=7))
    forwarding[0] = False
    result = run(endpoint, proxy_url, concurrency=8, seed=7)
    assert "contract" in result.phases
    assert all(s.serial for s in result.phases["contract"].scenarios)
    (warning,) = [w for w in result.phases["contract"].warnings if "no attribution" in w]
    # the scenarios whose faults depend on call order are named, with why
    assert (
        "their cells ran one at a time: flaky-tool (tool_faults[0] error(503) on quotes: "
        "probability 0.5); degrading-tool (tool_faults[0] error(500) on quotes: acts on "
        "calls 3-)."
    ) in warning
    assert injected(result) == reference


def test_without_forwarding_order_independent_scenarios_run_side_by_side_with_serial_verdicts(
    world: tuple[str, str, list[bool], InFlight],
) -> None:
    endpoint, proxy_url, forwarding, flight = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["contract"]["chaos_matrix"] = [
        {"name": "calm"},
        {"name": "down", "tool_faults": [{"tool": "quotes", "mode": "error"}]},
        doc["contract"]["chaos_matrix"][0],  # flaky-tool: probability 0.5
    ]
    loaded = load_config_text(json.dumps(doc))
    # the reference: each call attributed to its cell, one invocation at a time
    serial = run_contract_phase(loaded, Overrides(concurrency=1, seed=7)).phases["contract"]
    forwarding[0], flight.company = False, True
    result = run_contract_phase(loaded, Overrides(concurrency=8, seed=7)).phases["contract"]
    assert [(c.id, c.status) for c in result.cells] == [(c.id, c.status) for c in serial.cells]
    infos = {s.name: s for s in result.scenarios}
    assert (infos["down"].serial, infos["flaky-tool"].serial) == (False, True)
    assert flight.most["down"] >= 2 and flight.most["flaky-tool"] == 1
    # the order-independent scenario's calls are reported per scenario, not per cell
    down = infos["down"]
    assert down.unattributed == 2 * 4 * CALLS_PER_PROMPT
    assert {(c.status, c.fired) for c in down.unattributed_calls} == {
        (503, ("tool_faults[0] error(503) on quotes",))
    }
    assert not any(c.calls for c in result.cells if c.scenario == "down")
    assert "down" not in infos["down"].undelivered

    # the order-dependent one kept exact per-cell calls, as the serial run had
    def flaky_calls(phase: PhaseOutcome) -> dict[str, list[tuple[str, str, int | None]]]:
        return {
            c.id: sorted((x.invocation, x.url, x.status) for x in c.calls)
            for c in phase.cells
            if c.scenario == "flaky-tool"
        }

    assert flaky_calls(result) == flaky_calls(serial)
    (warning,) = [w for w in result.warnings if "no attribution" in w]
    assert "flaky-tool (tool_faults[0] error(503) on quotes: probability 0.5)" in warning
    assert "The cells of down ran side by side" in warning
    # a failed cell of `down` says what its scenario's calls met, not "faults fired: none"
    whole = run_contract_phase(loaded, Overrides(concurrency=8, seed=7))
    shared = "per scenario (its cells ran side by side): 32 calls, 20 of the first 20 faulted"
    row = next(r for r in comment.render_first(whole).splitlines() if "all-ok\\[down\\]" in r)
    assert row.endswith(f"| {shared} |")
    summary = markdown.render(whole)
    down_cell = summary[summary.index("all-ok[down] ·") :]
    assert down_cell.split("- **Faults fired:** ", 1)[1].startswith(shared)


def test_scenario_and_invariant_names_beyond_ascii_travel_in_the_cell_header(
    world: tuple[str, str, list[bool], InFlight],
) -> None:
    endpoint, proxy_url, _, _ = world
    doc = json.loads(config(endpoint, proxy_url))
    doc["contract"]["invariants"][0]["id"] = "toutes-réponses-ok"
    doc["contract"]["chaos_matrix"] = [
        {"name": "💥 outage – 100%", "tool_faults": [{"tool": "quotes", "mode": "error"}]}
    ]
    text = json.dumps(doc, ensure_ascii=False)
    result = run_contract_phase(load_config_text(text), Overrides(concurrency=4))
    assert "contract" in result.phases
    cell = result.phases["contract"].cells[0]
    assert cell.id == "toutes-réponses-ok[💥 outage – 100%]"
    assert cell.faults_fired == ("tool_faults[0] error(503) on quotes",)
    assert len(cell.calls) == 4 * CALLS_PER_PROMPT
    assert (
        not result.phases["contract"].scenarios[0].serial
    )  # the header was forwarded and understood
