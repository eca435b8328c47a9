"""`flakestorm contract run` end to end against agents that stream in the two shapes besides
OpenAI's (``agent.stream``, SPEC §16): Anthropic events, and generic SSE read with ``path`` and
``done``. The real CLI; each agent a real server on loopback relaying its LLM's stream (the
fake OpenAI + Anthropic API of ``support/fake_provider.py``) through the chaos proxy
(``support/stream_formats_agent.py``), calm and under ``cut_stream`` after 3 chunks.

The fake LLM answers :data:`TEXT`, 16 words, one content delta each (after a role-only chunk,
or Anthropic's ``message_start`` and an empty ``content_block_start``). Each agent relays the
deltas as they come, one content event each, and finishes its own stream only once its LLM's
stream finished. So, worked out by hand:

- calm: 16 content events, then the agent's terminal event; the text is the whole answer;
- cut: the proxy relays the LLM's first 3 content deltas (``The``, `` weather``, `` in``) and
  closes, the agent relays them and closes without its terminal event: 3 content events, the
  text ``The weather in``.

Neither scenario delays anything, so the first content and every gap are far under the 2 s
limits: ``ttft`` and ``max_stall`` pass in both; ``stream_completes`` and the text invariant
(the answer's last words) pass calm and fail cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cli_run import contract_run
from support.fake_provider import TEXT, fake_provider
from support.server import LoopbackServer, free_port
from support.stream_formats_agent import anthropic_agent, sse_agent

PROMPT = "What is the weather in Paris?"
END_OF_ANSWER = "light breeze from the west"
"""The last words of the LLM's answer: only a whole answer holds them."""
assert TEXT.endswith(END_OF_ANSWER) and len(TEXT.split(" ")) == 16

SHAPES = {
    # shape: (its agent, agent.stream, the terminal event as a reason names it)
    "anthropic": (anthropic_agent, {"format": "anthropic"}, "message_stop"),
    "sse": (sse_agent, {"format": "sse", "path": "text", "done": "type=end"}, "type=end"),
}

EXPECTED = {
    # (invariant, scenario): status
    ("first-token", "calm"): "passed",
    ("first-token", "cut"): "passed",
    ("no-stall", "calm"): "passed",
    ("no-stall", "cut"): "passed",
    ("finishes", "calm"): "passed",
    ("finishes", "cut"): "failed",
    ("whole-answer", "calm"): "passed",
    ("whole-answer", "cut"): "failed",
}


def config(agent_url: str, stream: dict[str, str], llm_url: str, port: int) -> dict[str, Any]:
    return {
        "agent": {"endpoint": agent_url, "timeout": 10_000, "stream": stream},
        "golden_prompts": [PROMPT],
        "contract": {
            "name": "Shapes",
            "invariants": [
                {"id": "first-token", "type": "ttft", "max_ms": 2000},
                {"id": "no-stall", "type": "max_stall", "max_ms": 2000},
                {"id": "finishes", "type": "stream_completes", "severity": "critical"},
                {"id": "whole-answer", "type": "contains", "value": END_OF_ANSWER},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {"name": "cut", "llm_faults": [{"mode": "cut_stream", "after_chunks": 3}]},
            ],
        },
        "proxy": {"llm_upstream": llm_url, "port": port},
    }


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_agent_streaming_its_own_shape_relays_a_cut_llm_stream(
    tmp_path: Path, shape: str
) -> None:
    make_agent, stream, terminal = SHAPES[shape]
    port = free_port()
    with (
        LoopbackServer(fake_provider) as llm,
        LoopbackServer(make_agent(f"http://127.0.0.1:{port}")) as agent,
    ):
        doc = config(agent.url_for("/chat"), stream, llm.url, port)
        code, output, results = contract_run(tmp_path, doc)
        asked = llm.requests
    assert code == 1 and "Verdict: FAIL" in output, output  # a critical cell failed
    cells = {(c["invariant_id"], c["scenario"]): c for c in results["phases"]["contract"]["cells"]}
    assert {key: cell["status"] for key, cell in cells.items()} == EXPECTED, output

    # the agent's LLM was asked once per invocation: the two chaos-free ones of the stateful
    # check (the agent takes no session; they also learn that it forwards the cell header),
    # then one for each of the 4 invariants' cells per scenario
    assert len(asked) == results["invocations"] == 2 + 4 * 2
    assert all(r.json()["stream"] is True for r in asked)

    # what each cell's reply was, read as the stream it is
    for (_, scenario), cell in cells.items():
        (reply,) = cell["prompts"]
        if scenario == "calm":
            assert (reply["output"], reply["stream"]["ending"]) == (TEXT, "done")
            assert reply["stream"]["content_events"] == 16
            assert cell["faults_fired"] == []
        else:
            assert (reply["output"], reply["stream"]["ending"]) == ("The weather in", "closed")
            assert reply["stream"]["content_events"] == 3
            assert [f.split("(")[0] for f in cell["faults_fired"]] == ["llm_faults[0] cut_stream"]
    assert cells[("finishes", "calm")]["reason"] == f"ended with {terminal} after 16 content events"
    assert cells[("finishes", "cut")]["reason"] == (
        f"prompt 1/1: closed after 3 content events without {terminal}"
    )
    assert cells[("whole-answer", "cut")]["reason"] == (
        f"prompt 1/1: does not contain `{END_OF_ANSWER}`: `The weather in`"
    )
