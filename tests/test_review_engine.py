"""Engine review: regressions for defects found in the run engine (runner, executor, contract
phase, fault delivery, scoring, results).

Every agent here is a python module written to a temporary project, with its tool wrapped by
flakestorm (SPEC §4.2), run in-process through :func:`flakestorm.runner.run_phases`. Module
names are unique per test so ``sys.modules`` never hands one test another test's agent.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from flakestorm.executor import CellFinished, Event, ScenarioFinished
from flakestorm.loader import load_config
from flakestorm.results import RunResult, Status, from_document, to_document
from flakestorm.runner import run_phases

AGENT = """
import {tools}
from flakestorm import ToolFaultError


def answer(prompt):
    try:
        quote = {tools}.get_quote("AAPL")
    except ToolFaultError as exc:
        return f"Market data is unavailable ({{exc.error_code}}); source: none."
    return f"According to the feed: {{quote}}"
"""
TOOLS = """
CALLS = []


def get_quote(ticker):
    CALLS.append(ticker)
    return {"ticker": ticker, "price": "123.45"}


def reset():
    raise RuntimeError("the reset service is down")
"""


def project(tmp_path: Path, scenarios: list[dict[str, Any]], **extra: Any) -> Path:
    """A python-agent project; returns the config path. ``extra`` is merged into the config
    (``agent`` entries are merged into the agent section)."""
    suffix = uuid.uuid4().hex[:10]
    agent_mod, tools_mod = f"rv_agent_{suffix}", f"rv_tools_{suffix}"
    (tmp_path / f"{agent_mod}.py").write_text(AGENT.format(tools=tools_mod))
    (tmp_path / f"{tools_mod}.py").write_text(TOOLS)
    agent = {
        "type": "python",
        "endpoint": f"{agent_mod}:answer",
        "tools": [f"{tools_mod}:get_quote"],
        **extra.pop("agent", {}),
    }
    if agent.get("reset_function") == "TOOLS:reset":
        agent["reset_function"] = f"{tools_mod}:reset"
    doc: dict[str, Any] = {
        "agent": agent,
        "golden_prompts": ["price of AAPL?", "quote AAPL"],
        "contract": {
            "name": "c",
            "invariants": extra.pop(
                "invariants",
                [{"id": "answers", "type": "output_not_empty", "severity": "high"}],
            ),
            "chaos_matrix": scenarios,
        },
        **extra,
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    return path


def run(path: Path, phases: tuple[str, ...] = ("contract",), **kw: Any) -> RunResult:
    return run_phases(load_config(path), list(phases), **kw)


def cells(result: RunResult) -> dict[str, Any]:
    assert "contract" in result.phases
    return {c.id: c for c in result.phases["contract"].cells}


# --------------------------------------------------------------------------- fault delivery


def test_a_tool_result_attack_alongside_a_firing_tool_fault_is_not_reported_undelivered(
    tmp_path: Path,
) -> None:
    # every call to get_quote reached flakestorm; the error fault replaced the result, so
    # the injection had nothing to poison: a matching call arrived, so it *was* delivered
    # (SPEC §4: only "no matching call in any cell" is "fault not delivered")
    path = project(
        tmp_path,
        [
            {
                "name": "outage",
                "tool_faults": [{"tool": "get_quote", "mode": "error"}],
                "context_attacks": [{"type": "indirect_injection", "payloads": ["IGNORE"]}],
            }
        ],
    )
    result = run(path)
    assert "contract" in result.phases
    assert result.phases["contract"].scenarios[0].undelivered == ()
    cell = cells(result)["answers[outage]"]
    assert cell.status is Status.PASSED, cell.reason
    assert cell.faults_fired == ("tool_faults[0] error(503) on get_quote",)
    assert result.exit_code == 0


def test_faults_fired_are_attributed_to_cells_of_a_scenario_whose_name_has_a_hash(
    tmp_path: Path,
) -> None:
    path = project(
        tmp_path, [{"name": "outage #2", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}]
    )
    result = run(path)
    cell = cells(result)["answers[outage #2]"]
    assert cell.status is Status.PASSED, cell.reason
    assert cell.faults_fired == ("tool_faults[0] error(503) on get_quote",)
    assert len(cell.calls) == 2  # one tool call per golden prompt


def test_the_chaos_phase_does_not_reuse_the_contract_phase_interactions(tmp_path: Path) -> None:
    # the contract has a scenario named like the chaos phase's one ("chaos") and the chaos
    # phase's invariant ids are the defaults; its cells must get only their own calls
    path = project(
        tmp_path,
        [{"name": "chaos", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}],
        invariants=[{"id": "completes", "type": "completes"}],
        chaos={"tool_faults": [{"tool": "get_quote", "mode": "slow", "delay_ms": 1}]},
    )
    result = run(path, ("contract", "chaos"))
    assert "chaos" in result.phases
    for cell in result.phases["chaos"].cells:
        assert len(cell.calls) == 2, (cell.id, cell.calls)
        assert cell.faults_fired == ("tool_faults[0] slow(1 ms) on get_quote",)


# --------------------------------------------------------------------------- resets


def test_a_failing_reset_before_the_baselines_errors_cells_instead_of_aborting_the_run(
    tmp_path: Path,
) -> None:
    path = project(
        tmp_path,
        [{"name": "calm"}],
        agent={"reset_function": "TOOLS:reset"},
        invariants=[
            {"id": "same", "type": "behavior_unchanged", "baseline": "auto"},
            {"id": "answers", "type": "output_not_empty"},
        ],
    )
    result = run(path)  # a HarnessError escaping here loses every report
    by_id = cells(result)
    assert {c.status for c in by_id.values()} == {Status.ERRORED}
    assert "reset failed" in by_id["answers[calm]"].reason
    assert result.exit_code == 3


# --------------------------------------------------------------------------- progress


def test_scenario_progress_reports_the_verdicts_after_the_delivery_check(tmp_path: Path) -> None:
    # the agent never calls `other_tool`: the scenario's cells end ERRORED ("fault not
    # delivered"); the progress line printed for the scenario must not say they passed
    path = project(
        tmp_path,
        [{"name": "misfire", "tool_faults": [{"tool": "other_tool", "mode": "error"}]}],
    )
    events: list[Event] = []
    result = run(path, on_event=events.append)
    final = [c.status for c in cells(result).values()]
    assert final == [Status.ERRORED]
    announced = [e for e in events if isinstance(e, ScenarioFinished)]
    assert [e.name for e in announced] == ["misfire"]
    assert [c.status for c in announced[0].results] == final
    # each cell is announced once, with its final verdict
    assert [e.result.status for e in events if isinstance(e, CellFinished)] == final


# --------------------------------------------------------------------------- chaos phase score


def test_the_chaos_phase_score_honours_min_pass(tmp_path: Path) -> None:
    # the first of three repeats of each prompt fails (the agent answers "" the first time it
    # sees a prompt): 2 of 3 runs hold, min_pass 2 -> the cell passes, and so do the prompts
    suffix = uuid.uuid4().hex[:10]
    mod = f"rv_flaky_{suffix}"
    (tmp_path / f"{mod}.py").write_text(
        "import threading\n"
        "SEEN = {}\n"
        "LOCK = threading.Lock()\n"
        "def answer(prompt):\n"
        "    with LOCK:\n"
        "        n = SEEN[prompt] = SEEN.get(prompt, 0) + 1\n"
        "    return '' if n == 1 else 'fine'\n"
    )
    doc = {
        "agent": {"type": "python", "endpoint": f"{mod}:answer"},
        "golden_prompts": ["a", "b"],
        "invariants": [{"type": "output_not_empty"}],
        "chaos": {"context_attacks": [{"type": "memory_poisoning", "payload": "x"}]},
        "advanced": {"repeat": 3, "min_pass": 2, "concurrency": 1},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run(path, ("chaos",))
    assert "chaos" in result.phases
    assert [c.status for c in result.phases["chaos"].cells] == [Status.PASSED]
    assert result.phases["chaos"].cells[0].flaky
    assert result.phases["chaos"].score.score == 100.0


# --------------------------------------------------------------------------- results.json


def test_results_json_round_trips_a_run_with_both_phases(tmp_path: Path) -> None:
    path = project(
        tmp_path,
        [
            {"name": "calm"},
            {"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]},
        ],
        chaos={"tool_faults": [{"tool": "get_quote", "mode": "malformed"}]},
    )
    result = run(path, ("contract", "chaos"))
    doc = json.loads(json.dumps(to_document(result)))
    assert from_document(doc) == result


def test_a_scenario_whose_resets_all_failed_is_not_reported_as_fault_not_delivered(
    tmp_path: Path,
) -> None:
    # no cell invoked the agent, so nothing proves or disproves delivery: the cells keep the
    # real reason (the reset failed) instead of a wiring hint about the proxy/wrappers
    path = project(
        tmp_path,
        [{"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}],
        agent={"reset_function": "TOOLS:reset"},
    )
    result = run(path)
    assert "contract" in result.phases
    assert result.phases["contract"].scenarios[0].undelivered == ()
    cell = cells(result)["answers[down]"]
    assert cell.status is Status.ERRORED
    assert cell.reason.startswith("reset failed"), cell.reason
