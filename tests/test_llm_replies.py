"""LLM faults on whole JSON replies: every content mode × API shape, tool calls, pass-through,
and :func:`edit_texts` for python replies."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from support.llm_shapes import (
    API_IDS,
    APIS,
    TEXT_FAULT_IDS,
    TEXT_FAULTS,
    Api,
    Seen,
    fault,
    read_whole,
)

from flakestorm.chaos.llm import (
    Provider,
    fault_before_upstream,
    fault_on_reply,
)
from flakestorm.chaos.llm.replies import edit_texts
from flakestorm.config import LlmFault

apis = pytest.mark.parametrize("api", APIS, ids=API_IDS)


# --------------------------------------------------------------------------- rate limit, timeout


@apis
@pytest.mark.parametrize("mode", ["rate_limit", "timeout"])
def test_before_upstream_faults_answer_like_fault_before_upstream(api: Api, mode: str) -> None:
    flt = fault(mode)
    before = fault_before_upstream(flt, api.provider, False)
    assert before is not None
    reply = api.reply(False)
    assert reply.body is not None
    got = fault_on_reply(flt, api.provider, 200, reply.headers, reply.body, random.Random(1))
    assert got == before


# --------------------------------------------------------------------------- pass-through


def test_error_replies_and_unparseable_bodies_pass_through() -> None:
    flt = fault("garbage")
    error = b'{"error": {"message": "boom"}}'
    got = fault_on_reply(flt, Provider.OPENAI, 500, {"Content-Type": "x"}, error, random.Random())
    assert (got.status, got.body) == (500, error)
    got = fault_on_reply(
        flt, Provider.OPENAI, 200, [("content-length", "3")], b"{{{", random.Random()
    )
    assert got.body == b"{{{" and got.headers == ()
    got = fault_on_reply(flt, Provider.OPENAI, 200, {}, b'{"unknown": 1}', random.Random())
    assert got.body == b'{"unknown": 1}'


def test_rewritten_reply_drops_framing_headers_and_keeps_others() -> None:
    reply = APIS[0].reply(False)
    assert reply.body is not None
    headers = [
        ("Content-Length", "99"),
        ("X-Request-Id", "r1"),
        ("Content-Type", "application/json"),
    ]
    got = fault_on_reply(fault("empty"), Provider.OPENAI, 200, headers, reply.body, random.Random())
    assert got.headers == (("X-Request-Id", "r1"), ("Content-Type", "application/json"))


def test_delay_ms_on_a_content_mode_is_a_wait_before_answering() -> None:
    reply = APIS[3].reply(False)
    assert reply.body is not None
    got = fault_on_reply(
        fault("garbage", delay_ms=40), Provider.ANTHROPIC, 200, {}, reply.body, random.Random()
    )
    assert got.delay_ms == 40


# --------------------------------------------------------------------------- tool calls

CHAT_TOOLS = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "quote", "arguments": '{"ticker": "AAPL"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
}
MESSAGE_TOOLS = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [
        {"type": "text", "text": "Let me look that up for you right now."},
        {"type": "tool_use", "id": "toolu_1", "name": "quote", "input": {"ticker": "AAPL"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 30},
}
RESPONSE_TOOLS = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "quote",
            "arguments": "{}",
        },
    ],
    "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14},
}
TOOL_DOCS = [("chat", CHAT_TOOLS), ("messages", MESSAGE_TOOLS), ("responses", RESPONSE_TOOLS)]


def _tool_reply(api: str, doc: dict[str, Any], flt: LlmFault) -> tuple[Seen, dict[str, Any]]:
    provider = Provider.ANTHROPIC if api == "messages" else Provider.OPENAI
    got = fault_on_reply(flt, provider, 200, {}, json.dumps(doc).encode(), random.Random(3))
    assert got.body is not None
    return read_whole(api, got.body), json.loads(got.body)


@pytest.mark.parametrize(("api", "doc"), TOOL_DOCS, ids=[a for a, _ in TOOL_DOCS])
@pytest.mark.parametrize("mode", ["truncated_response", "empty"])
def test_truncation_and_empty_drop_tool_calls(api: str, doc: dict[str, Any], mode: str) -> None:
    seen, out = _tool_reply(api, doc, fault(mode, max_tokens=3))
    assert seen.tools == 0
    assert isinstance(seen.text, str)
    if mode == "empty":
        assert seen.text == ""
        assert seen.stop in ("stop", "end_turn", "completed")
    else:
        assert seen.stop in ("length", "max_tokens", "max_output_tokens")
    if api == "responses":
        assert out["output"][0]["type"] == "reasoning"  # reasoning kept


@pytest.mark.parametrize(("api", "doc"), TOOL_DOCS, ids=[a for a, _ in TOOL_DOCS])
@pytest.mark.parametrize("mode", ["garbage", "response_drift"])
def test_garbage_and_drift_keep_tool_calls(api: str, doc: dict[str, Any], mode: str) -> None:
    seen, out = _tool_reply(api, doc, fault(mode, drift_type="tone_shift"))
    assert seen.tools == 1
    if api == "chat":
        assert (
            out["choices"][0]["message"]["tool_calls"]
            == CHAT_TOOLS["choices"][0]["message"]["tool_calls"]
        )
        assert out["choices"][0]["finish_reason"] == "tool_calls"
    if api == "messages":
        assert out["content"][1] == MESSAGE_TOOLS["content"][1]
        assert out["content"][0]["text"] != MESSAGE_TOOLS["content"][0]["text"]


# --------------------------------------------------------------------------- python replies

WORDS = "one two three four five six seven eight nine ten eleven twelve"
CHOICES = [f"Choice {i}: {WORDS}" for i in range(3)]
BLOCKS = ["First block has five words.", f"Second block: {WORDS}", "Third block."]


def _chat(texts: list[str]) -> bytes:
    choices = [
        {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
        for i, t in enumerate(texts)
    ]
    return json.dumps({"object": "chat.completion", "choices": choices}).encode()


def _message(texts: list[str]) -> bytes:
    content = [{"type": "text", "text": t} for t in texts]
    return json.dumps({"type": "message", "content": content, "stop_reason": "end_turn"}).encode()


@pytest.mark.parametrize("llm_fault", TEXT_FAULTS, ids=TEXT_FAULT_IDS)
def test_edit_texts_rewrites_like_fault_on_reply(llm_fault: LlmFault) -> None:
    whole = fault_on_reply(
        llm_fault, Provider.OPENAI, 200, (), _chat(CHOICES), random.Random(3)
    ).body
    assert whole is not None
    expected = [[c["message"]["content"]] for c in json.loads(whole)["choices"]]
    assert edit_texts(llm_fault, [[c] for c in CHOICES], random.Random(3)) == expected

    whole = fault_on_reply(
        llm_fault, Provider.ANTHROPIC, 200, (), _message(BLOCKS), random.Random(3)
    ).body
    assert whole is not None
    expected = [[b["text"] for b in json.loads(whole)["content"]]]
    assert edit_texts(llm_fault, [BLOCKS], random.Random(3)) == expected


def test_edit_texts_budget_is_per_group() -> None:
    cut = edit_texts(
        fault("truncated_response", max_tokens=7), [BLOCKS, CHOICES[:1]], random.Random()
    )
    assert cut == [["First block has five words.", "Second", ""], ["Choice 0: one two three four"]]
