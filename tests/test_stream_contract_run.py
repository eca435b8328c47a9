"""`flakestorm contract run` end to end against an agent that streams its replies
(``agent.stream``, SPEC §16): the real CLI, a real streaming server on loopback paced per
scenario, and each cell's verdict worked out by hand from the pace.

The agent's pace is its config (tests/support/stream_agent.py): in ``slow-first-token`` its
first content comes 900 ms after its role-only first chunk, in ``stall-after-3`` it is silent
900 ms after its third content event, in ``cut-after-3`` it closes after three content events
without ``[DONE]``; otherwise 10 ms between events. The invariants' limits are 400 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_each_cell_judges_how_the_reply_streamed(tmp_path: Path) -> None:
    with StreamAgent(PACES) as agent:
        path = tmp_path / "flakestorm.yaml"
        path.write_text(json.dumps(config(agent.url)))
        proc = subprocess.run(
            [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", **PYTHONPATH},
            timeout=240,
        )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Verdict: FAIL" in output, output  # critical cells failed
    results = json.loads((tmp_path / "flakestorm-reports" / "results.json").read_text())
    cells = {(c["invariant_id"], c["scenario"]): c for c in results["phases"]["contract"]["cells"]}
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
