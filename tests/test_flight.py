"""The whole matrix in flight (SPEC §9): when every call names its invocation, the cells of
every chaos scenario run side by side, and each call is decided by its own cell's scenario —
through the python wrappers, and through a proxy service whose agent forwards the cell header.

Each agent here waits at a barrier for one invocation of every scenario: scenarios run one
after another would never get there (the barrier breaks on its timeout, a failure bound, and
the cells error). Each scenario's fault answers with its own status, and each cell's reply must
carry its own scenario's."""

from __future__ import annotations

import importlib
import json
import sys
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import ToolFault
from flakestorm.engine.events import CellFinished, Event, ScenarioFinished
from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config_text
from flakestorm.results.model import RunResult, Status

CODES = (501, 502, 503, 504)
BOUND_S = 20.0
"""How long the barrier waits before it breaks: a failure bound, never reached when it holds."""


def scenarios() -> list[dict[str, Any]]:
    return [
        {
            "name": f"down-{code}",
            "tool_faults": [{"tool": "quotes", "mode": "error", "error_code": code}],
        }
        for code in CODES
    ]


def contract(agent: dict[str, Any], **extra: Any) -> str:
    doc = {
        "agent": agent,
        "golden_prompts": ["quote ACME"],
        "contract": {
            "name": "flight",
            "invariants": [{"id": "says-its-code", "type": "contains", "value": "status"}],
            "chaos_matrix": scenarios(),
        },
        "advanced": {"concurrency": len(CODES)},
        "output": {"formats": []},
        **extra,
    }
    return json.dumps(doc)


def each_cell_saw_its_own_fault(result: RunResult, in_flight: bool = True) -> None:
    cells = {c.scenario: c for c in result.phases["contract"].cells}
    assert set(cells) == {f"down-{code}" for code in CODES}
    for code in CODES:
        cell = cells[f"down-{code}"]
        assert cell.status is Status.PASSED, cell.reason
        assert cell.prompts[0].output == f"status {code}"
        assert [c.status for c in cell.calls] == [code]
        assert cell.faults_fired == (f"tool_faults[0] error({code}) on quotes",)
    infos = result.phases["contract"].scenarios
    assert all(not s.undelivered and not s.serial for s in infos)
    assert all(s.in_flight is in_flight for s in infos)  # what the report says of how they ran


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"flight_{uuid.uuid4().hex[:10]}"
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for loaded in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[loaded]


def test_a_python_agents_scenarios_are_in_flight_together(tmp_path: Path, module: str) -> None:
    (tmp_path / f"{module}_tools.py").write_text(
        "def quotes(symbol):\n    return {'symbol': symbol, 'price': 1.0}\n"
    )
    (tmp_path / f"{module}.py").write_text(
        f"import threading\nimport {module}_tools as tools\n"
        f"BARRIER = threading.Barrier({len(CODES)}, timeout={BOUND_S})\n"
        "def answer(prompt, session_id=''):\n"
        "    try:\n"
        "        tools.quotes('ACME')\n"
        "        seen = 'status 200'\n"
        "    except ConnectionError as exc:\n"
        "        seen = f'status {exc.error_code}'\n"
        "    BARRIER.wait()\n"
        "    return seen\n"
    )
    agent = {
        "type": "python",
        "endpoint": f"{module}:answer",
        "tools": [f"{module}_tools:quotes"],
    }
    result = run_phases(load_config_text(contract(agent), base_dir=tmp_path), ["contract"])
    each_cell_saw_its_own_fault(result)


def test_each_scenario_in_flight_is_announced_as_soon_as_its_own_cells_are_in(
    tmp_path: Path, module: str
) -> None:
    # scenario down-501 answers at once; the others hold their invocation until its
    # ScenarioFinished (settled with its delivery proof) has been announced: announcements
    # made only when the whole flight ends would never come (the cells then answer "late")
    (tmp_path / f"{module}_tools.py").write_text(
        "def quotes(symbol):\n    return {'symbol': symbol, 'price': 1.0}\n"
    )
    (tmp_path / f"{module}.py").write_text(
        f"import threading\nimport {module}_tools as tools\n"
        "RELEASE = threading.Event()\n"
        "def answer(prompt, session_id=''):\n"
        "    try:\n"
        "        tools.quotes('ACME')\n"
        "        return 'status 200'\n"
        "    except ConnectionError as exc:\n"
        "        if exc.error_code != 501 and not RELEASE.wait(%r):\n"
        "            return 'late'\n"
        "        return f'status {exc.error_code}'\n" % BOUND_S
    )
    agent_module = importlib.import_module(module)
    seen: list[str] = []

    def on_event(event: Event) -> None:
        if isinstance(event, ScenarioFinished):
            seen.append(event.name)
            agent_module.RELEASE.set()
        elif isinstance(event, CellFinished) and event.result.scenario != "calm":
            seen.append(f"cell {event.result.scenario} {event.result.status.value}")

    agent = {
        "type": "python",
        "endpoint": f"{module}:answer",
        "tools": [f"{module}_tools:quotes"],
    }
    loaded = load_config_text(contract(agent), base_dir=tmp_path)
    result = run_phases(loaded, ["contract"], on_event=on_event)
    each_cell_saw_its_own_fault(result)
    assert seen[:2] == ["cell down-501 passed", "down-501"]
    assert sorted(seen[2:]) == sorted(
        [f"cell down-{code} passed" for code in CODES[1:]] + [f"down-{c}" for c in CODES[1:]]
    )


@pytest.fixture
def quotes() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda request: Response.json({"price": 1.0})) as server:
        yield server


def run_forwarding_agent(
    quotes: LoopbackServer, around: Callable[[Request, Callable[[], str]], str]
) -> RunResult:
    """The contract run against an http agent (a session per cell) that forwards its cell
    header to its tool call through a proxy service and answers the status it got;
    ``around(request, call)`` makes the tool call."""
    with ChaosProxy(tools={"quotes": quotes.url}) as proxy:

        def agent(request: Request) -> Response:
            cell = request.headers.get("X-Flakestorm-Cell", "")
            forward = urllib.request.Request(
                f"{proxy.url}/tools/quotes/ACME", headers={"X-Flakestorm-Cell": cell}
            )

            def call() -> str:
                try:
                    with urllib.request.urlopen(forward, timeout=BOUND_S) as reply:
                        return f"status {reply.status}"
                except urllib.error.HTTPError as exc:
                    return f"status {exc.code}"

            return Response.json({"output": around(request, call)})

        with LoopbackServer(agent) as served:
            http_agent = {
                "type": "http",
                "endpoint": served.url_for("/chat"),
                "session": {"header": "X-Session-Id"},
            }
            text = contract(http_agent, proxy={"url": proxy.url, "tools": {"quotes": quotes.url}})
            return run_phases(load_config_text(text, env={}), ["contract"])


def test_an_http_agent_forwarding_the_cell_header_has_its_scenarios_in_flight(
    quotes: LoopbackServer,
) -> None:
    barrier = threading.Barrier(len(CODES), timeout=BOUND_S)

    def together(request: Request, call: Callable[[], str]) -> str:
        seen = call()
        if "[" in request.headers.get("X-Flakestorm-Cell", ""):  # a cell, not the probe
            barrier.wait()
        return seen

    each_cell_saw_its_own_fault(run_forwarding_agent(quotes, together))


def test_the_proxy_decides_a_call_by_its_cells_scenario_in_flight(
    quotes: LoopbackServer,
) -> None:
    faults = {
        name: ActiveScenario(
            name, 7, tool_faults=(ToolFault(tool="quotes", mode="error", error_code=code),)
        )
        for name, code in (("a", 501), ("b", 502))
    }
    with ChaosProxy(tools={"quotes": quotes.url}) as proxy:
        proxy.fly(list(faults.values()), {"inv[a]": "a", "inv[b]": "b"})
        url = f"{proxy.url}/tools/quotes/x"
        statuses = {
            cell: requests.get(url, headers={"X-Flakestorm-Cell": cell}, timeout=5).status_code
            for cell in ("inv[a]#0.0", "inv[b]#0.0", "other#0.0")
        }
        calls = {(i.scenario, i.cell_id, i.status) for i in proxy.log.snapshot()}
        proxy.activate(None)  # the flight lands
        assert proxy.flight is None
    assert statuses == {"inv[a]#0.0": 501, "inv[b]#0.0": 502, "other#0.0": 200}
    assert ("a", "inv[a]#0.0", 501) in calls and ("b", "inv[b]#0.0", 502) in calls


def test_the_control_api_puts_scenarios_in_flight_and_refuses_a_bad_document(
    quotes: LoopbackServer,
) -> None:
    from flakestorm.chaos.proxy.control import ProxyControl, scenario_document

    with ChaosProxy(tools={"quotes": quotes.url}) as proxy:
        control = ProxyControl(proxy.url)
        down = ActiveScenario("down", 7, tool_faults=(ToolFault(tool="quotes", mode="error"),))
        control.fly([down], {"inv[down]": "down"})
        assert proxy.flight is not None and set(proxy.flight.books) == {"down"}
        url = f"{proxy.url}/_flakestorm/flight"
        bad = [
            {"scenarios": {}, "cells": {}},
            {"scenarios": [], "cells": {"x": 1}},
            {
                "scenarios": [{**scenario_document(down), "tool_faults": [{"tool": "quotes"}]}],
                "cells": {},
            },
        ]
        answers = [requests.put(url, json=doc, timeout=5) for doc in bad]
        control.close()
    assert [a.status_code for a in answers] == [400, 400, 400]
    assert all(a.json()["error"]["type"] == "invalid_flight" for a in answers)
    assert "mode" in answers[2].json()["error"]["message"]


def test_an_earlier_proxy_service_without_flight_runs_the_scenarios_one_after_another(
    quotes: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flakestorm.chaos.proxy import control

    def earlier_health(proxy: ChaosProxy, body: bytes, params: Any) -> Any:
        return control.json_reply({"status": "ok", "version": "2.0.0", "scenario": None})

    monkeypatch.setitem(control._ROUTES, ("GET", "/health"), earlier_health)
    lock = threading.Lock()
    now: dict[str, int] = {}
    most = [0]

    def counted(request: Request, call: Callable[[], str]) -> str:
        scenario = request.headers.get("X-Flakestorm-Scenario", "")
        with lock:
            now[scenario] = now.get(scenario, 0) + 1
            most[0] = max(most[0], sum(1 for n in now.values() if n))
        try:
            return call()
        finally:
            with lock:
                now[scenario] -= 1

    result = run_forwarding_agent(quotes, counted)
    each_cell_saw_its_own_fault(result, in_flight=False)
    assert most[0] == 1  # never two scenarios' invocations at once


@pytest.mark.parametrize(
    ("agent", "extra", "runs"),
    [
        (
            {"type": "python", "endpoint": "m:answer", "tools": ["m:quotes"]},
            {},
            "in flight together",
        ),
        (
            {"type": "http", "endpoint": "http://127.0.0.1:9/chat", "session": {"header": "X-S"}},
            {"proxy": {"tools": {"quotes": "http://127.0.0.1:9"}}},
            "in flight together if attributed",
        ),
        (
            {"type": "http", "endpoint": "http://127.0.0.1:9/chat", "reset_endpoint": "/reset"},
            {"proxy": {"tools": {"quotes": "http://127.0.0.1:9"}}},
            "one after another",
        ),
    ],
)
def test_validate_says_how_the_scenarios_will_run(
    tmp_path: Path, agent: dict[str, Any], extra: dict[str, Any], runs: str
) -> None:
    from flakestorm.engine.run_plan import plan_run

    loaded = load_config_text(contract(agent, **extra), base_dir=tmp_path, env={})
    flight = plan_run(loaded.config, tmp_path).phases["contract"].flight
    assert flight is not None and flight.runs == runs
