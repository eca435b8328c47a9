"""`flakestorm contract run` end to end against an agent that streams its replies
(``agent.stream``, SPEC §16): the real CLI, a real streaming server on loopback paced per
scenario, and each cell's verdict worked out by hand from the pace.

The agent's pace is its config (tests/support/stream_agent.py): in ``slow-first-token`` its
first content comes 900 ms after its role-only first chunk, in ``stall-after-3`` it is silent
900 ms after its third content event, in ``cut-after-3`` it closes after three content events
without ``[DONE]``; otherwise 10 ms between events. The invariants' limits are 400 ms.

Then two styles of the same agent relay their LLM's stream through the chaos proxy under
``cut_stream``: one passes the cut on, one finishes its own stream properly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from support.cli_run import contract_run
from support.server import free_port
from support.stream_agent import Pace, StreamAgent

PYTHONPATH = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}

PACES = {
    "": Pace(),
    "steady": Pace(),
    "slow-first-token": Pace(first_ms=900),
    "stall-after-3": Pace(stall_after=3, stall_ms=900),
    "cut-after-3": Pace(stop_after=3, end="close"),
}

EXPECTED = {
    # invariant: (steady, slow-first-token, stall-after-3, cut-after-3)
    "first-token": ("passed", "failed", "passed", "passed"),
    "no-stall": ("passed", "passed", "failed", "passed"),
    "finishes": ("passed", "passed", "passed", "failed"),
    "names-paris": ("passed", "passed", "passed", "failed"),
}
SCENARIOS = ("steady", "slow-first-token", "stall-after-3", "cut-after-3")


def config(url: str) -> dict[str, Any]:
    return {
        "agent": {"endpoint": url, "timeout": 10_000, "stream": {"format": "openai"}},
        "golden_prompts": ["What is the capital of France?"],
        "contract": {
            "name": "Streaming",
            "invariants": [
                {"id": "first-token", "type": "ttft", "max_ms": 400, "severity": "critical"},
                {"id": "no-stall", "type": "max_stall", "max_ms": 400, "severity": "critical"},
                {"id": "finishes", "type": "stream_completes", "severity": "critical"},
                {"id": "names-paris", "type": "contains", "value": "Paris"},
            ],
            "chaos_matrix": [{"name": name} for name in SCENARIOS],
        },
    }


def run(tmp_path: Path, doc: dict[str, Any]) -> tuple[int, str, dict[tuple[str, str], Any]]:
    """``flakestorm contract run`` on ``doc``: its exit code, its output, its cells."""
    code, output, results = contract_run(tmp_path, doc)
    found = results["phases"]["contract"]["cells"]
    return (
        code,
        output,
        {(c["invariant_id"], c["scenario"]): c for c in found},
    )


def test_each_cell_judges_how_the_reply_streamed(tmp_path: Path) -> None:
    with StreamAgent(PACES) as agent:
        code, output, cells = run(tmp_path, config(agent.url))
    assert code == 1 and "Verdict: FAIL" in output, output  # critical cells failed
    got = {
        inv: tuple(cells[(inv, scenario)]["status"] for scenario in SCENARIOS) for inv in EXPECTED
    }
    assert got == EXPECTED, output
    slow = cells[("first-token", "slow-first-token")]["reason"]
    assert "first content after" in slow and "(first byte at" in slow and "> 400 ms" in slow
    stall = cells[("no-stall", "stall-after-3")]["reason"]
    assert "silent for" in stall and "after chunk 3 > 400 ms" in stall
    cut = cells[("finishes", "cut-after-3")]["reason"]
    assert "closed after 3 content events without [DONE]" in cut


def test_an_llm_stream_cut_after_3_chunks_fails_only_the_agent_that_relays_the_cut(
    tmp_path: Path,
) -> None:
    """Two styles of agent relay their LLM's stream through the chaos proxy (the mock LLM):
    one closes without [DONE] when its LLM's stream did, one sends [DONE] itself. Under
    ``cut_stream`` after 3 chunks both relay 3 content events; only the first fails
    ``stream_completes``."""
    port = free_port()
    relay = f"http://127.0.0.1:{port}/llm/openai/v1"
    closes, finishes = Pace(relay=relay), Pace(relay=relay, finish_cut=True)
    paces = {
        "": closes,
        "closes-calm": closes,
        "closes-cut": closes,
        "finishes-calm": finishes,
        "finishes-cut": finishes,
    }
    cut = [{"mode": "cut_stream", "after_chunks": 3}]
    matrix = [
        {"name": "closes-calm"},
        {"name": "closes-cut", "llm_faults": cut},
        {"name": "finishes-calm"},
        {"name": "finishes-cut", "llm_faults": cut},
    ]
    with StreamAgent(paces) as agent:
        doc = {
            "agent": {"endpoint": agent.url, "timeout": 10_000, "stream": {"format": "openai"}},
            "golden_prompts": ["What is the capital of France?"],
            "contract": {
                "name": "Relaying",
                "invariants": [
                    {"id": "finishes", "type": "stream_completes", "severity": "critical"},
                    {"id": "answers", "type": "output_not_empty"},
                ],
                "chaos_matrix": matrix,
            },
            "proxy": {"llm_upstream": "mock", "port": port},
        }
        code, output, cells = run(tmp_path, doc)
    assert code == 1 and "Verdict: FAIL" in output, output
    got = {key: cell["status"] for key, cell in cells.items()}
    assert got == {
        ("finishes", "closes-calm"): "passed",
        ("finishes", "closes-cut"): "failed",
        ("finishes", "finishes-calm"): "passed",
        ("finishes", "finishes-cut"): "passed",
        ("answers", "closes-calm"): "passed",
        ("answers", "closes-cut"): "passed",
        ("answers", "finishes-calm"): "passed",
        ("answers", "finishes-cut"): "passed",
    }, output
    assert cells[("finishes", "closes-cut")]["reason"].endswith(
        "closed after 3 content events without [DONE]"
    )
