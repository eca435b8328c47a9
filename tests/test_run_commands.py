"""The run commands as a user calls them: `contract score`, `run --chaos --chaos-only`, `ci`.

The agent is a python module with a tool that flakestorm wraps for the run, so tool faults are
delivered in-process (SPEC §4.2) and every run is fast and offline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

AGENT = """
import tools
from flakestorm import ToolFaultError


def answer(prompt):
    try:
        quote = tools.get_quote("AAPL")
    except ToolFaultError as exc:
        return f"Market data is unavailable right now ({exc.error_code}); source: none."
    return f"According to the market feed, AAPL is at ${quote['price']:.2f}."
"""
TOOLS = """
def get_quote(ticker):
    return {"ticker": ticker, "price": 123.45}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "finbot.py").write_text(AGENT)
    (tmp_path / "tools.py").write_text(TOOLS)
    return tmp_path


def write_config(project: Path, **extra: Any) -> Path:
    doc: dict[str, Any] = {
        "agent": {"type": "python", "endpoint": "finbot:answer", "tools": ["tools:get_quote"]},
        "golden_prompts": ["price of AAPL?", "quote AAPL"],
        "contract": {
            "name": "c",
            "invariants": [
                {
                    "id": "cites",
                    "type": "regex",
                    "pattern": "(?i)source|according to",
                    "severity": "critical",
                },
                {"id": "answers", "type": "output_not_empty", "severity": "high"},
                # fails everywhere: 5 of 6 weight points pass -> 83.33
                {"id": "mentions-eur", "type": "contains", "value": "EUR"},
            ],
            "chaos_matrix": [{"name": "calm"}],
        },
    }
    doc.update(extra)
    path = project / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    return path


def flakestorm(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flakestorm", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_contract_score_prints_only_the_number_and_exits_with_the_gate(project: Path) -> None:
    write_config(project)
    passed = flakestorm(project, "contract", "score")
    assert (passed.returncode, passed.stdout) == (0, "83.33\n"), passed.stderr
    below = flakestorm(project, "contract", "score", "--min-score", "90")
    assert (below.returncode, below.stdout) == (1, "83.33\n"), below.stderr
    assert (project / "flakestorm-reports" / "results.json").is_file()


def test_contract_run_reports_progress_a_line_per_scenario_off_a_terminal(project: Path) -> None:
    write_config(project)
    result = flakestorm(project, "contract", "run")
    assert result.returncode == 0, result.stderr
    assert "scenario calm: 2 passed, 1 failed" in result.stderr
    assert "Contract score: 83.33" in result.stdout
    assert "Verdict: PASS" in result.stdout


def test_run_chaos_only_with_a_profile_delivers_its_faults_to_the_wrapped_tool(
    project: Path,
) -> None:
    write_config(
        project,
        invariants=[
            {
                "id": "no-figures",
                "type": "regex",
                "pattern": r"\$\d",
                "negate": True,
                "severity": "critical",
            },
        ],
    )
    result = flakestorm(project, "run", "--chaos", "--chaos-only", "--chaos-profile", "api_outage")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Chaos score: 100.00 (2 of 2 prompts passed)" in result.stdout
    doc = json.loads((project / "flakestorm-reports" / "results.json").read_text())
    assert list(doc["phases"]) == ["chaos"]
    [cell] = doc["phases"]["chaos"]["cells"]
    assert cell["faults_fired"] == ["tool_faults[0] error(503) on *"]
    assert [c["status"] for c in cell["calls"]] == [503, 503]  # raised into the agent
    assert doc["overall"]["phases_ran"] == ["chaos"]
    # the tool is restored after the run: the module on disk was never touched
    assert (project / "tools.py").read_text() == TOOLS


def test_run_without_mutations_says_what_to_do(project: Path) -> None:
    write_config(project)
    result = flakestorm(project, "run")
    assert result.returncode == 2
    assert "no `mutations` section" in result.stderr
    assert "mutation phase" in result.stderr
    assert "flakestorm run --chaos --chaos-only" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_profile_is_a_usage_error(project: Path) -> None:
    write_config(project)
    result = flakestorm(project, "run", "--chaos", "--chaos-only", "--chaos-profile", "outage")
    assert result.returncode == 2
    assert "unknown chaos profile 'outage'" in result.stderr


def test_ci_runs_every_configured_phase_and_weighs_them(project: Path) -> None:
    write_config(
        project,
        chaos={"tool_faults": [{"tool": "get_quote", "mode": "error", "error_code": 500}]},
        scoring={"weights": {"mutation": 0.0, "chaos": 0.5, "contract": 0.5, "replay": 0.0}},
    )
    result = flakestorm(project, "ci")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((project / "flakestorm-reports" / "results.json").read_text())
    assert doc["overall"]["phases_ran"] == ["chaos", "contract"]
    assert doc["phases"]["contract"]["score"]["score"] == 83.33
    assert doc["phases"]["chaos"]["score"]["score"] == 100.0
    assert doc["overall"]["score"] == round((83.33 + 100.0) / 2, 2)
    for name in ("junit.xml", "summary.md", "report.html"):
        assert (project / "flakestorm-reports" / name).is_file()


def test_ci_refuses_a_configured_phase_with_nothing_to_run(project: Path) -> None:
    # (a section whose phase this version cannot run: tests/test_phases.py)
    write_config(project, replays={"sessions": []})
    result = flakestorm(project, "ci")
    assert result.returncode == 2
    assert "replays.sessions: lists no session" in result.stderr


def invocations_announced(project: Path) -> int:
    shown = flakestorm(project, "validate")
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if "invocations:" in x)
    return int(line.split("invocations:")[1].split()[0])


def test_validate_announces_exactly_the_invocations_a_run_makes(project: Path) -> None:
    write_config(project)
    announced = invocations_announced(project)
    assert flakestorm(project, "contract", "run").returncode == 0
    doc = json.loads((project / "flakestorm-reports" / "results.json").read_text())
    assert doc["invocations"] == announced == 2 * 3 + 2  # 3 cells × 2 prompts + stateful check
