"""Sweeps (SPEC §4.1): a scenario run at every value of one fault field, and the breaking point
of each invariant in every report.

The agent asks its quote tool for AAPL through the chaos proxy with a 1 s timeout; the tool is
made slower and slower. It keeps its contract up to 1 s of latency and breaks above it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config_text
from flakestorm.results.model import PhaseOutcome
from flakestorm.results.sweeps import SweepInfo, breaking_point, judged

VALUES = [250, 500, 750, 1250, 1500]


def quote_tool(request: Request) -> Response:
    return Response.json({"ticker": "AAPL", "price": "187.23"})


def agent_for(proxy_url: str) -> Any:
    def answer(request: Request) -> Response:
        if request.path == "/health":
            return Response.json({"ok": True})
        cell = request.headers.get("X-Flakestorm-Cell", "")
        with requests.Session() as session:
            session.trust_env = False
            try:
                reply = session.get(
                    f"{proxy_url}/tools/get_quote/quote/AAPL",
                    headers={"X-Flakestorm-Cell": cell},
                    timeout=1.0,  # the agent's own timeout on its tool
                )
                output = f"AAPL {reply.json()['price']} (source: market data)"
            except requests.Timeout:
                output = "The market data service is too slow right now; no price."
        return Response.json({"output": output})

    return answer


def config(agent_url: str, proxy_url: str, tool_url: str, out: Path) -> dict[str, Any]:
    return {
        "agent": {"type": "http", "endpoint": f"{agent_url}/chat", "timeout": 10000},
        "golden_prompts": ["What is AAPL at?"],
        "contract": {
            "name": "latency",
            "invariants": [
                {
                    "id": "quotes-the-price",
                    "type": "contains",
                    "value": "187.23",
                    "severity": "high",
                },
                {"id": "answers", "type": "output_not_empty", "severity": "medium"},
            ],
            "chaos_matrix": [
                {
                    "name": "slow-quotes",
                    "tool_faults": [{"tool": "get_quote", "mode": "slow", "delay_ms": 100}],
                    "sweep": {"field": "tool_faults[0].delay_ms", "values": VALUES},
                }
            ],
        },
        "proxy": {"url": proxy_url, "tools": {"get_quote": tool_url}},
        "output": {"dir": str(out)},
    }


@pytest.fixture
def latency_project(tmp_path: Path) -> Iterator[Path]:
    with (
        LoopbackServer(quote_tool) as tool,
        ChaosProxy() as proxy,
        LoopbackServer(agent_for(proxy.url)) as agent,
    ):
        path = tmp_path / "flakestorm.yaml"
        path.write_text(yaml.safe_dump(config(agent.url, proxy.url, tool.url, tmp_path / "out")))
        yield path


def flakestorm(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flakestorm", *args, "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=path.parent,
    )


def test_a_latency_sweep_finds_where_the_agent_breaks(latency_project: Path) -> None:
    checked = flakestorm(latency_project, "validate")
    assert checked.returncode == 0, checked.stderr
    assert "1 invariant" not in checked.stdout
    assert "2 invariants × 5 scenarios = 10 cells" in checked.stdout, checked.stdout
    assert "slow-quotes: tool_faults[0].delay_ms at 5 values (250, 500, 750, 1250, 1500)" in (
        checked.stdout
    )

    done = flakestorm(latency_project, "contract", "run")
    assert done.returncode == 0, done.stdout + done.stderr  # no critical invariant, score 80
    out = latency_project.parent / "out"

    doc = json.loads((out / "results.json").read_text())
    contract = doc["phases"]["contract"]
    assert [s["name"] for s in contract["scenarios"]] == [f"slow-quotes[{v}]" for v in VALUES]
    (sweep,) = contract["sweeps"]
    assert sweep["field"] == "tool_faults[0].delay_ms"
    points = {b["invariant"]: b for b in sweep["breaking"]}
    assert points["quotes-the-price"]["value"] == "1250"
    assert points["quotes-the-price"]["text"] == "breaks at 1250"
    assert points["quotes-the-price"]["marks"] == ["passed"] * 3 + ["failed"] * 2
    assert points["answers"] == {
        "invariant": "answers",
        "value": None,
        "text": "holds over the whole range",
        "marks": ["passed"] * 5,
    }

    summary = (out / "summary.md").read_text()
    assert "#### Sweep slow-quotes: tool\\_faults\\[0\\].delay\\_ms over 250 … 1500" in summary
    assert "| invariant | 250 | 500 | 750 | 1250 | 1500 | breaking point |" in summary
    assert "| quotes-the-price | ✅ | ✅ | ✅ | ❌ | ❌ | breaks at 1250 |" in summary

    html = (out / "report.html").read_text()
    assert '<svg class="sweep-chart"' in html
    assert "<title>750: 100% of the invariants passed</title>" in html
    assert "<title>1250: 50% of the invariants passed</title>" in html
    assert "<td>breaks at 1250</td>" in html

    junit = ET.parse(out / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert "quotes-the-price breaks at 1250" in props["breaking_point[slow-quotes]"]
    assert "breaks at 1250" in done.stdout, done.stdout  # the terminal
    results = str(out / "results.json")
    comment = subprocess.run(
        [sys.executable, "-m", "flakestorm", "report", results, "--format", "comment"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert comment.returncode == 0, comment.stderr
    assert (
        "- **Sweep slow-quotes: tool\\_faults\\[0\\].delay\\_ms over 250 … 1500**: "
        "quotes-the-price breaks at 1250; answers holds over the whole range"
    ) in (out / "comment.md").read_text()


def refused(tmp_path: Path, scenarios: list[dict[str, Any]]) -> str:
    """What loading a config with these scenarios is refused with (a ConfigError)."""
    doc = {
        "agent": {"type": "http", "endpoint": "http://127.0.0.1:9/chat"},
        "golden_prompts": ["p"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "a", "type": "completes"}],
            "chaos_matrix": scenarios,
        },
    }
    with pytest.raises(ConfigError) as caught:
        load_config_text(yaml.safe_dump(doc, sort_keys=False), base_dir=tmp_path)
    return str(caught.value)


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        (
            {"field": "tool_faults[0].latency", "values": [1, 2]},
            "sweep.field: 'latency' cannot be swept on tool_faults (numeric fields: delay_ms, "
            "probability, calls)",
        ),
        (
            {"field": "delay_ms", "values": [1, 2]},
            "sweep.field: 'delay_ms' is not a fault field: give LIST[INDEX].FIELD",
        ),
        (
            {"field": "tool_faults[3].delay_ms", "values": [1, 2]},
            "sweep: tool_faults[3].delay_ms: the scenario has 1 tool faults (indexes from 0)",
        ),
        (
            {"field": "tool_faults[0].max_tokens", "values": [1, 2]},
            "sweep.field: 'max_tokens' cannot be swept on tool_faults",
        ),
        (
            {"field": "tool_faults[0].delay_ms", "values": [100, 100.0]},
            "sweep.values: the values repeat (100, 100): give each once",
        ),
        (
            {"field": "tool_faults[0].probability", "values": [0.5, 1.5]},
            "sweep: tool_faults[0].probability: probability: 1.5: ",
        ),
        (
            {"field": "tool_faults[0].delay_ms", "values": [100]},
            "sweep.values: ",
        ),
    ],
)
def test_a_sweep_that_cannot_be_expanded_is_a_located_error(
    tmp_path: Path, sweep: dict[str, Any], message: str
) -> None:
    scenario = {
        "name": "s",
        "tool_faults": [{"tool": "t", "mode": "slow", "delay_ms": 10}],
        "sweep": sweep,
    }
    shown = refused(tmp_path, [scenario])
    assert f"contract.chaos_matrix[0].{message}" in shown, shown
    assert shown.startswith("flakestorm.yaml:")


def test_a_swept_delay_on_an_error_fault_means_nothing(tmp_path: Path) -> None:
    swept = {
        "name": "s",
        "tool_faults": [{"tool": "t", "mode": "error"}],
        "sweep": {"field": "tool_faults[0].delay_ms", "values": [1, 2]},
    }
    shown = refused(tmp_path, [swept, {"name": "s[2]"}])
    assert "sweep.field: tool_faults[0].delay_ms: 'delay_ms' means nothing for an 'error'" in shown
    assert "duplicate scenario name 's[2]'" in shown


@pytest.mark.parametrize(
    ("marks", "text", "value"),
    [
        (["passed", "passed", "failed", "failed"], "breaks at c", "c"),
        (["failed", "failed", "failed", "failed"], "fails from the first value", "a"),
        (["passed", "passed", "passed", "passed"], "holds over the whole range", None),
        (["passed", "failed", "passed", "failed"], "breaks at d", "d"),  # stays failed from d
        (["passed", "failed", None, "failed"], "breaks at b", "b"),  # no verdict is no recovery
        ([None, None, None, None], "no verdict (skipped or not run)", None),
    ],
)
def test_the_breaking_point_is_where_an_invariant_fails_and_stays_failed(
    marks: list[str | None], text: str, value: str | None
) -> None:
    point = breaking_point("inv", marks, ["a", "b", "c", "d"])
    assert (point.text, point.value) == (text, value)


def test_breaking_points_are_judged_from_the_cells() -> None:
    import dataclasses

    from support.runs import cell

    cells = tuple(
        dataclasses.replace(cell(f"inv[x]={status}", i), scenario=f"s[{i + 1}]")
        for i, status in enumerate(("passed", "failed", "errored"))
    )
    sweep = SweepInfo("s", "tool_faults[0].delay_ms", ("1", "2", "3"), ("s[1]", "s[2]", "s[3]"))
    from flakestorm.results.model import InvariantInfo, PhaseScore

    outcome = PhaseOutcome(
        phase="contract",
        name="c",
        invariants=(InvariantInfo("inv", "regex", "high", "always", False, None, 1),),
        scenarios=(),
        cells=cells,
        score=PhaseScore(score=None, passed=True, critical_failures=(), counts={}),
        sweeps=(sweep,),
    )
    (point,) = judged(outcome).sweeps[0].breaking
    assert point.text == "breaks at 2" and point.marks == ("passed", "failed", "failed")
