"""A python agent that streams its reply (SPEC §16): its endpoint an async generator relaying
its LLM's stream, read through the OpenAI SDK (``agent.llm`` wraps ``AsyncCompletions.create``),
under a first token 3 s late (``slow_stream``), a 3 s stall after 3 chunks (``timeout`` with
``after_chunks``) and a cut after 3 chunks (``cut_stream``), in two styles, each verdict worked
out by hand. The run is the engine's, in process, as for every python agent.

For a python agent the stream's terminal event is its generator's end: a generator that
raises mid-answer has broken off (``stream_completes`` fails), one that returns has finished —
even when what it relayed was cut short, which only the text invariant then sees.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.server import LoopbackServer
from support.tool_provider import tool_provider

from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config

AGENT = """
import asyncio

import openai

NOTE = " (the answer was cut short)"


async def patient(prompt):
    # relays its LLM's stream as long as it takes; an error from it ends the generator
    async with openai.AsyncOpenAI(base_url={url!r}, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="gpt-test", messages=[{{"role": "user", "content": prompt}}], stream=True
        )
        async with stream:
            async for event in stream:
                if event.choices:
                    yield event.choices[0].delta.content or ""


async def impatient(prompt):
    # gives up on its LLM after 1 s of silence; whenever the LLM's stream did not finish
    # (silence, an error, no finish_reason), it adds a note and ends its own stream properly
    async with openai.AsyncOpenAI(base_url={url!r}, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="gpt-test", messages=[{{"role": "user", "content": prompt}}], stream=True
        )
        finished = False
        async with stream:
            events = stream.__aiter__()
            while True:
                try:
                    event = await asyncio.wait_for(events.__anext__(), 1.0)
                except StopAsyncIteration:
                    break
                except (asyncio.TimeoutError, openai.APIError):
                    break
                if event.choices:
                    finished = finished or event.choices[0].finish_reason is not None
                    yield event.choices[0].delta.content or ""
        if not finished:
            yield NOTE
"""

FAULTS = {
    "calm": [],
    "slow-first-token": [{"mode": "slow_stream", "first_token_ms": 3000}],
    "stall-after-3": [{"mode": "timeout", "after_chunks": 3, "delay_ms": 3000}],
    "cut-after-3": [{"mode": "cut_stream", "after_chunks": 3}],
}
EXPECTED = {
    # (style, invariant): verdicts under (calm, slow-first-token, stall-after-3, cut-after-3)
    #
    # patient: its first content comes 3 s late under the slow first token (> 2 s); under the
    # stall it relays 3 chunks, waits the 3 s hold (> 2 s), and the SDK's connection error
    # breaks its generator off; under the cut the SDK's stream just ends, so the generator
    # returns (its stream completes) with 3 of the 13 words.
    ("patient", "first-token"): ("passed", "failed", "passed", "passed"),
    ("patient", "no-stall"): ("passed", "passed", "failed", "passed"),
    ("patient", "finishes"): ("passed", "passed", "failed", "passed"),
    ("patient", "whole-answer"): ("passed", "passed", "failed", "failed"),
    # impatient: its note comes after 1 s of silence (first content under the slow first
    # token, longest silence under the stall), and it always ends its own stream; only the
    # calm answer is whole.
    ("impatient", "first-token"): ("passed", "passed", "passed", "passed"),
    ("impatient", "no-stall"): ("passed", "passed", "passed", "passed"),
    ("impatient", "finishes"): ("passed", "passed", "passed", "passed"),
    ("impatient", "whole-answer"): ("passed", "failed", "failed", "failed"),
}
INVARIANTS = [
    {"id": "first-token", "type": "ttft", "max_ms": 2000, "severity": "critical"},
    {"id": "no-stall", "type": "max_stall", "max_ms": 2000, "severity": "critical"},
    {"id": "finishes", "type": "stream_completes", "severity": "critical"},
    {"id": "whole-answer", "type": "contains", "value": "from the west"},
]


@pytest.fixture(scope="module")
def llm() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as server:
        yield server


def run(tmp_path: Path, url: str, style: str) -> dict[tuple[str, str], tuple[str, str]]:
    folder = tmp_path / style
    folder.mkdir()
    module = f"stream_agent_{uuid.uuid4().hex[:10]}"
    (folder / f"{module}.py").write_text(AGENT.format(url=url))
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"{module}:{style}",
            "llm": "openai.resources.chat.completions:AsyncCompletions.create",
            "timeout": 10_000,
        },
        "golden_prompts": ["What is the weather in Paris?"],
        "contract": {
            "name": "streaming",
            "invariants": INVARIANTS,
            "chaos_matrix": [{"name": n, "llm_faults": f} for n, f in FAULTS.items()],
        },
        "output": {"dir": str(folder / "reports")},
    }
    path = folder / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    cells = result.phases["contract"].cells
    return {(c.invariant_id, c.scenario): (c.status.value, c.reason) for c in cells}


@pytest.mark.parametrize("style", ["patient", "impatient"])
def test_a_python_agent_streaming_its_llm_reply_under_stream_faults(
    tmp_path: Path, llm: LoopbackServer, style: str
) -> None:
    cells = run(tmp_path, llm.url_for("/v1"), style)
    got = {
        (style, invariant): tuple(cells[(invariant, name)][0] for name in FAULTS)
        for invariant in ("first-token", "no-stall", "finishes", "whole-answer")
    }
    assert got == {key: value for key, value in EXPECTED.items() if key[0] == style}, cells
    if style == "patient":
        broken = cells[("finishes", "stall-after-3")][1]
        assert broken == (
            "prompt 1/1: broken off (the generator raised) after 3 content events without "
            "the generator's end"
        )
        stall = cells[("no-stall", "stall-after-3")][1]
        assert stall.endswith(" s after chunk 3 (the last) > 2000 ms")
