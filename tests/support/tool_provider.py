"""A fake OpenAI chat completions + Anthropic messages API that does tool calling, whole and
streamed (and the OpenAI Responses API, whole), for tests of agents built on frameworks.

A request that offers tools and carries no tool result yet gets a call of its first tool with
``{"city": "Paris"}``; any other request gets the answer ``The tool said: <the last tool
result>`` (or :data:`ANSWER` when there is none), streamed word by word when asked::

    with LoopbackServer(tool_provider) as provider:
        client = openai.OpenAI(base_url=provider.url_for("/v1"), api_key="test")
"""

from __future__ import annotations

import json
from typing import Any

from support.server import Request, Response

ANSWER = "Paris is sunny and warm today with a light breeze from the west"
ARGUMENTS = {"city": "Paris"}
SSE = {"Content-Type": "text/event-stream"}


def answer_to(tool_text: str | None) -> str:
    """What the fake LLM answers once the tool said ``tool_text``."""
    return ANSWER if tool_text is None else f"The tool said: {tool_text}"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            _text_of(part.get("text", part.get("content", ""))) if isinstance(part, dict) else ""
            for part in content
        )
    return ""


# --------------------------------------------------------------------------- OpenAI


def _openai_tool_result(messages: list[dict[str, Any]]) -> str | None:
    results = [m for m in messages if m.get("role") == "tool"]
    return _text_of(results[-1].get("content")) if results else None


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def _openai(body: dict[str, Any]) -> Response:
    tools = body.get("tools") or []
    tool_text = _openai_tool_result(body.get("messages", []))
    stream = body.get("stream") is True
    call = (
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": tools[0]["function"]["name"], "arguments": json.dumps(ARGUMENTS)},
        }
        if tools and tool_text is None
        else None
    )
    text = answer_to(tool_text)
    if not stream:
        finish = "tool_calls" if call else "stop"
        message: dict[str, Any] = {"role": "assistant", "content": None if call else text}
        if call:
            message["tool_calls"] = [call]
        return Response.json(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-test",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 15, "total_tokens": 20},
            }
        )
    if call:
        chunks = [
            _chunk({"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}),
            _chunk({}, "tool_calls"),
        ]
    else:
        words = text.split(" ")
        chunks = [_chunk({"role": "assistant", "content": ""})]
        chunks += [_chunk({"content": (" " if i else "") + w}) for i, w in enumerate(words)]
        chunks.append(_chunk({}, "stop"))
    return Response(200, headers=SSE, chunks=[*chunks, b"data: [DONE]\n\n"])


# --------------------------------------------------------------------------- Anthropic


def _anthropic_tool_result(messages: list[dict[str, Any]]) -> str | None:
    found = None
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found = _text_of(block.get("content"))
    return found


def _event(doc: dict[str, Any]) -> bytes:
    return f"event: {doc['type']}\ndata: {json.dumps(doc)}\n\n".encode()


def _anthropic(body: dict[str, Any]) -> Response:
    tools = body.get("tools") or []
    tool_text = _anthropic_tool_result(body.get("messages", []))
    calls = bool(tools) and tool_text is None
    text = answer_to(tool_text)
    block: dict[str, Any] = (
        {"type": "tool_use", "id": "toolu_1", "name": tools[0]["name"], "input": ARGUMENTS}
        if calls
        else {"type": "text", "text": text}
    )
    stop = "tool_use" if calls else "end_turn"
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 15},
    }
    if body.get("stream") is not True:
        return Response.json(message)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}
    ]
    if calls:
        events += [
            {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(ARGUMENTS)},
            },
        ]
    else:
        start = {"type": "text", "text": ""}
        events.append({"type": "content_block_start", "index": 0, "content_block": start})
        events += [
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": (" " if i else "") + w},
            }
            for i, w in enumerate(text.split(" "))
        ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 15},
        },
        {"type": "message_stop"},
    ]
    return Response(200, headers=SSE, chunks=[_event(e) for e in events])


# --------------------------------------------------------------------------- OpenAI Responses


def _responses(body: dict[str, Any]) -> Response:
    """The Responses API, whole replies only."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    tool_text = _text_of(outputs[-1].get("output")) if outputs else None
    tools = body.get("tools") or []
    if tools and tool_text is None:
        output: dict[str, Any] = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": tools[0]["name"],
            "arguments": json.dumps(ARGUMENTS),
            "status": "completed",
        }
    else:
        text = {"type": "output_text", "text": answer_to(tool_text), "annotations": []}
        output = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
    return Response.json(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-test",
            "status": "completed",
            "output": [output],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": tools,
            "usage": {
                "input_tokens": 5,
                "output_tokens": 15,
                "total_tokens": 20,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    )


def tool_provider(request: Request) -> Response:
    """The fake API (module doc)."""
    body = request.json()
    if request.path.endswith("/responses") and body.get("stream") is not True:
        return _responses(body)
    if request.path.endswith("/chat/completions"):
        return _openai(body)
    if request.path.endswith("/messages"):
        return _anthropic(body)
    return Response.json({"error": {"message": "no such route"}}, status=404)
