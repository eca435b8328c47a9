"""A python agent's LLM calls through the real OpenAI and Anthropic SDKs, wrapped: each call's
interaction carries what the reply billed — a whole reply's usage object, a stream's usage as
the SDK's bytes pass (what the agent reads unchanged), the upstream's under a fault, and
unknown for a stream the agent stops reading before its usage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from support.framework_rig import ANTHROPIC, OPENAI, OPENAI_ASYNC, llm_fault, wrapped
from support.server import LoopbackServer, Request, Response

from flakestorm.results.usage import Counted, Usage

ASK: Any = [{"role": "user", "content": "Price of AAPL?"}]
WHOLE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
    ],
    "usage": {
        "prompt_tokens": 130,
        "completion_tokens": 9,
        "total_tokens": 139,
        "prompt_tokens_details": {"cached_tokens": 64},
    },
}


def _chunk(
    delta: dict[str, Any], usage: dict[str, Any] | None = None, finish: str | None = None
) -> bytes:
    doc: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        doc["usage"] = usage
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


STREAM = (
    _chunk({"role": "assistant", "content": "The price "})
    + _chunk({"content": "is 42."}, finish="stop")
    + _chunk({}, usage={"prompt_tokens": 77, "completion_tokens": 5, "total_tokens": 82})
    + b"data: [DONE]\n\n"
)
# split at awkward places: inside a frame, inside "data:", between "\n" and "\n"
PIECES = [STREAM[:7], STREAM[7:150], STREAM[150:-20], STREAM[-20:-1], STREAM[-1:]]

ANTHROPIC_WHOLE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-haiku-20241022",
    "content": [{"type": "text", "text": "42"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "output_tokens": 3,
        "cache_read_input_tokens": 200,
        "cache_creation_input_tokens": 50,
    },
}


def provider(request: Request) -> Response:
    if request.path.endswith("/messages"):
        return Response.json(ANTHROPIC_WHOLE)
    if request.json().get("stream"):
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=PIECES)
    return Response.json(WHOLE)


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(provider) as s:
        yield s


@pytest.fixture
def client(server: LoopbackServer) -> Iterator[Any]:
    with openai.OpenAI(base_url=server.url_for("/v1"), api_key="k", max_retries=0) as c:
        yield c


def _read(stream: Any) -> str:
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def test_a_whole_replys_usage(client: Any) -> None:
    with wrapped(llm=OPENAI) as rig:
        client.chat.completions.create(model="gpt-4o", messages=ASK)
        [call] = rig.interactions()
    assert call.usage == Usage(input=66, output=9, cache_read=64, model="gpt-4o-2024-08-06")


def test_an_anthropic_message_keeps_cache_reads_and_writes_apart(server: LoopbackServer) -> None:
    with (
        anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as c,
        wrapped(llm=ANTHROPIC) as rig,
    ):
        c.messages.create(model="claude-haiku-4-5", max_tokens=9, messages=ASK)
        [call] = rig.interactions()
    assert call.usage == Usage(
        input=10, output=3, cache_read=200, cache_write=50, model="claude-3-5-haiku-20241022"
    )


def test_a_stream_is_metered_as_the_agent_reads_it_unchanged(client: Any) -> None:
    ask: dict[str, Any] = {"model": "gpt-4o", "messages": ASK, "stream": True}
    ask["stream_options"] = {"include_usage": True}
    unwrapped = _read(client.chat.completions.create(**ask))
    with wrapped(llm=OPENAI) as rig:
        stream = client.chat.completions.create(**ask)
        assert isinstance(stream, openai.Stream)
        assert _read(stream) == unwrapped == "The price is 42."
        [call] = rig.interactions()
    assert call.usage == Usage(input=77, output=5, model="gpt-4o-mini")


def test_a_faulted_stream_bills_what_the_upstream_sent(client: Any) -> None:
    with wrapped(llm=OPENAI) as rig:
        rig.activate(llm_fault("empty"))
        stream = client.chat.completions.create(model="gpt-4o", messages=ASK, stream=True)
        assert _read(stream) == ""
        [call] = rig.interactions()
    assert call.fired == ("llm_faults[0] empty",)
    assert call.usage == Usage(input=77, output=5, model="gpt-4o-mini")


def test_a_stream_the_agent_leaves_before_its_usage_is_unknown(client: Any) -> None:
    with wrapped(llm=OPENAI) as rig:
        stream = client.chat.completions.create(model="gpt-4o", messages=ASK, stream=True)
        next(iter(stream))
        stream.close()
        [call] = rig.interactions()
    assert call.usage == Usage(model="gpt-4o-mini", counted=Counted.UNKNOWN)


def test_an_async_stream_is_metered(server: LoopbackServer) -> None:
    async def run() -> str:
        c: Any
        async with openai.AsyncOpenAI(
            base_url=server.url_for("/v1"), api_key="k", max_retries=0
        ) as c:
            stream = await c.chat.completions.create(model="gpt-4o", messages=ASK, stream=True)
            return "".join([x.choices[0].delta.content or "" async for x in stream if x.choices])

    with wrapped(llm=OPENAI_ASYNC) as rig:
        assert asyncio.run(run()) == "The price is 42."
        [call] = rig.interactions()
    assert call.usage == Usage(input=77, output=5, model="gpt-4o-mini")
