"""LLM faults on python values: a reply changes the way the proxy changes the same reply over
HTTP, on every choice and every text block, whether a dict or an SDK object."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from support.llm_shapes import TEXT_FAULT_IDS, TEXT_FAULTS

from flakestorm.chaos.llm import Provider, fault_on_reply
from flakestorm.chaos.llm.values import transform_reply
from flakestorm.config import LlmFault

WORDS = "one two three four five six seven eight nine ten eleven twelve"
CHAT: dict[str, Any] = {
    "id": "chatcmpl-9",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-test",
    "choices": [
        {
            "index": i,
            "message": {"role": "assistant", "content": f"Choice {i}: {WORDS}"},
            "finish_reason": "stop",
        }
        for i in range(3)
    ],
}
MESSAGE: dict[str, Any] = {
    "id": "msg_9",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "First block has five words."},
        {"type": "text", "text": f"Second block: {WORDS}"},
        {"type": "text", "text": "Third block."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 30},
}
FIXED_FAULTS = TEXT_FAULTS[:5]
"""The content faults with their fields given (the drawn drift is left out here)."""


def _over_http(doc: dict[str, Any], provider: Provider, llm_fault: LlmFault) -> dict[str, Any]:
    reply = fault_on_reply(llm_fault, provider, 200, (), json.dumps(doc).encode(), random.Random(3))
    assert reply.body is not None
    result: dict[str, Any] = json.loads(reply.body)
    return result


@pytest.mark.parametrize("llm_fault", FIXED_FAULTS, ids=TEXT_FAULT_IDS[:5])
def test_python_faults_transform_every_choice_like_the_proxy(llm_fault: LlmFault) -> None:
    openai = pytest.importorskip("openai")
    expected = _over_http(CHAT, Provider.OPENAI, llm_fault)
    sdk = openai.types.chat.ChatCompletion.model_validate(CHAT)
    for reply in (json.loads(json.dumps(CHAT)), sdk):
        out = transform_reply(reply, llm_fault, random.Random(3))
        assert out is not None
        choices = out["choices"] if isinstance(out, dict) else [c.model_dump() for c in out.choices]
        assert [c["message"]["content"] for c in choices] == [
            c["message"]["content"] for c in expected["choices"]
        ]
        assert [c["finish_reason"] for c in choices] == [
            c["finish_reason"] for c in expected["choices"]
        ]
    assert [c.message.content for c in sdk.choices] == [f"Choice {i}: {WORDS}" for i in range(3)]


@pytest.mark.parametrize("llm_fault", FIXED_FAULTS, ids=TEXT_FAULT_IDS[:5])
def test_python_faults_transform_every_text_block_like_the_proxy(llm_fault: LlmFault) -> None:
    anthropic = pytest.importorskip("anthropic")
    expected = _over_http(MESSAGE, Provider.ANTHROPIC, llm_fault)
    sdk = anthropic.types.Message.model_validate(MESSAGE)
    for reply in (json.loads(json.dumps(MESSAGE)), sdk):
        out = transform_reply(reply, llm_fault, random.Random(3))
        assert out is not None
        doc = out if isinstance(out, dict) else out.model_dump()
        assert [b["text"] for b in doc["content"]] == [b["text"] for b in expected["content"]]
        assert doc["stop_reason"] == expected["stop_reason"]
    assert sdk.model_dump()["content"][1]["text"] == f"Second block: {WORDS}"
