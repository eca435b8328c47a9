"""`flakestorm contract run` end to end: the real CLI, the example agent started through
`agent.start`, its tool and LLM traffic through the in-process chaos proxy.

These are the user's view: exit codes, the printed matrix, results.json with the faults that
fired in each cell, and the "fault not delivered" proof when the wiring is wrong.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.server import free_port

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "finance_agent"


def config(tool: str = "market_data_api", reset: bool = False) -> str:
    agent, tool_port, llm_port = free_port(), free_port(), free_port()
    command = (
        f"{sys.executable} run_local.py --port {agent} --tool-port {tool_port} "
        f"--llm-port {llm_port}"
    )
    doc: dict[str, Any] = {
        "agent": {
            "endpoint": f"http://127.0.0.1:{agent}/chat",
            "response_path": "output",
            "timeout": 10000,
            "health_endpoint": f"http://127.0.0.1:{agent}/health",
            "ready_timeout": 30000,
            "start": {
                "command": command,
                "cwd": str(EXAMPLE),
                "env": {"MARKET_DATA_TIMEOUT_S": "0.5"},
            },
        },
        "golden_prompts": ["What is the current stock price of AAPL?", "Quote for MSFT?"],
        "contract": {
            "name": "Finance",
            "invariants": [
                {
                    "id": "cite",
                    "type": "regex",
                    "pattern": r"(?i)\b(source|according to)\b",
                    "severity": "critical",
                },
                {
                    "id": "no-fabrication",
                    "type": "regex",
                    "pattern": r"\$[\d,]+\.\d{2}",
                    "negate": True,
                    "severity": "critical",
                    "when": "tool_faults_active",
                },
                {"id": "not-empty", "type": "output_not_empty", "severity": "medium"},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {"name": "tool-down", "tool_faults": [{"tool": tool, "mode": "error"}]},
                {
                    "name": "tool-hangs",
                    "tool_faults": [{"tool": tool, "mode": "timeout", "delay_ms": 1500}],
                },
                {
                    "name": "llm-cut",
                    "llm_faults": [{"mode": "truncated_response", "max_tokens": 5}],
                },
            ],
        },
        "proxy": {
            "llm_upstream": f"http://127.0.0.1:{llm_port}",
            # a route for every faulted tool (a fault on a name no route has is a config error);
            # the agent calls only market_data_api
            "tools": {name: f"http://127.0.0.1:{tool_port}" for name in {"market_data_api", tool}},
        },
        "advanced": {"concurrency": 4},
    }
    if reset:
        doc["agent"]["reset_endpoint"] = "/reset"
    return json.dumps(doc)


def run(tmp_path: Path, text: str, bad: bool = False) -> tuple[int, str, dict[str, Any]]:
    path = tmp_path / "flakestorm.yaml"
    path.write_text(text)
    env = {"PATH": "/usr/bin:/bin", "BAD_AGENT": "1" if bad else "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    results = json.loads((tmp_path / "flakestorm-reports" / "results.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, results


def cells(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{c['invariant_id']}[{c['scenario']}]": c for c in results["phases"]["contract"]["cells"]
    }


def test_the_good_agent_passes_and_every_fault_is_proven_to_have_fired(tmp_path: Path) -> None:
    code, output, results = run(tmp_path, config())
    assert code == 0, output
    assert "Verdict: PASS" in output
    by_id = cells(results)
    down = by_id["cite[tool-down]"]
    assert down["status"] == "passed"
    assert down["faults_fired"] == ["tool_faults[0] error(503) on market_data_api"]
    assert {c["status"] for c in down["calls"] if c["target"] == "tool"} == {503}
    hangs = by_id["no-fabrication[tool-hangs]"]
    assert hangs["faults_fired"] == ["tool_faults[0] timeout(1500 ms) on market_data_api"]
    cut = by_id["not-empty[llm-cut]"]
    assert cut["faults_fired"] == ["llm_faults[0] truncated_response(5 tokens)"]
    assert any(c["target"] == "llm" for c in cut["calls"])
    # the calm scenario saw the same calls, with nothing injected
    assert by_id["cite[calm]"]["faults_fired"] == []
    assert by_id["no-fabrication[calm]"]["status"] == "skipped"
    assert all(not s["undelivered"] for s in results["phases"]["contract"]["scenarios"])


def test_the_bad_agent_fails_critical_cells_with_exit_code_1(tmp_path: Path) -> None:
    code, output, results = run(tmp_path, config(), bad=True)
    assert code == 1, output
    assert "Verdict: FAIL" in output
    critical = results["phases"]["contract"]["score"]["critical_failures"]
    assert "no-fabrication[tool-down]" in critical
    fabricated = cells(results)["no-fabrication[tool-down]"]
    assert "negated" in fabricated["reason"]
    assert fabricated["faults_fired"] == ["tool_faults[0] error(503) on market_data_api"]


def test_a_fault_on_a_tool_the_agent_never_calls_is_reported_not_delivered(
    tmp_path: Path,
) -> None:
    code, output, results = run(tmp_path, config(tool="weather_api"))
    assert code == 3, output  # harness error: the run proved nothing about those scenarios
    scenarios = {s["name"]: s for s in results["phases"]["contract"]["scenarios"]}
    assert scenarios["tool-down"]["undelivered"] == ["tool_faults[0] error(503) on weather_api"]
    cell = cells(results)["cite[tool-down]"]
    assert cell["status"] == "errored"
    assert "fault not delivered" in cell["reason"]
    assert "made no call to `weather_api` through flakestorm" in cell["reason"]
    # the LLM scenario was delivered and is judged normally
    llm_cut = cells(results)["cite[llm-cut]"]
    assert llm_cut["status"] == "passed", (
        llm_cut["reason"],
        results["phases"]["contract"]["scenarios"],
    )


@pytest.mark.parametrize("reset", [True])
def test_with_a_reset_cells_run_one_at_a_time_and_still_prove_delivery(
    tmp_path: Path, reset: bool
) -> None:
    code, output, results = run(tmp_path, config(reset=reset))
    assert code == 0, output
    # `validate` announced exactly the invocations the run made (with a reset, no forwarding
    # probe: each call falls in the cell declared active)
    shown = subprocess.run(
        [sys.executable, "-m", "flakestorm", "validate", "-c", str(tmp_path / "flakestorm.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(x for x in shown.stdout.splitlines() if "invocations:" in x)
    assert int(line.split("invocations:")[1].split()[0]) == results["invocations"]
    assert "forwarding probe" not in line and "stateful" not in line
    assert cells(results)["cite[tool-down]"]["faults_fired"] == [
        "tool_faults[0] error(503) on market_data_api"
    ]


def test_a_recorded_cassette_replays_the_llm_without_its_upstream(tmp_path: Path) -> None:
    cassette = tmp_path / "llm.cassette"
    doc = json.loads(config())
    doc["golden_prompts"] = ["What is a price-to-earnings ratio?"]  # answered by the LLM alone
    doc["contract"]["chaos_matrix"] = [{"name": "calm"}]
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    command = [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(path)]
    recorded = subprocess.run(
        [*command, "--record", str(cassette), "--output", str(tmp_path / "recorded")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    lines = cassette.read_text().splitlines()
    assert any('"/v1/chat/completions"' in line for line in lines)
    # tamper with the recorded LLM replies: the replayed answers must carry the change
    tampered = [
        line.replace("divides", "DIVIDES-REPLAYED") if '"target": "llm"' in line else line
        for line in lines
    ]
    assert tampered != lines
    cassette.write_text("\n".join(tampered) + "\n")
    doc["proxy"]["llm_upstream"] = f"cassette:{cassette.name}"
    code, output, results = run(tmp_path, json.dumps(doc))
    assert code == 0, output
    calm = cells(results)["cite[calm]"]
    assert "DIVIDES-REPLAYED" in (calm["prompts"][0]["output"] or "")
