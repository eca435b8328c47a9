"""The built-in mock LLM: deterministic replies in both providers' protocols."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flakestorm.chaos.llm import LlmResponse, Provider, count_tokens
from flakestorm.chaos.proxy.upstreams.mock_llm import CREATED, MODEL, mock_reply, reply_text


def body(**doc: Any) -> bytes:
    return json.dumps(doc).encode()


def whole(reply: LlmResponse) -> Any:
    assert reply.body is not None and reply.chunks is None
    return json.loads(reply.body)


def events(reply: LlmResponse) -> list[tuple[str | None, Any]]:
    assert reply.chunks is not None and reply.body is None
    assert dict(reply.headers)["content-type"].startswith("text/event-stream")
    out = []
    for chunk in reply.chunks:
        assert chunk.endswith(b"\n\n")
        lines = chunk.decode().splitlines()
        event = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next(line[6:] for line in lines if line.startswith("data: "))
        out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


USER = [{"role": "user", "content": "What is the price of ACME after 3 splits in 2024?"}]


def test_reply_text_without_tools_echoes_the_question_and_its_numbers() -> None:
    text = reply_text({"messages": [{"role": "system", "content": "SECRET"}, *USER]})
    assert text == (
        'Answer to "What is the price of ACME after 3 splits in 2024?": this is a '
        "deterministic reply from the flakestorm mock LLM. The numbers mentioned are 3, 2024. "
        "(source: flakestorm mock LLM; no live data)"
    )
    assert "SECRET" not in text


def test_reply_text_cites_openai_tool_results() -> None:
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": []},
        {
            "role": "tool",
            "tool_call_id": "c",
            "content": '{"ticker": "ACME", "price": 187.5, "x": {}}',
        },
    ]
    text = reply_text({"messages": messages})
    assert "according to the tool results, ticker: ACME, price: 187.5." in text
    assert text.endswith("(source: tool results)")


def test_reply_text_cites_anthropic_and_responses_tool_results() -> None:
    anthropic = {
        "messages": [
            *USER,
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": "ACME closed at 12.5 today",
                    }
                ],
            },
        ]
    }
    assert "ACME closed at 12.5 today" in reply_text(anthropic)
    responses = {
        "input": [*USER, {"type": "function_call_output", "call_id": "c", "output": '{"price": 9}'}]
    }
    assert "price: 9" in reply_text(responses)


def test_long_questions_are_shortened() -> None:
    text = reply_text({"prompt": " ".join(f"w{i}" for i in range(40))})
    assert 'Answer to "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11...":' in text


def test_chat_completion() -> None:
    request = body(model="gpt-x", messages=USER)
    doc = whole(mock_reply(Provider.OPENAI, "/llm/openai/v1/chat/completions", request))
    assert doc["object"] == "chat.completion" and doc["model"] == "gpt-x"
    assert doc["created"] == CREATED
    choice = doc["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == reply_text({"messages": USER})
    usage = doc["usage"]
    assert usage["completion_tokens"] == count_tokens(choice["message"]["content"])
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # deterministic, byte for byte
    assert mock_reply(Provider.OPENAI, "/v1/chat/completions", request) == mock_reply(
        Provider.OPENAI, "/v1/chat/completions", request
    )


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_chat_completion_honours_max_tokens(key: str) -> None:
    doc = whole(
        mock_reply(Provider.OPENAI, "/v1/chat/completions", body(messages=USER, **{key: 4}))
    )
    assert doc["choices"][0]["finish_reason"] == "length"
    assert doc["choices"][0]["message"]["content"] == 'Answer to "What'
    assert doc["usage"]["completion_tokens"] == 4


def test_chat_completion_stream() -> None:
    request = body(messages=USER, stream=True, stream_options={"include_usage": True})
    frames = events(mock_reply(Provider.OPENAI, "/v1/chat/completions", request))
    assert frames[-1] == (None, "[DONE]")
    chunks = [d for _, d in frames[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == reply_text({"messages": USER})
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    without_usage = events(
        mock_reply(Provider.OPENAI, "/v1/chat/completions", body(messages=USER, stream=True))
    )
    assert all("usage" not in d for _, d in without_usage[:-1])


def test_completions_whole_and_streamed() -> None:
    doc = whole(mock_reply(Provider.OPENAI, "/v1/completions", body(prompt="Say hi", max_tokens=3)))
    assert doc["object"] == "text_completion"
    assert doc["choices"][0] == {
        "index": 0,
        "text": 'Answer to "',
        "logprobs": None,
        "finish_reason": "length",
    }
    frames = events(
        mock_reply(Provider.OPENAI, "/v1/completions", body(prompt="Say hi", stream=True))
    )
    assert frames[-1] == (None, "[DONE]")
    text = "".join(d["choices"][0]["text"] for _, d in frames[:-1])
    assert text == reply_text({"prompt": "Say hi"})
    assert frames[-2][1]["choices"][0]["finish_reason"] == "stop"


def test_responses_whole_and_streamed() -> None:
    doc = whole(
        mock_reply(Provider.OPENAI, "/v1/responses", body(input="Say hi", instructions="Be brief"))
    )
    assert doc["object"] == "response" and doc["status"] == "completed"
    assert doc["output"][0]["content"][0]["text"] == reply_text({"input": "Say hi"})
    assert doc["instructions"] == "Be brief"
    cut = whole(
        mock_reply(Provider.OPENAI, "/v1/responses", body(input="Say hi", max_output_tokens=2))
    )
    assert cut["status"] == "incomplete"
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}
    frames = events(mock_reply(Provider.OPENAI, "/v1/responses", body(input="Say hi", stream=True)))
    kinds = [e for e, _ in frames]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for _, d in frames] == list(range(len(frames)))
    text = "".join(d["delta"] for e, d in frames if e == "response.output_text.delta")
    assert text == frames[-1][1]["response"]["output"][0]["content"][0]["text"]


def test_anthropic_message() -> None:
    doc = whole(
        mock_reply(
            Provider.ANTHROPIC,
            "/v1/messages",
            body(model="claude-x", max_tokens=100, messages=USER),
        )
    )
    assert doc["type"] == "message" and doc["role"] == "assistant" and doc["model"] == "claude-x"
    assert doc["content"] == [{"type": "text", "text": reply_text({"messages": USER})}]
    assert doc["stop_reason"] == "end_turn" and doc["stop_sequence"] is None
    assert doc["usage"]["output_tokens"] == count_tokens(doc["content"][0]["text"])
    cut = whole(mock_reply(Provider.ANTHROPIC, "/v1/messages", body(max_tokens=2, messages=USER)))
    assert cut["stop_reason"] == "max_tokens" and cut["content"][0]["text"] == "Answer to"


def test_anthropic_stream_events_in_the_real_order() -> None:
    reply = mock_reply(
        Provider.ANTHROPIC,
        "/llm/anthropic/v1/messages",
        body(max_tokens=100, messages=USER, stream=True),
    )
    frames = events(reply)
    kinds = [e for e, _ in frames]
    assert all(e == d["type"] for e, d in frames)
    deltas = kinds.count("content_block_delta")
    assert deltas > 3
    assert kinds == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    text = "".join(d["delta"]["text"] for e, d in frames if e == "content_block_delta")
    assert text == reply_text({"messages": USER})
    assert frames[-2][1]["delta"]["stop_reason"] == "end_turn"


def test_models_and_count_tokens() -> None:
    models = whole(mock_reply(Provider.OPENAI, "/v1/models", b""))
    assert models["object"] == "list" and models["data"][0]["id"] == MODEL
    models = whole(mock_reply(Provider.ANTHROPIC, "/v1/models?limit=20", b""))
    assert models["data"][0]["type"] == "model" and models["has_more"] is False
    counted = whole(
        mock_reply(Provider.ANTHROPIC, "/v1/messages/count_tokens", body(messages=USER))
    )
    assert counted["input_tokens"] == count_tokens(USER[0]["content"])


@pytest.mark.parametrize(
    ("provider", "path"),
    [
        (Provider.OPENAI, "/v1/embeddings"),
        (Provider.ANTHROPIC, "/v1/chat/completions"),
        (Provider.OPENAI, "/"),
    ],
)
def test_unknown_paths_are_404_in_the_provider_shape(provider: Provider, path: str) -> None:
    reply = mock_reply(provider, path, b"{}")
    assert reply.status == 404
    doc = whole(reply)
    if provider is Provider.ANTHROPIC:
        assert doc["type"] == "error" and doc["error"]["type"] == "not_found_error"
    else:
        assert doc["error"]["type"] == "invalid_request_error" and doc["error"]["message"]


@pytest.mark.parametrize("provider", list(Provider))
def test_bad_bodies_are_400(provider: Provider) -> None:
    path = "/v1/messages" if provider is Provider.ANTHROPIC else "/v1/chat/completions"
    for bad in (b"", b"not json", b"[1]"):
        reply = mock_reply(provider, path, bad)
        assert reply.status == 400
        assert "error" in whole(reply)
