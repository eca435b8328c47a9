"""`flakestorm contract run` end to end against an agent that streams its replies
(``agent.stream``, SPEC §16): the real CLI, a real streaming server on loopback paced per
scenario, and each cell's verdict worked out by hand from the pace.

The agent's pace is its config (tests/support/stream_agent.py): in ``slow-first-token`` its
first content comes 900 ms after its role-only first chunk, in ``stall-after-3`` it is silent
900 ms after its third content event, in ``cut-after-3`` it closes after three content events
without ``[DONE]``; otherwise 10 ms between events. The invariants' limits are 400 ms.

Then two styles of an agent relay their LLM's stream through the chaos proxy under a slow first
token, a stall after 3 chunks and a cut after 3 chunks: one waits as long as it takes and
passes an unfinished stream on, one gives up after a second of silence and finishes its own
stream properly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
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


RELAY_FAULTS: dict[str, list[dict[str, Any]]] = {
    "calm": [],
    "slow-first-token": [{"mode": "slow_stream", "first_token_ms": 3000}],
    "stall-after-3": [{"mode": "timeout", "after_chunks": 3, "delay_ms": 3000}],
    "cut-after-3": [{"mode": "cut_stream", "after_chunks": 3}],
}
RELAYED = {
    # (style, invariant): verdicts under (calm, slow-first-token, stall-after-3, cut-after-3)
    #
    # patient: waits for its LLM as long as it takes and relays what comes; when its LLM's
    # stream ends without [DONE] (cut, or dropped after the 3 s hold) it closes without one.
    # Its first content comes 3 s late under the slow first token (> 2 s), and it is silent
    # 3 s after chunk 3 under the stall (> 2 s).
    ("patient", "first-token"): ("passed", "failed", "passed", "passed"),
    ("patient", "no-stall"): ("passed", "passed", "failed", "passed"),
    ("patient", "finishes"): ("passed", "passed", "failed", "failed"),
    ("patient", "whole-answer"): ("passed", "passed", "failed", "failed"),
    # impatient: gives up on its LLM after 1 s of silence, and whenever its LLM's stream did
    # not finish it adds a note and sends [DONE] itself: its first content (the note) comes
    # after about 1 s under the slow first token, its longest silence is about 1 s under the
    # stall, and it always finishes — but only the calm answer is whole.
    ("impatient", "first-token"): ("passed", "passed", "passed", "passed"),
    ("impatient", "no-stall"): ("passed", "passed", "passed", "passed"),
    ("impatient", "finishes"): ("passed", "passed", "passed", "passed"),
    ("impatient", "whole-answer"): ("passed", "failed", "failed", "failed"),
}


def test_an_agent_relaying_its_llm_stream_under_slow_stall_and_cut_faults(tmp_path: Path) -> None:
    """Two styles of an agent relay their LLM's stream (the mock LLM through the chaos proxy;
    a role-only chunk first) under a first token 3 s late, a 3 s stall after 3 chunks and a
    cut after 3 chunks; the invariants' limits are 2 s. Each verdict is worked out above."""
    port = free_port()
    relay = f"http://127.0.0.1:{port}"
    styles = {
        "patient": Pace(relay=relay),
        "impatient": Pace(relay=relay, finish_cut=True, patience_ms=1000),
    }
    paces = {"": styles["patient"]}
    matrix = []
    for style, pace in styles.items():
        for name, faults in RELAY_FAULTS.items():
            paces[f"{style}-{name}"] = pace
            matrix.append({"name": f"{style}-{name}", "llm_faults": faults})
    with StreamAgent(paces) as agent:
        doc = {
            "agent": {"endpoint": agent.url, "timeout": 10_000, "stream": {"format": "openai"}},
            "golden_prompts": ["What is the capital of France?"],
            "contract": {
                "name": "Relaying",
                "invariants": [
                    {"id": "first-token", "type": "ttft", "max_ms": 2000, "severity": "critical"},
                    {"id": "no-stall", "type": "max_stall", "max_ms": 2000, "severity": "critical"},
                    {"id": "finishes", "type": "stream_completes", "severity": "critical"},
                    {"id": "whole-answer", "type": "contains", "value": "no live data"},
                ],
                "chaos_matrix": matrix,
            },
            "proxy": {"llm_upstream": "mock", "port": port},
        }
        code, output, cells = run(tmp_path, doc)
    assert code == 1 and "Verdict: FAIL" in output, output
    got = {
        (style, invariant): tuple(
            cells[(invariant, f"{style}-{name}")]["status"] for name in RELAY_FAULTS
        )
        for style, invariant in RELAYED
    }
    assert got == RELAYED, output
    reasons = {key: cell["reason"] for key, cell in cells.items()}
    assert reasons[("finishes", "patient-cut-after-3")].endswith(
        "closed after 3 content events without [DONE]"
    )
    stall = reasons[("no-stall", "patient-stall-after-3")]
    assert stall.startswith("prompt 1/1: silent for ")
    assert stall.endswith(" s after chunk 3 (the last) > 2000 ms")
    assert "> 2000 ms" in reasons[("first-token", "patient-slow-first-token")]


def test_a_sweep_over_first_token_ms_finds_where_the_first_token_breaks(tmp_path: Path) -> None:
    """The patient relay under ``slow_stream`` swept over 50, 150, 1000 and 2000 ms, with a
    600 ms ``ttft``: its first content comes just after the wait, so the invariant holds at 50
    and 150 and fails from 1000 on — the breaking point; its stream always completes."""
    port = free_port()
    relay = Pace(relay=f"http://127.0.0.1:{port}")
    with StreamAgent({"": relay}) as agent:
        doc = {
            "agent": {"endpoint": agent.url, "timeout": 10_000, "stream": {"format": "openai"}},
            "golden_prompts": ["What is the capital of France?"],
            "contract": {
                "name": "Sweeping",
                "invariants": [
                    {"id": "first-token", "type": "ttft", "max_ms": 600, "severity": "critical"},
                    {"id": "finishes", "type": "stream_completes"},
                ],
                "chaos_matrix": [
                    {
                        "name": "slow",
                        "llm_faults": [{"mode": "slow_stream", "first_token_ms": 50}],
                        "sweep": {
                            "field": "llm_faults[0].first_token_ms",
                            "values": [50, 150, 1000, 2000],
                        },
                    }
                ],
            },
            "proxy": {"llm_upstream": "mock", "port": port},
        }
        code, output, results = contract_run(tmp_path, doc)
    assert code == 1, output
    [sweep] = results["phases"]["contract"]["sweeps"]
    assert sweep["scenarios"] == ["slow[50]", "slow[150]", "slow[1000]", "slow[2000]"]
    breaking = {b["invariant"]: (b["value"], b["text"], b["marks"]) for b in sweep["breaking"]}
    assert breaking == {
        "first-token": ("1000", "breaks at 1000", ["passed", "passed", "failed", "failed"]),
        "finishes": (None, "holds over the whole range", ["passed"] * 4),
    }


SHAPES = {
    # shape: (agent.stream, the terminal event a cut stream lacks)
    "anthropic": ({"format": "anthropic"}, "message_stop"),
    "sse": ({"format": "sse", "path": "token", "done": "end"}, "end"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_anthropic_and_a_generic_sse_agent_relaying_a_cut_llm_stream(
    tmp_path: Path, shape: str
) -> None:
    """An agent that answers Anthropic events (its LLM's, relayed as they are), and one that
    answers generic SSE (``data: {"token": ...}``, ``event: end`` once its LLM's stream
    finished), each relaying its LLM's stream through the proxy: calm, every invariant holds;
    under a cut after 3 chunks the agent closes without its terminal event, with 3 content
    events relayed, and its answer is not whole."""
    port = free_port()
    stream, terminal = SHAPES[shape]
    relay = Pace(relay=f"http://127.0.0.1:{port}", shape=shape)
    with StreamAgent({"": relay}) as agent:
        doc = {
            "agent": {"endpoint": agent.url, "timeout": 10_000, "stream": stream},
            "golden_prompts": ["What is the capital of France?"],
            "contract": {
                "name": "Shapes",
                "invariants": [
                    {"id": "first-token", "type": "ttft", "max_ms": 2000},
                    {"id": "finishes", "type": "stream_completes", "severity": "critical"},
                    {"id": "whole-answer", "type": "contains", "value": "no live data"},
                ],
                "chaos_matrix": [
                    {"name": "calm"},
                    {"name": "cut", "llm_faults": [{"mode": "cut_stream", "after_chunks": 3}]},
                ],
            },
            "proxy": {"llm_upstream": "mock", "port": port},
        }
        code, output, cells = run(tmp_path, doc)
    assert code == 1, output
    assert {key: cell["status"] for key, cell in cells.items()} == {
        ("first-token", "calm"): "passed",
        ("first-token", "cut"): "passed",
        ("finishes", "calm"): "passed",
        ("finishes", "cut"): "failed",
        ("whole-answer", "calm"): "passed",
        ("whole-answer", "cut"): "failed",
    }, output
    assert cells[("finishes", "cut")]["reason"] == (
        f"prompt 1/1: closed after 3 content events without {terminal}"
    )
    # the mock LLM's answer is 25 words, one content event each
    assert cells[("finishes", "calm")]["reason"] == f"ended with {terminal} after 25 content events"
