"""The built-in mock LLM (``proxy.llm_upstream: mock``): deterministic, offline, in-process.

It answers the LLM calls the chaos proxy relays, in the protocol the agent speaks, so a CI run
needs no API key and gives the same replies every time. LLM faults apply to its replies exactly
as they would to a real provider's.

Endpoints (any path prefix, e.g. ``/llm/openai/v1/...`` or ``/v1/...``):

- OpenAI: ``POST .../chat/completions``, ``POST .../completions``, ``POST .../responses``
  (each also with ``"stream": true``: server-sent events as the real API sends them) and
  ``GET .../models``;
- Anthropic: ``POST .../messages`` (also streamed, events in the real order: ``message_start``,
  ``content_block_start``, ``ping``, ``content_block_delta``..., ``content_block_stop``,
  ``message_delta``, ``message_stop``), ``POST .../messages/count_tokens`` and ``GET
  .../models``.

Any other path is a 404, and a body that is not a JSON object a 400, with the provider's error
JSON. API keys are not checked. The model named in the request is echoed back (default
:data:`MODEL`).

The reply is a pure function of the request (:func:`reply_text`):

1. *question* = the last user message, whitespace collapsed, its first 12 words (``...`` when
   cut). The system prompt is never repeated.
2. If the request holds tool results (OpenAI ``tool`` messages, Responses
   ``function_call_output`` items, Anthropic ``tool_result`` blocks), the reply cites the last
   three: ``Answer to "<question>": according to the tool results, <facts>. (source: tool
   results)``, where a JSON object result contributes its scalar fields (``price: 187.5``) and
   any other result its first 30 words.
3. Otherwise: ``Answer to "<question>": this is a deterministic reply from the flakestorm mock
   LLM. The numbers mentioned are <numbers>. (source: flakestorm mock LLM; no live data)`` — the
   numbers sentence only when the question holds numbers.

Note that the question is echoed: an invariant that forbids words of the prompt itself will see
them in a mock reply.

A token is what :func:`flakestorm.chaos.llm.count_tokens` counts. ``max_tokens`` (OpenAI also
``max_completion_tokens``; Responses ``max_output_tokens``) is honoured: a longer reply is cut
to that many tokens with ``finish_reason: "length"`` / ``stop_reason: "max_tokens"`` / Responses
``status: "incomplete"``. Usage counts input tokens over every message text and output tokens
over the reply. Ids are derived from a hash of the request body and ``created`` is fixed, so
replies are byte-for-byte reproducible. Streams send one delta per word.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from flakestorm.chaos.llm import (
    JSON_HEADERS,
    SSE_HEADERS,
    LlmResponse,
    Provider,
    count_tokens,
    error_body,
    truncate_text,
)
from flakestorm.chaos.llm.protocol import json_object
from flakestorm.chaos.proxy.reply import HttpResponse, from_llm
from flakestorm.chaos.proxy.upstreams.base import Upstream, UpstreamRequest

__all__ = ["CREATED", "MOCK", "MODEL", "MockLlm", "mock_reply", "reply_text"]

MOCK = "mock"
"""``llm_upstream: mock`` selects the mock LLM."""
MODEL = "flakestorm-mock"
"""The model name of replies to requests that name none."""
CREATED = 1_767_225_600
"""The fixed creation time (2026-01-01T00:00:00Z) of every reply."""
_CREATED_ISO = "2026-01-01T00:00:00Z"
QUESTION_WORDS = 12

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?%?")
_WORD = re.compile(r"\s*\S+")


# --------------------------------------------------------------------------- reading requests


def _text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text")
        ]
        return "\n".join(texts)
    return ""


def _conversation(request: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(user texts, tool results, every text) of a request of any supported shape."""
    users: list[str] = []
    tools: list[str] = []
    every: list[str] = []
    for key in ("system", "instructions"):
        every.append(_text_of(request.get(key)))
    messages = request.get("messages")
    items: Any = messages if isinstance(messages, list) else request.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        items = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, list):
        items = [{"role": "user", "content": p} for p in prompt if isinstance(p, str)]
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        content = item.get("content")
        if item.get("type") == "function_call_output":
            tools.append(_text_of(item.get("output")))
        elif role in ("tool", "function"):
            tools.append(_text_of(content))
        elif role == "user":
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        tools.append(_text_of(block.get("content")))
            text = _text_of(content)
            if text.strip():
                users.append(text)
        every.append(_text_of(content))
    every += tools
    return users, tools, [t for t in every if t]


def _question(users: list[str]) -> str:
    if not users:
        return ""
    words = users[-1].split()
    cut = " ".join(words[:QUESTION_WORDS])
    return cut + ("..." if len(words) > QUESTION_WORDS else "")


def _facts(result: str) -> str:
    try:
        value = json.loads(result)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        facts = [
            f"{key}: {item}"
            for key, item in value.items()
            if isinstance(item, (str, int, float, bool)) or item is None
        ]
        if facts:
            return ", ".join(facts[:8])
    words = result.split()
    return " ".join(words[:30]) + ("..." if len(words) > 30 else "")


def reply_text(request: dict[str, Any]) -> str:
    """The mock's answer to a parsed request (see the module docstring)."""
    users, tools, _ = _conversation(request)
    question = _question(users)
    opening = f'Answer to "{question}":' if question else "Answer:"
    if tools:
        facts = "; ".join(_facts(result) for result in tools[-3:] if result.strip())
        return (
            f"{opening} according to the tool results, {facts or 'nothing'}. (source: tool results)"
        )
    numbers = _NUMBER.findall(question)
    said = f" The numbers mentioned are {', '.join(numbers)}." if numbers else ""
    return (
        f"{opening} this is a deterministic reply from the flakestorm mock LLM.{said} "
        "(source: flakestorm mock LLM; no live data)"
    )


# --------------------------------------------------------------------------- replies


class _Call:
    """One parsed request and the reply it gets."""

    def __init__(
        self,
        request: dict[str, Any],
        body: bytes,
        limit_keys: tuple[str, ...],
        text: str | None = None,
    ) -> None:
        self.request = request
        self.model = str(request.get("model") or MODEL)
        self.digest = hashlib.sha256(body).hexdigest()[:24]
        full = reply_text(request) if text is None else text
        limit = next(
            (request[k] for k in limit_keys if isinstance(request.get(k), int)),
            None,
        )
        if text is not None:
            limit = None  # a recorded reply is served as it was recorded
        self.text = full if limit is None else truncate_text(full, limit)
        self.cut = self.text != full or (limit is not None and count_tokens(full) > limit)
        _, _, every = _conversation(request)
        self.input_tokens = sum(count_tokens(t) for t in every)
        self.output_tokens = count_tokens(self.text)
        self.stream = request.get("stream") is True

    def words(self) -> list[str]:
        return _WORD.findall(self.text)


def _json(value: Any, status: int = 200) -> LlmResponse:
    return LlmResponse(status, JSON_HEADERS, body=json.dumps(value).encode("utf-8"))


def _sse(frames: Iterator[bytes]) -> LlmResponse:
    return LlmResponse(200, SSE_HEADERS, chunks=tuple(frames))


def _data(value: Any) -> bytes:
    return b"data: " + json.dumps(value).encode("utf-8") + b"\n\n"


def _event(value: dict[str, Any]) -> bytes:
    return f"event: {value['type']}\n".encode() + _data(value)


def _error(provider: Provider, status: int, message: str) -> LlmResponse:
    return LlmResponse(status, JSON_HEADERS, body=error_body(provider, status, message))


# -- OpenAI


def _chat(call: _Call) -> LlmResponse:
    finish = "length" if call.cut else "stop"
    base = {
        "id": f"chatcmpl-{call.digest}",
        "created": CREATED,
        "model": call.model,
        "system_fingerprint": "fp_flakestorm",
    }
    usage = {
        "prompt_tokens": call.input_tokens,
        "completion_tokens": call.output_tokens,
        "total_tokens": call.input_tokens + call.output_tokens,
    }
    if not call.stream:
        message = {"role": "assistant", "content": call.text, "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return _json({**base, "object": "chat.completion", "choices": [choice], "usage": usage})
    options = call.request.get("stream_options")
    with_usage = isinstance(options, dict) and options.get("include_usage") is True
    chunk: dict[str, Any] = {**base, "object": "chat.completion.chunk"}
    if with_usage:
        chunk["usage"] = None

    def frames() -> Iterator[bytes]:
        def choice(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}

        yield _data({**chunk, "choices": [choice({"role": "assistant", "content": ""}, None)]})
        for word in call.words():
            yield _data({**chunk, "choices": [choice({"content": word}, None)]})
        yield _data({**chunk, "choices": [choice({}, finish)]})
        if with_usage:
            yield _data({**chunk, "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    return _sse(frames())


def _completion(call: _Call) -> LlmResponse:
    finish = "length" if call.cut else "stop"
    base = {
        "id": f"cmpl-{call.digest}",
        "object": "text_completion",
        "created": CREATED,
        "model": call.model,
    }
    if not call.stream:
        choice = {"index": 0, "text": call.text, "logprobs": None, "finish_reason": finish}
        usage = {
            "prompt_tokens": call.input_tokens,
            "completion_tokens": call.output_tokens,
            "total_tokens": call.input_tokens + call.output_tokens,
        }
        return _json({**base, "choices": [choice], "usage": usage})

    def frames() -> Iterator[bytes]:
        for word in call.words():
            choice = {"index": 0, "text": word, "logprobs": None, "finish_reason": None}
            yield _data({**base, "choices": [choice]})
        yield _data({**base, "choices": [{"index": 0, "text": "", "finish_reason": finish}]})
        yield b"data: [DONE]\n\n"

    return _sse(frames())


def _response(call: _Call) -> LlmResponse:
    """A Responses API reply (``/responses``), whole or streamed."""
    status = "incomplete" if call.cut else "completed"
    item_id = f"msg_{call.digest}"
    part = {"type": "output_text", "text": call.text, "annotations": []}
    item = {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [part],
    }
    response: dict[str, Any] = {
        "id": f"resp_{call.digest}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if call.cut else None,
        "instructions": call.request.get("instructions"),
        "max_output_tokens": call.request.get("max_output_tokens"),
        "model": call.model,
        "output": [item],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "text": {"format": {"type": "text"}},
        "metadata": {},
        "usage": {
            "input_tokens": call.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": call.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": call.input_tokens + call.output_tokens,
        },
    }
    if not call.stream:
        return _json(response)
    return _sse(_response_events(call, response, item, part))


def _response_events(
    call: _Call, response: dict[str, Any], item: dict[str, Any], part: dict[str, Any]
) -> Iterator[bytes]:
    """A Responses API stream of ``response``: created, in progress, the item and its part
    added, a delta per word, then each done and the final event."""
    item_id = item["id"]
    seq = iter(range(1_000_000))
    started = {
        **response,
        "status": "in_progress",
        "output": [],
        "incomplete_details": None,
        "usage": None,
    }
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    yield _event({"type": "response.created", "sequence_number": next(seq), "response": started})
    yield _event(
        {"type": "response.in_progress", "sequence_number": next(seq), "response": started}
    )
    yield _event(
        {
            "type": "response.output_item.added",
            "sequence_number": next(seq),
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        }
    )
    yield _event(
        {
            "type": "response.content_part.added",
            "sequence_number": next(seq),
            **where,
            "part": {**part, "text": ""},
        }
    )
    for word in call.words():
        yield _event(
            {
                "type": "response.output_text.delta",
                "sequence_number": next(seq),
                **where,
                "delta": word,
                "logprobs": [],
            }
        )
    yield _event(
        {
            "type": "response.output_text.done",
            "sequence_number": next(seq),
            **where,
            "text": call.text,
            "logprobs": [],
        }
    )
    yield _event(
        {
            "type": "response.content_part.done",
            "sequence_number": next(seq),
            **where,
            "part": part,
        }
    )
    yield _event(
        {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": 0,
            "item": item,
        }
    )
    final = "response.incomplete" if call.cut else "response.completed"
    yield _event({"type": final, "sequence_number": next(seq), "response": response})


def _openai_models() -> LlmResponse:
    model = {"id": MODEL, "object": "model", "created": CREATED, "owned_by": "flakestorm"}
    return _json({"object": "list", "data": [model]})


# -- Anthropic


def _message(call: _Call) -> LlmResponse:
    stop = "max_tokens" if call.cut else "end_turn"
    message: dict[str, Any] = {
        "id": f"msg_{call.digest}",
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": [{"type": "text", "text": call.text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": call.input_tokens, "output_tokens": call.output_tokens},
    }
    if not call.stream:
        return _json(message)

    def frames() -> Iterator[bytes]:
        started = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": call.input_tokens, "output_tokens": 1},
        }
        yield _event({"type": "message_start", "message": started})
        yield _event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        yield _event({"type": "ping"})
        for word in call.words():
            delta = {"type": "text_delta", "text": word}
            yield _event({"type": "content_block_delta", "index": 0, "delta": delta})
        yield _event({"type": "content_block_stop", "index": 0})
        yield _event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": call.output_tokens},
            }
        )
        yield _event({"type": "message_stop"})

    return _sse(frames())


def _anthropic_models() -> LlmResponse:
    model = {
        "type": "model",
        "id": MODEL,
        "display_name": "flakestorm mock",
        "created_at": _CREATED_ISO,
    }
    return _json({"data": [model], "has_more": False, "first_id": MODEL, "last_id": MODEL})


# --------------------------------------------------------------------------- entry point

_OPENAI_ROUTES = (
    ("/chat/completions", _chat, ("max_completion_tokens", "max_tokens")),
    ("/completions", _completion, ("max_tokens",)),
    ("/responses", _response, ("max_output_tokens",)),
)


def mock_reply(
    provider: Provider, path: str, request_body: bytes, text: str | None = None
) -> LlmResponse:
    """The mock LLM's reply to a request for ``path`` (any prefix; a query string is ignored)
    with ``request_body`` (empty for ``GET .../models``). With ``text``, the reply says that
    instead (a recorded reply served by a replay, shaped like the mock's: whole or streamed,
    in the API the agent called)."""
    clean = path.split("?", 1)[0].rstrip("/")
    if clean.endswith("/models"):
        return _anthropic_models() if provider is Provider.ANTHROPIC else _openai_models()
    if provider is Provider.ANTHROPIC:
        if not clean.endswith(("/messages", "/messages/count_tokens")):
            return _error(provider, 404, f"Not found: {clean or '/'}")
        request = json_object(request_body)
        if request is None:
            return _error(provider, 400, "The request body is not a JSON object.")
        call = _Call(request, request_body, ("max_tokens",), text)
        if clean.endswith("/count_tokens"):
            return _json({"input_tokens": call.input_tokens})
        return _message(call)
    for suffix, build, limit_keys in _OPENAI_ROUTES:
        if clean.endswith(suffix):
            request = json_object(request_body)
            if request is None:
                return _error(provider, 400, "We could not parse the JSON body of your request.")
            return build(_Call(request, request_body, limit_keys, text))
    return _error(provider, 404, f"Invalid URL ({clean or '/'})")


# --------------------------------------------------------------------------- as an upstream


class MockLlm:
    """``llm_upstream: mock``: LLM API calls are answered by :func:`mock_reply`; anything else
    (tools, other traffic) goes on to ``network``."""

    def __init__(self, network: Upstream) -> None:
        self.network = network

    @classmethod
    def load(cls, argument: str) -> Callable[[Upstream], MockLlm]:
        """The mock takes no argument and needs nothing loaded."""
        return cls

    def send(self, request: UpstreamRequest) -> HttpResponse:
        call = request.call
        if not call.local:
            return self.network.send(request)
        assert call.provider is not None
        reply = from_llm(mock_reply(call.provider, call.rel_path, request.body))
        call.upstream_status = reply.status
        return reply
