"""`flakestorm contract run` end to end: the real CLI, the example agent started through
`agent.start`, its tool and LLM traffic through the in-process chaos proxy.

These are the user's view: exit codes, the printed matrix, results.json with the faults that
fired in each cell, and the "fault not delivered" proof when the wiring is wrong.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.server import free_port

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "finance_agent"
PYTHONPATH = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
"""The test run's python path, so the CLI run is of the flakestorm under test."""


def config(
    tool: str = "market_data_api", reset: bool = False, ports: tuple[int, int, int] | None = None
) -> str:
    agent, tool_port, llm_port = ports or (free_port(), free_port(), free_port())
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
    env = {"PATH": "/usr/bin:/bin", "BAD_AGENT": "1" if bad else "0", **PYTHONPATH}
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


def test_an_agent_already_listening_is_reused_with_a_plain_warning_and_no_attribution_claim(
    tmp_path: Path,
) -> None:
    """A process already answering where ``agent.start`` would start the agent is reused: it
    was started without the proxy's environment, so its calls bypass the proxy. The run says
    so plainly, and claims nothing about attribution from calls that never reached it."""
    ports = free_port(), free_port(), free_port()
    env = {"PATH": "/usr/bin:/bin", "FINBOT_PARENT_PID": str(os.getpid())}
    command = [sys.executable, "run_local.py", "--port", str(ports[0])]
    command += ["--tool-port", str(ports[1]), "--llm-port", str(ports[2])]
    with subprocess.Popen(
        command, cwd=EXAMPLE, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as running:
        try:
            assert running.stdout is not None
            with selectors.DefaultSelector() as selector:  # its first line: it listens
                selector.register(running.stdout, selectors.EVENT_READ)
                assert selector.select(30), "the agent did not start"
            assert running.stdout.readline().startswith("listening on ")
            doc = json.loads(config(ports=ports))
            flaky = {"tool": "market_data_api", "mode": "error", "probability": 0.5}
            doc["contract"]["chaos_matrix"].append({"name": "flaky", "tool_faults": [flaky]})
            code, output, results = run(tmp_path, json.dumps(doc))
        finally:
            running.terminate()
    assert code == 3, output  # every fault not delivered: the run proved nothing
    warning = (
        f"Warning: a process already answers at http://127.0.0.1:{ports[0]}/chat, so "
        "agent.start was not run and that process was reused without the chaos proxy's "
        "environment (OPENAI_BASE_URL, HTTP_PROXY, FLAKESTORM_PROXY_URL…): its tool and LLM "
        "calls bypass the proxy, so faults cannot reach them. Stop it and run again, or start "
        "it with that environment."
    )
    assert warning in results["warnings"]
    assert output.count(warning) == 2  # as the agent is reused, and with the run's warnings
    summary = (tmp_path / "flakestorm-reports" / "summary.md").read_text()
    assert "a process already answers at" in summary and "faults cannot reach them" in summary
    # no call reached the proxy: nothing is claimed about what the agent forwards
    everything = output + json.dumps(results) + summary
    assert "forwards no attribution" not in everything
    assert "No call of the agent reached flakestorm before the matrix" in everything
    # an order-dependent scenario ran one at a time, and says so without the claim
    assert "cells ran one at a time (no call showed forwarded attribution;" in summary
    assert cells(results)["cite[tool-down]"]["status"] == "errored"


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


CHATTY_AGENT = """
import logging
import sys

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
log = logging.getLogger("chatty")
print("chatty-import")


def answer(prompt):
    print("chatty-out: thinking about " + prompt)
    print("chatty-err: " + prompt, file=sys.stderr)
    log.info("chatty-log: answering %s", prompt)
    return "no" if "refund" in prompt else "hello, " + prompt
"""


def test_a_python_agents_prints_and_logging_go_to_its_log_not_the_progress(
    tmp_path: Path,
) -> None:
    """What a python agent prints and logs is kept per invocation in agent.log beside the
    reports, never among the run's lines; a failed cell's report shows its lines."""
    (tmp_path / "chatty_agent.py").write_text(CHATTY_AGENT)
    doc = {
        "agent": {"type": "python", "endpoint": "chatty_agent:answer"},
        "golden_prompts": ["greet Ada", "refund Bob"],
        "contract": {
            "name": "Chatty",
            "invariants": [
                {"id": "greets", "type": "contains", "value": "hello", "severity": "critical"}
            ],
            "chaos_matrix": [{"name": "calm"}, {"name": "again"}],
        },
        "advanced": {"concurrency": 4},
    }
    code, output, results = run(tmp_path, json.dumps(doc))
    assert code == 1, output
    assert "chatty-" not in output  # the run's own lines only
    reports = tmp_path / "flakestorm-reports"
    blocks = dict(
        block.split(" <==\n", 1)
        for block in (reports / "agent.log").read_text().split("==> ")[1:]
        if not block.startswith("stateful-check")
    )

    def lines(prompt: str) -> str:
        return (
            f"chatty-out: thinking about {prompt}\nchatty-err: {prompt}\n"
            f"INFO chatty: chatty-log: answering {prompt}"
        )

    assert blocks == {
        "import of chatty_agent:answer": "chatty-import\n",
        "greets[calm]#0.0": lines("greet Ada") + "\n",
        "greets[calm]#0.1": lines("refund Bob") + "\n",
        "greets[again]#0.0": lines("greet Ada") + "\n",
        "greets[again]#0.1": lines("refund Bob") + "\n",
    }
    failed = cells(results)["greets[calm]"]
    assert [p["console"] for p in failed["prompts"]] == ["", lines("refund Bob")]
    summary = (reports / "summary.md").read_text()
    assert f"```text\n{lines('refund Bob')}\n```" in summary
    assert "chatty-out: thinking about greet Ada" not in summary  # a passing invocation's
