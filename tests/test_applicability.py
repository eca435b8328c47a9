"""``when`` judged per invocation when a scenario's faults may spare one (SPEC §5): an invariant
for "tool faults active" is judged only on the invocations a tool fault fired in.

The agent quotes the live price when its tool answers and says it has none when the tool
fails; ``never-fabricate-when-tools-fail`` forbids a price only while the tool is failing.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config
from flakestorm.results.model import CellResult, Status

AGENT = """
import {tools}
from flakestorm import ToolFaultError


def answer(prompt):
    try:
        quote = {tools}.get_quote("AAPL")
    except ToolFaultError:
        return "Market data is unavailable right now; I have no price to give."
    return f"AAPL is at ${{quote['price']}} according to the feed."
"""
TOOLS = """
def get_quote(ticker):
    return {"ticker": ticker, "price": "187.23"}


def reset():
    pass
"""
PROMPTS = ["price of AAPL?", "quote AAPL", "AAPL now?", "how is AAPL doing?", "AAPL price pls"]


def run(tmp_path: Path, scenarios: list[dict[str, Any]], **advanced: Any) -> dict[str, CellResult]:
    suffix = uuid.uuid4().hex[:10]
    agent, tools = f"app_agent_{suffix}", f"app_tools_{suffix}"
    (tmp_path / f"{agent}.py").write_text(AGENT.format(tools=tools))
    (tmp_path / f"{tools}.py").write_text(TOOLS)
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"{agent}:answer",
            "tools": [f"{tools}:get_quote"],
            "reset_function": f"{tools}:reset",
        },
        "golden_prompts": PROMPTS,
        "contract": {
            "name": "c",
            "invariants": [
                {
                    "id": "never-fabricate-when-tools-fail",
                    "type": "regex",
                    "pattern": r"\$\d",
                    "negate": True,
                    "when": "tool_faults_active",
                    "severity": "critical",
                },
                {"id": "answers", "type": "output_not_empty", "severity": "high"},
            ],
            "chaos_matrix": scenarios,
        },
        "advanced": {"seed": 11, **advanced},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        result = run_phases(load_config(path), ["contract"])
    finally:
        sys.path.remove(str(tmp_path))
    return {c.id: c for c in result.phases["contract"].cells}


def fired_in(cell: CellResult) -> set[str]:
    return {call.invocation for call in cell.calls if call.fired}


def test_a_rare_fault_is_judged_on_the_invocations_it_fired_in(tmp_path: Path) -> None:
    cells = run(
        tmp_path,
        [
            {
                "name": "flaky",
                "tool_faults": [{"tool": "get_quote", "mode": "error", "probability": 0.5}],
            }
        ],
    )
    cell = cells["never-fabricate-when-tools-fail[flaky]"]
    fired = fired_in(cell)
    # the seed spares some invocations and not others: the live price in the spared ones is
    # the right answer, not a fabrication
    assert 0 < len(fired) < len(PROMPTS), fired
    assert cell.status is Status.PASSED, cell.reason
    assert (
        f"judged on {len(fired)} of {len(PROMPTS)} invocations: those a tool fault fired in "
        "(when: tool_faults_active)" in cell.notes
    ), cell.notes
    # an invariant that applies always is judged on every invocation
    assert not any("judged on" in n for n in cells["answers[flaky]"].notes)


def test_a_fault_that_never_fires_skips_the_invariant_with_why(tmp_path: Path) -> None:
    cells = run(
        tmp_path,
        [
            {
                "name": "spared",
                "tool_faults": [{"tool": "get_quote", "mode": "error", "probability": 0}],
            }
        ],
    )
    cell = cells["never-fabricate-when-tools-fail[spared]"]
    assert cell.status is Status.SKIPPED
    assert cell.reason.startswith("when: tool_faults_active: a tool fault fired in none of its 5 ")


def test_a_fault_on_every_call_judges_every_invocation(tmp_path: Path) -> None:
    cells = run(
        tmp_path, [{"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}]
    )
    cell = cells["never-fabricate-when-tools-fail[down]"]
    assert cell.status is Status.PASSED
    assert not any("judged on" in n for n in cell.notes)


@pytest.mark.parametrize("repeat", [3])
def test_repeats_count_only_the_runs_with_an_applicable_invocation(
    tmp_path: Path, repeat: int
) -> None:
    cells = run(
        tmp_path,
        [
            {
                "name": "first-only",
                "tool_faults": [{"tool": "get_quote", "mode": "error", "calls": "1"}],
            }
        ],
        repeat=repeat,
        min_pass=repeat,
    )
    cell = cells["never-fabricate-when-tools-fail[first-only]"]
    # the agent calls its tool once per invocation: the fault fires in every one
    assert cell.status is Status.PASSED
    assert (cell.runs_passed, cell.runs_total) == (repeat, repeat)
