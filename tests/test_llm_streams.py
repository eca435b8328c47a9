"""LLM faults on SSE streams: every content mode × API shape, tool calls, usage chunks, early
ends, Responses API sequence numbers, and streams read back by the official SDKs."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from support.llm_shapes import (
    API_IDS,
    APIS,
    QUESTION,
    Api,
    fault,
    frames_of,
    read_stream,
    sse,
)
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.llm import (
    Provider,
    count_tokens,
    fault_before_upstream,
    fault_on_stream,
)
from flakestorm.chaos.proxy.upstreams.mock_llm import mock_reply
from flakestorm.config import DriftType, LlmFault

apis = pytest.mark.parametrize("api", APIS, ids=API_IDS)


# --------------------------------------------------------------------------- rate limit, timeout


@apis
@pytest.mark.parametrize("mode", ["rate_limit", "timeout"])
def test_before_upstream_faults_pass_a_stream_through(api: Api, mode: str) -> None:
    flt = fault(mode)
    assert fault_before_upstream(flt, api.provider, True) is not None  # they answer instead
    reply = api.reply(True)
    assert reply.chunks is not None
    out = list(fault_on_stream(flt, api.provider, reply.chunks, random.Random(1)))
    assert out == list(reply.chunks)


def test_unknown_stream_passes_through() -> None:
    chunks = [b'data: {"hello": 1}\n\n', b": comment\n\n", b"data: [DONE]\n\n"]
    assert list(fault_on_stream(fault("empty"), Provider.OPENAI, chunks, random.Random())) == chunks


# --------------------------------------------------------------------------- tool calls


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


CHAT_TOOL_STREAM = sse(
    _chat_chunk({"role": "assistant", "content": ""}),
    _chat_chunk({"content": "Checking the price now."}),
    _chat_chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "q", "arguments": ""},
                }
            ]
        }
    ),
    _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"t": 1}'}}]}),
    _chat_chunk({}, "tool_calls"),
    "[DONE]",
)
_TOOL_USE = {"type": "tool_use", "id": "t", "name": "q", "input": {}}
_STOP = {"stop_reason": "tool_use", "stop_sequence": None}
_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 30},
}
MESSAGE_TOOL_STREAM = sse(
    {"type": "message_start", "message": _MESSAGE},
    {"type": "content_block_start", "index": 0, "content_block": _TOOL_USE},
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"t": 1}'},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "text_delta", "text": "Done, the price is known."},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": _STOP, "usage": {"output_tokens": 40}},
    {"type": "message_stop"},
    anthropic=True,
)


@pytest.mark.parametrize("mode", ["truncated_response", "empty"])
def test_streamed_tool_calls_are_dropped_by_truncation_and_empty(mode: str) -> None:
    flt = fault(mode, max_tokens=2)
    chat = read_stream(
        "chat", list(fault_on_stream(flt, Provider.OPENAI, CHAT_TOOL_STREAM, random.Random()))
    )
    assert chat.tools == 0
    assert chat.stop == ("length" if mode == "truncated_response" else "stop")
    assert chat.text == ("Checking the" if mode == "truncated_response" else "")
    message = read_stream(
        "messages",
        list(fault_on_stream(flt, Provider.ANTHROPIC, MESSAGE_TOOL_STREAM, random.Random())),
    )
    assert message.tools == 0  # and the text block was renumbered to index 0
    assert message.stop == ("max_tokens" if mode == "truncated_response" else "end_turn")
    assert message.text == ("Done," if mode == "truncated_response" else "")


def test_streamed_tool_only_reply_emptied_still_has_a_text_block() -> None:
    only_tool = [f for f in MESSAGE_TOOL_STREAM if b'"index": 1' not in f]
    out = list(fault_on_stream(fault("empty"), Provider.ANTHROPIC, only_tool, random.Random()))
    starts = [d for e, d in frames_of(out) if e == "content_block_start"]
    assert [s["content_block"] for s in starts] == [{"type": "text", "text": ""}]


@pytest.mark.parametrize("mode", ["garbage", "response_drift"])
def test_streamed_tool_calls_survive_garbage_and_drift(mode: str) -> None:
    flt = fault(mode, drift_type="format_change")
    chat = read_stream(
        "chat", list(fault_on_stream(flt, Provider.OPENAI, CHAT_TOOL_STREAM, random.Random()))
    )
    assert chat.tools == 2 and chat.stop == "tool_calls"
    assert chat.text and chat.text != "Checking the price now."
    message = read_stream(
        "messages",
        list(fault_on_stream(flt, Provider.ANTHROPIC, MESSAGE_TOOL_STREAM, random.Random())),
    )
    assert message.tools == 1 and message.stop == "tool_use"
    assert message.text and message.text != "Done, the price is known."


# --------------------------------------------------------------------------- usage and ends


def test_openai_stream_usage_chunk_is_adjusted() -> None:
    body = json.dumps(
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": QUESTION}],
        }
    ).encode()
    reply = mock_reply(Provider.OPENAI, "/v1/chat/completions", body)
    assert reply.chunks is not None
    out = list(
        fault_on_stream(
            fault("truncated_response", max_tokens=4),
            Provider.OPENAI,
            reply.chunks,
            random.Random(),
        )
    )
    seen = read_stream("chat", out)
    assert seen.output_tokens == 4
    assert frames_of(out)[-2][1]["choices"] == []  # the usage chunk is still there


def test_truncated_anthropic_stream_stops_reading_upstream() -> None:
    reply = APIS[3].reply(True)
    assert reply.chunks is not None
    read = []

    def upstream() -> Iterator[bytes]:
        for chunk in reply.chunks or ():
            read.append(chunk)
            yield chunk

    list(
        fault_on_stream(
            fault("truncated_response", max_tokens=2),
            Provider.ANTHROPIC,
            upstream(),
            random.Random(),
        )
    )
    assert len(read) < len(reply.chunks)


def test_truncating_a_stream_that_splits_a_surrogate_pair() -> None:
    # an upstream that slices UTF-16 (a JavaScript server) can send the two halves of an
    # emoji as two deltas of lone \\ud83d / \\ude00 escapes
    raw = [
        b'data: {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", '
        b'"choices": [{"index": 0, "delta": {"content": "' + piece + b'"}, "finish_reason": null}]}'
        b"\n\n"
        for piece in (b"Hi ", b"\\ud83d", b"\\ude00", b" there")
    ]
    flt = fault("truncated_response", max_tokens=2)
    out = list(fault_on_stream(flt, Provider.OPENAI, [*raw, b"data: [DONE]\n\n"], random.Random()))
    docs = [json.loads(c[6:]) for c in out if c.startswith(b"data: {")]
    text = "".join(d["choices"][0]["delta"].get("content") or "" for d in docs if d["choices"])
    # the pair stays whole: it is one token, never cut in the middle
    assert text.encode("utf-16", "surrogatepass").decode("utf-16") == "Hi \U0001f600"
    assert docs[-1]["choices"][0]["finish_reason"] == "length"


# --------------------------------------------------------------------------- Responses deltas


def _events(chunks: Any) -> list[dict[str, Any]]:
    text = b"".join(chunks).decode()
    return [
        json.loads(line[len("data: ") :])
        for frame in text.split("\n\n")
        for line in frame.splitlines()
        if line.startswith("data: {")
    ]


def _responses_events(llm_fault: LlmFault) -> tuple[list[dict[str, Any]], str]:
    request = {"model": "g", "input": "What is ACME?", "stream": True}
    reply = mock_reply(Provider.OPENAI, "/v1/responses", json.dumps(request).encode())
    assert reply.chunks is not None
    original = "".join(
        e["delta"] for e in _events(reply.chunks) if e["type"] == "response.output_text.delta"
    )
    chunks = list(fault_on_stream(llm_fault, Provider.OPENAI, reply.chunks, random.Random(2)))
    return _events(chunks), original


@pytest.mark.parametrize(
    "llm_fault",
    [fault("garbage"), fault("response_drift", drift_type=DriftType.TONE_SHIFT)],
    ids=["garbage", "tone_shift"],
)
def test_responses_stream_rewrites_emit_a_clean_delta(llm_fault: LlmFault) -> None:
    events, original = _responses_events(llm_fault)
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(set(numbers)), numbers  # strictly increasing
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    (done,) = [e for e in events if e["type"] == "response.output_text.done"]
    assert len(deltas) == 1 and "text" not in deltas[0]
    assert set(deltas[0]) == {
        "type",
        "sequence_number",
        "item_id",
        "output_index",
        "content_index",
        "delta",
        "logprobs",
    }
    assert done["text"] == deltas[0]["delta"] != original
    final = events[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == done["text"]


# --------------------------------------------------------------------------- read by the SDKs


def _stream_server(chunks: list[bytes]) -> LoopbackServer:
    def handle(request: Request) -> Response:
        return Response(200, headers={"content-type": "text/event-stream"}, chunks=chunks)

    return LoopbackServer(handle)


def test_truncated_anthropic_stream_budget_is_shared_by_its_text_blocks() -> None:
    anthropic = pytest.importorskip("anthropic")
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    docs: list[Any] = [{"type": "message_start", "message": message}]
    for index, text in enumerate(["one two three", "four five six seven"]):
        docs += [
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
            {"type": "content_block_stop", "index": index},
        ]
    docs += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 7},
        },
        {"type": "message_stop"},
    ]
    flt = fault("truncated_response", max_tokens=4)
    chunks = list(
        fault_on_stream(flt, Provider.ANTHROPIC, sse(*docs, anthropic=True), random.Random(1))
    )
    with _stream_server(chunks) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
        with client.messages.stream(model="c", max_tokens=99, messages=[]) as stream:
            final = stream.get_final_message()
    text = " ".join(b.text for b in final.content if b.type == "text")
    assert count_tokens(text) == 4
    assert text == "one two three four"
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 4


def _azure_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


# Azure OpenAI opens every chat stream with a chunk that has no choices (and no "object")
AZURE_STREAM = sse(
    {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
    },
    _azure_chunk({"role": "assistant", "content": ""}),
    _azure_chunk({"content": "Hello there, my good friend."}),
    _azure_chunk({}, "stop"),
    "[DONE]",
)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("truncated_response", "Hello there"), ("garbage", None)],
)
def test_chat_stream_opening_with_an_empty_choices_chunk(mode: str, expected: str | None) -> None:
    openai = pytest.importorskip("openai")
    flt = fault(mode, max_tokens=2 if expected else None)
    chunks = list(fault_on_stream(flt, Provider.OPENAI, AZURE_STREAM, random.Random(1)))
    with _stream_server(chunks) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
    text = "".join(parts)
    if expected is not None:
        assert text == expected
    else:
        assert text and "friend" not in text
