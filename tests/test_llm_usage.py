"""What an LLM reply billed, read from the wire (SPEC §15): each provider's usage, whole and
streamed (split at awkward places), a reply without usage estimated, a cut stream unknown; the
SDKs' response objects; and the config's prices."""

from __future__ import annotations

import json
from typing import Any

import openai.types.chat as chat
import pytest

from flakestorm.chaos.llm.protocol import Provider
from flakestorm.chaos.llm.usage import UsageMeter
from flakestorm.chaos.wrappers.sdk_usage import sdk_usage
from flakestorm.config import Price
from flakestorm.results.prices import pricer
from flakestorm.results.usage import Counted, Usage

ASK = json.dumps({"model": "gpt-asked", "messages": [{"role": "user", "content": "Hi there"}]})


def sse(*events: dict[str, Any], done: bool = True) -> bytes:
    frames = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    return b"".join(frames) + (b"data: [DONE]\n\n" if done else b"")


def metered(
    provider: Provider, body: bytes, streamed: bool, finished: bool = True, step: int = 7
) -> Usage:
    meter = UsageMeter(provider, ASK.encode(), streamed)
    for at in range(0, len(body), step):  # pieces that split frames and JSON anywhere
        meter.feed(body[at : at + step])
    return meter.usage(finished)


CHAT = {
    "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}}],
    "usage": {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "total_tokens": 1230,
        "prompt_tokens_details": {"cached_tokens": 1000},
    },
}


def test_openai_chat_usage_whole_and_streamed_with_cached_tokens_apart() -> None:
    expected = Usage(input=200, output=30, cache_read=1000, model="gpt-4o-2024-08-06")
    assert metered(Provider.OPENAI, json.dumps(CHAT).encode(), streamed=False) == expected
    chunks = sse(
        {"model": "gpt-4o-2024-08-06", "choices": [{"delta": {"role": "assistant"}}]},
        {"model": "gpt-4o-2024-08-06", "choices": [{"delta": {"content": "Hello"}}]},
        {"model": "gpt-4o-2024-08-06", "choices": [], "usage": CHAT["usage"]},
    )
    assert metered(Provider.OPENAI, chunks, streamed=True) == expected


def test_the_responses_api_streamed_reads_its_completed_event() -> None:
    completed = {
        "type": "response.completed",
        "response": {"model": "gpt-5", "usage": {"input_tokens": 50, "output_tokens": 9}},
    }
    body = sse({"type": "response.created"}, completed, done=False)
    assert metered(Provider.OPENAI, body, streamed=True) == Usage(50, 9, model="gpt-5")


def test_anthropic_streamed_usage_is_message_start_then_the_cumulative_delta() -> None:
    start = {
        "type": "message_start",
        "message": {
            "model": "claude-x",
            "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 300,
                      "cache_creation_input_tokens": 40},
        },
    }  # fmt: skip
    events: list[dict[str, Any]] = [
        start,
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 25}},
        {"type": "message_stop"},
    ]
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    assert metered(Provider.ANTHROPIC, body, streamed=True) == Usage(
        input=12, output=25, cache_read=300, cache_write=40, model="claude-x"
    )


def test_a_stream_cut_before_its_end_is_unknown_and_a_reply_without_usage_estimated() -> None:
    cut = sse({"choices": [{"delta": {"content": "Hel"}}]}, done=False)
    got = metered(Provider.OPENAI, cut, streamed=True, finished=False)
    assert got.counted is Counted.UNKNOWN
    # finished without usage: "Hi there" is 2 word pieces, "Hello world !" 3
    plain = {"choices": [{"message": {"content": "Hello world !"}}]}
    assert metered(Provider.OPENAI, json.dumps(plain).encode(), streamed=False) == Usage(
        input=2, output=3, model="gpt-asked", counted=Counted.ESTIMATED
    )


def test_the_sdks_response_objects_give_their_usage() -> None:
    completion = chat.ChatCompletion.model_validate(
        {**CHAT, "id": "c", "created": 1, "object": "chat.completion",
         "choices": [{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": "Hello"}}]}
    )  # fmt: skip
    assert sdk_usage(completion, streamed=False) == Usage(
        input=200, output=30, cache_read=1000, model="gpt-4o-2024-08-06"
    )
    assert sdk_usage(completion, streamed=True) == Usage(
        model="gpt-4o-2024-08-06", counted=Counted.UNKNOWN
    )
    assert sdk_usage("just text", streamed=False) is None


def test_prices_come_from_the_config_by_model_or_its_undated_name() -> None:
    gpt4o = Price(input_per_mtok=2.5, output_per_mtok=10, cached_input_per_mtok=1.25)
    price = pricer({"gpt-4o": gpt4o})
    usage = Usage(input=200, output=30, cache_read=1000, model="gpt-4o-2024-08-06")
    # 200 × 2.5 + 1000 × 1.25 + 30 × 10 = 2050 per million
    assert price(usage) == pytest.approx(0.00205)
    # a model the config does not name: none without the pinned table (test_prices.py)
    unnamed = Usage(input=1_000_000, model="gpt-4o-mini")
    assert pricer({"gpt-4o": gpt4o}, table=False)(unnamed) is None


# --------------------------------------------------------------------------- awkward splits

STREAM_ASK = json.dumps(
    {
        "model": "gpt-4o",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "quote AAPL please"}],
    }
).encode()
CHAT_STREAM = sse(
    {
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "The price "}}],
    },
    {
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": "is 42."}, "finish_reason": "stop"}],
    },
    {
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    },
)


def named_sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


ANTHROPIC_ASK = json.dumps(
    {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
).encode()
ANTHROPIC_STREAM = named_sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-3-5-sonnet-20241022",
            "content": [],
            "usage": {
                "input_tokens": 25,
                "output_tokens": 1,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 300,
            },
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 15},
    },
    {"type": "message_stop"},
)


def fed(provider: Provider, ask: bytes, body: bytes, size: int, finished: bool = True) -> Usage:
    meter = UsageMeter(provider, ask, True)
    for start in range(0, len(body), size):
        meter.feed(body[start : start + size])
    return meter.usage(finished)


@pytest.mark.parametrize("size", [1, 3, 7, 64, 100_000])
def test_a_chat_stream_split_anywhere_gives_its_usage_chunk(size: int) -> None:
    got = fed(Provider.OPENAI, STREAM_ASK, CHAT_STREAM, size)
    assert got == Usage(input=100, output=20, model="gpt-4o-mini")


@pytest.mark.parametrize("size", [1, 6, 33, 100_000])
def test_an_anthropic_stream_split_anywhere_sums_start_and_delta(size: int) -> None:
    got = fed(Provider.ANTHROPIC, ANTHROPIC_ASK, ANTHROPIC_STREAM, size)
    assert got == Usage(
        input=25, output=15, cache_read=2000, cache_write=300, model="claude-3-5-sonnet-20241022"
    )


def test_an_anthropic_stream_cut_before_its_delta_is_unknown() -> None:
    cut = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: message_delta")]
    got = fed(Provider.ANTHROPIC, ANTHROPIC_ASK, cut, 8, finished=False)
    assert got.counted is Counted.UNKNOWN and got.model == "claude-3-5-sonnet-20241022"


def test_a_chat_stream_cut_before_its_usage_chunk_is_unknown() -> None:
    cut = CHAT_STREAM[: CHAT_STREAM.index(b'"usage"') - 40]
    got = fed(Provider.OPENAI, STREAM_ASK, cut, 5, finished=False)
    assert got == Usage(model="gpt-4o-mini", counted=Counted.UNKNOWN)
