"""A streamed reply read as it arrives (flakestorm.agents.stream): framing at any chunk
boundary, what is content and what ends each format, and the figures the stream invariants
judge. Times are given, in milliseconds; every expected figure is worked out by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flakestorm.agents.stream import StreamReader
from flakestorm.config import AgentStream, StreamFormat
from flakestorm.errors import AgentError, AgentErrorKind
from flakestorm.results.stream_timing import Ending


def reader(fmt: str, path: str | None = None, done: str | None = None) -> StreamReader:
    return StreamReader(AgentStream(format=StreamFormat(fmt), path=path, done=done))


def chunk(content: str | None = None, role: str | None = None, finish: str | None = None) -> bytes:
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    doc = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    doc["choices"][0]["finish_reason"] = finish
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


OPENAI = (
    chunk(role="assistant", content="")  # role-only first chunk: not content
    + b": keep-alive\n\n"  # a comment frame: not content
    + chunk("The capital ")
    + chunk("of France ")
    + chunk("is Paris.")
    + chunk(finish="stop")
    + b"data: [DONE]\n\n"
)


def feed_split(r: StreamReader, body: bytes, size: int, times: list[float]) -> None:
    """``body`` in pieces of ``size`` bytes, the n-th piece arriving at ``times[n]`` (the
    last time repeats)."""
    for n, start in enumerate(range(0, len(body), size)):
        if r.feed(body[start : start + size], times[min(n, len(times) - 1)]):
            break


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_an_openai_stream_split_anywhere_reads_the_same_text(size: int) -> None:
    r = reader("openai")
    feed_split(r, OPENAI, size, [5.0])
    timing = r.finish(Ending.CLOSED, 9.0)
    assert r.text == "The capital of France is Paris."
    assert timing.completed and timing.terminal == "[DONE]"
    assert timing.content_events == 3


def test_the_first_content_is_neither_the_first_byte_nor_a_role_only_chunk_nor_a_comment() -> None:
    r = reader("openai")
    r.feed(chunk(role="assistant", content=""), 3.0)  # first byte at 3 ms
    r.feed(b": ping\n\n", 400.0)
    r.feed(chunk("Hello"), 812.0)
    r.feed(chunk(" world"), 830.0)
    r.feed(b"data: [DONE]\n\n", 840.0)
    timing = r.finish(Ending.CLOSED, 841.0)
    assert (timing.first_byte_ms, timing.first_content_ms) == (3.0, 812.0)
    # gaps between content events: 812 -> 830 (18), 830 -> end at the [DONE], 840 (10)
    assert (timing.longest_gap_ms, timing.gap_after) == (18.0, 1)
    assert [e.kind for e in timing.timeline] == ["other", "comment", "content", "content", "done"]


def test_a_crlf_split_between_chunks_ends_one_line_not_two() -> None:
    r = reader("openai")
    body = chunk("a").replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"
    cut = body.index(b"\r\n") + 1  # the CR in one chunk, its LF in the next
    r.feed(body[:cut], 1.0)
    r.feed(body[cut:], 2.0)
    assert r.text == "a" and r.done


def test_a_stream_closed_without_done_is_an_answer_that_did_not_complete() -> None:
    r = reader("openai")
    r.feed(chunk(role="assistant"), 1.0)
    for i, at in enumerate((10.0, 20.0, 30.0)):
        r.feed(chunk(f"part{i} "), at)
    timing = r.finish(Ending.CLOSED, 4040.0)
    assert r.text == "part0 part1 part2 "
    assert not timing.completed and timing.ending is Ending.CLOSED
    # the longest silence is from the third content event (30 ms) to the close (4040 ms)
    assert (timing.longest_gap_ms, timing.gap_after, timing.content_events) == (4010.0, 3, 3)


def test_a_multibyte_character_split_across_chunks_is_read_whole() -> None:
    r = reader("openai")
    body = chunk("café ☕") + b"data: [DONE]\n\n"
    feed_split(r, body, 1, [1.0])
    assert r.text == "café ☕"


def test_nothing_after_the_terminal_event_is_read() -> None:
    r = reader("openai")
    assert r.feed(chunk("a") + b"data: [DONE]\n\n" + chunk("late"), 1.0) is True
    assert r.text == "a"


ANTHROPIC = (
    b'event: message_start\ndata: {"type":"message_start","message":{"role":"assistant"}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Bonjour"}}\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":" Paris"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.mark.parametrize("size", [1, 5, 100_000])
def test_an_anthropic_stream_pings_are_not_content(size: int) -> None:
    r = reader("anthropic")
    feed_split(r, ANTHROPIC, size, [2.0])
    timing = r.finish(Ending.CLOSED, 3.0)
    assert r.text == "Bonjour Paris"
    assert timing.content_events == 2 and timing.completed
    assert timing.terminal == "message_stop"


def test_anthropic_without_message_stop_did_not_complete() -> None:
    r = reader("anthropic")
    r.feed(ANTHROPIC[: ANTHROPIC.index(b"event: content_block_stop")], 2.0)
    timing = r.finish(Ending.CUT, 3.0)
    assert r.text == "Bonjour Paris"
    assert timing.ending is Ending.CUT and not timing.completed


def test_generic_sse_with_a_path_and_an_event_named_done() -> None:
    r = reader("sse", path="token", done="end")
    r.feed(b'event: start\ndata: {"id": 1}\n\n', 1.0)
    r.feed(b'data: {"token": "Par"}\n\ndata: {"token": "is"}\n\n', 50.0)
    r.feed(b"event: end\ndata: {}\n\n", 60.0)
    timing = r.finish(Ending.CLOSED, 61.0)
    assert r.text == "Paris" and timing.completed and timing.terminal == "end"
    assert timing.first_content_ms == 50.0


def test_generic_sse_without_a_path_takes_the_data_as_text_and_a_data_marker_ends_it() -> None:
    r = reader("sse", done="[DONE]")
    r.feed(b"data: Hello\n\ndata: world\ndata: again\n\ndata: [DONE]\n\n", 7.0)
    assert r.text == "Helloworld\nagain" and r.done


def test_ndjson_with_a_path_value_terminal_as_ollama_streams() -> None:
    r = reader("ndjson", path="message.content", done="done=true")
    lines = [
        {"message": {"role": "assistant", "content": ""}, "done": False},
        {"message": {"role": "assistant", "content": "Oui"}, "done": False},
        {"message": {"role": "assistant", "content": "."}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True},
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    feed_split(r, body, 11, [1.0, 2.0, 3.0])
    timing = r.finish(Ending.CLOSED, 9.0)
    assert r.text == "Oui." and timing.completed and timing.content_events == 2


def test_ndjson_last_line_without_newline_is_read_at_the_close() -> None:
    r = reader("ndjson", path="t", done="type=done")
    r.feed(b'{"t": "a"}\n{"t": "b"}\n{"type": "done"}', 5.0)
    timing = r.finish(Ending.CLOSED, 6.0)
    assert r.text == "ab" and timing.completed


def test_plain_text_each_chunk_is_content_and_the_clean_close_is_the_end() -> None:
    r = reader("text")
    r.feed(b"Hel", 100.0)
    r.feed(b"lo", 2100.0)
    timing = r.finish(Ending.CLOSED, 2150.0)
    assert r.text == "Hello" and timing.completed
    assert (timing.first_content_ms, timing.longest_gap_ms, timing.gap_after) == (100.0, 2000.0, 1)


def test_plain_text_cut_did_not_complete() -> None:
    r = reader("text")
    r.feed(b"Hel", 1.0)
    assert not r.finish(Ending.CUT, 2.0).completed


def test_a_stream_with_no_content_is_silent_throughout() -> None:
    r = reader("openai")
    r.feed(chunk(role="assistant"), 3.0)
    timing = r.finish(Ending.CLOSED, 500.0)
    assert r.text == "" and timing.first_content_ms is None
    assert (timing.longest_gap_ms, timing.gap_after) == (500.0, 0)


def test_undecodable_text_makes_the_reply_unparseable() -> None:
    r = reader("text")
    with pytest.raises(AgentError) as caught:
        r.feed(b"\xff\xfe", 1.0)
        r.finish(Ending.CLOSED, 2.0)
    assert caught.value.kind is AgentErrorKind.UNPARSEABLE


def test_the_timeline_keeps_the_first_and_last_eight_events() -> None:
    r = reader("openai")
    for i in range(30):
        r.feed(chunk(f"w{i} "), float(i))
    timing = r.finish(Ending.CLOSED, 30.0)
    assert len(timing.timeline) == 16 and timing.events_left_out == 14
    assert timing.timeline[0].text == "w0 " and timing.timeline[-1].text == "w29 "
