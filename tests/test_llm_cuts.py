"""``cut_stream`` (SPEC §16): an LLM stream relayed for ``after_chunks`` content chunks, then
ended with no finish reason, no usage and no terminal event — on the stream editor alone, and
through the chaos proxy, read back with flakestorm's own stream reader as an agent would."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from support.fake_provider import ASK, fake_provider
from support.server import LoopbackServer

from flakestorm.agents.stream import StreamReader
from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.llm import Provider, fault_on_stream
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import AgentStream, LlmFault, StreamFormat
from flakestorm.results.stream_timing import Ending


def cut(after: int) -> LlmFault:
    return LlmFault.model_validate({"mode": "cut_stream", "after_chunks": after})


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


OPENAI = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "One"}) + chunk({"content": " two"}),  # two frames in one read
    chunk({"content": " three"}),
    chunk({}, finish="stop"),
    b'data: {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {}}\n\n',
    b"data: [DONE]\n\n",
]


def read(frames: list[bytes], fmt: str = "openai") -> tuple[str, Any]:
    reader = StreamReader(AgentStream(format=StreamFormat(fmt)))
    for frame in frames:
        reader.feed(frame, 1.0)
    return reader.text, reader.finish(Ending.CLOSED, 2.0)


def test_an_openai_stream_is_cut_after_two_content_chunks() -> None:
    out = list(fault_on_stream(cut(2), Provider.OPENAI, OPENAI, random.Random(1)))
    text, timing = read(out)
    assert text == "One two" and timing.content_events == 2
    assert not timing.completed
    body = b"".join(out)
    assert b'finish_reason": "stop' not in body and b"usage" not in body and b"[DONE]" not in body


def test_cut_after_zero_sends_only_what_comes_before_the_first_content() -> None:
    out = list(fault_on_stream(cut(0), Provider.OPENAI, OPENAI, random.Random(1)))
    text, timing = read(out)
    assert text == "" and timing.content_events == 0 and len(out) == 1  # the role-only chunk


def test_more_chunks_than_the_stream_has_cut_nothing() -> None:
    out = list(fault_on_stream(cut(10), Provider.OPENAI, OPENAI, random.Random(1)))
    text, timing = read(out)
    assert text == "One two three" and timing.completed


def anthropic_event(doc: dict[str, Any]) -> bytes:
    return f"event: {doc['type']}\ndata: {json.dumps(doc)}\n\n".encode()


def test_an_anthropic_stream_is_cut_without_message_stop() -> None:
    def delta(text: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }

    events = [
        {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        delta("Bon"),
        {"type": "ping"},
        delta("jour"),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    chunks = [anthropic_event(e) for e in events]
    out = list(fault_on_stream(cut(1), Provider.ANTHROPIC, chunks, random.Random(1)))
    text, timing = read(out, "anthropic")
    assert text == "Bon" and timing.content_events == 1 and not timing.completed
    assert b"stop_reason" not in b"".join(out)


@pytest.fixture
def proxy() -> Iterator[ChaosProxy]:
    with (
        LoopbackServer(fake_provider) as provider,
        ChaosProxy(llm_upstream=provider.url, upstream_timeout_s=5) as p,
    ):
        yield p


def test_through_the_proxy_the_agent_reads_three_chunks_and_no_done(proxy: ChaosProxy) -> None:
    proxy.activate(ActiveScenario("cut", 1, llm_faults=(cut(3),)))
    reply = requests.post(
        f"{proxy.url}/llm/openai/v1/chat/completions",
        json={"model": "gpt-test", "messages": ASK, "stream": True},
        timeout=5,
    )
    assert reply.status_code == 200
    text, timing = read([reply.content])
    assert timing.content_events == 3 and not timing.completed
    assert len(text.split()) == 3
    call = proxy.log.snapshot(wait_s=5)[-1]
    assert call.fired == ("llm_faults[0] cut_stream(after 3 chunks)",)


def test_a_reply_that_is_not_streamed_is_left_alone_and_logged_unapplied(
    proxy: ChaosProxy,
) -> None:
    proxy.activate(ActiveScenario("cut", 1, llm_faults=(cut(3),)))
    reply = requests.post(
        f"{proxy.url}/llm/openai/v1/chat/completions",
        json={"model": "gpt-test", "messages": ASK},
        timeout=5,
    )
    assert reply.json()["choices"][0]["finish_reason"] == "stop"
    call = proxy.log.snapshot(wait_s=5)[-1]
    assert call.fired == ()
    assert call.unapplied == (
        (
            "llm_faults[0] cut_stream(after 3 chunks)",
            "cut_stream acts on a streamed reply, and this one was not streamed",
        ),
    )
