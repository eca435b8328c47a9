"""A fake OpenAI + Anthropic API for tests of LLM traffic through the chaos proxy: one fixed
answer (:data:`TEXT`), whole or streamed word by word, and the messages tests send it.

::

    with LoopbackServer(fake_provider) as provider:
        with ChaosProxy(llm_upstream=provider.url) as proxy:
            ...  # POST {proxy.url}/llm/openai/v1/chat/completions with MESSAGES
"""

from __future__ import annotations

import json
from typing import Any

from support.server import Request, Response

TEXT = "The weather in Paris is sunny and warm today with a light breeze from the west"
WORDS = TEXT.split(" ")


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def _anthropic_event(doc: dict[str, Any]) -> bytes:
    return f"event: {doc['type']}\ndata: {json.dumps(doc)}\n\n".encode()


def fake_provider(request: Request) -> Response:
    """A fake OpenAI + Anthropic API: one fixed answer, whole or streamed word by word."""
    body = request.json()
    stream = body.get("stream") is True
    if request.path.endswith("/chat/completions"):
        if not stream:
            return Response.json(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "gpt-test",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": TEXT},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 15, "total_tokens": 20},
                }
            )
        chunks = [_openai_chunk({"role": "assistant", "content": ""})]
        chunks += [_openai_chunk({"content": (" " if i else "") + w}) for i, w in enumerate(WORDS)]
        chunks += [_openai_chunk({}, "stop"), b"data: [DONE]\n\n"]
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=chunks)
    if request.path.endswith("/messages"):
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 15},
        }
        if not stream:
            return Response.json(message)
        start = {**message, "content": [], "stop_reason": None}
        events = [
            {"type": "message_start", "message": start},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ]
        events += [
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": (" " if i else "") + w},
            }
            for i, w in enumerate(WORDS)
        ]
        events += [
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 15},
            },
            {"type": "message_stop"},
        ]
        return Response(
            200,
            headers={"Content-Type": "text/event-stream"},
            chunks=[_anthropic_event(e) for e in events],
        )
    return Response.json({"error": {"message": "no such route"}}, status=404)


MESSAGES = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "What is the weather in Paris today?"},
]
"""An OpenAI chat: a system prompt and a question."""

ASK = [{"role": "user", "content": "What is the weather in Paris today?"}]
"""An Anthropic conversation: the question."""
