"""The four LLM API shapes of the mock LLM, and how an agent reads a reply of each, whole or
streamed: shared by the tests of :mod:`flakestorm.chaos.llm.replies` and
:mod:`flakestorm.chaos.llm.streams`, which check every fault mode on every shape."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from flakestorm.chaos.llm import LlmResponse, Provider, fault_on_reply, fault_on_stream
from flakestorm.chaos.proxy.upstreams.mock_llm import mock_reply
from flakestorm.config import DriftType, LlmFault, LlmFaultMode

QUESTION = "Please explain in detail why the sky looks blue on a clear summer afternoon, 2024."


def fault(mode: str, **fields: Any) -> LlmFault:
    return LlmFault(mode=LlmFaultMode(mode), **fields)


TEXT_FAULTS = [
    fault("truncated_response", max_tokens=7),
    fault("empty"),
    fault("garbage"),
    fault("response_drift", drift_type=DriftType.TONE_SHIFT),
    fault("response_drift", drift_type=DriftType.VERBOSITY_SHIFT),
    fault("response_drift"),
]
"""One fault of each content mode (the text of a reply changes), and a drift drawn at random."""
TEXT_FAULT_IDS = ["truncated", "empty", "garbage", "tone_shift", "verbosity_shift", "drawn_drift"]


@dataclass(frozen=True)
class Api:
    name: str
    provider: Provider
    path: str

    def request(self, stream: bool) -> bytes:
        if self.name == "completions":
            doc: dict[str, Any] = {"model": "m", "prompt": QUESTION}
        elif self.name == "responses":
            doc = {"model": "m", "input": QUESTION, "instructions": "Be brief."}
        else:
            doc = {
                "model": "m",
                "max_tokens": 500,
                "messages": [{"role": "user", "content": QUESTION}],
            }
        if stream:
            doc["stream"] = True
        return json.dumps(doc).encode()

    def reply(self, stream: bool) -> LlmResponse:
        return mock_reply(self.provider, self.path, self.request(stream))


APIS = [
    Api("chat", Provider.OPENAI, "/llm/openai/v1/chat/completions"),
    Api("completions", Provider.OPENAI, "/v1/completions"),
    Api("responses", Provider.OPENAI, "/v1/responses"),
    Api("messages", Provider.ANTHROPIC, "/v1/messages"),
]
API_IDS = [api.name for api in APIS]

LENGTH = {"chat": "length", "completions": "length", "responses": "max_output_tokens"}
"""The stop reason of a cut reply (Anthropic messages: ``max_tokens``)."""
NATURAL = {"chat": "stop", "completions": "stop", "responses": "completed", "messages": "end_turn"}
"""The stop reason of a reply that ended on its own."""


@dataclass
class Seen:
    """What an agent reads from a reply: its text, stop reason and output token count."""

    text: str
    stop: str | None
    output_tokens: int | None
    tools: int = 0


def read_whole(api: str, body: bytes) -> Seen:
    doc = json.loads(body)
    if api == "chat":
        choice = doc["choices"][0]
        tools = len(choice["message"].get("tool_calls") or [])
        content = choice["message"]["content"]
        return Seen(content, choice["finish_reason"], doc["usage"]["completion_tokens"], tools)
    if api == "completions":
        choice = doc["choices"][0]
        return Seen(choice["text"], choice["finish_reason"], doc["usage"]["completion_tokens"])
    if api == "responses":
        text = "".join(
            part["text"]
            for item in doc["output"]
            if item["type"] == "message"
            for part in item["content"]
        )
        tools = sum(1 for item in doc["output"] if item["type"] == "function_call")
        reason = (doc.get("incomplete_details") or {}).get("reason") or doc["status"]
        return Seen(text, reason, doc["usage"]["output_tokens"], tools)
    text = "".join(b["text"] for b in doc["content"] if b["type"] == "text")
    tools = sum(1 for b in doc["content"] if b["type"] == "tool_use")
    return Seen(text, doc["stop_reason"], doc["usage"]["output_tokens"], tools)


def frames_of(chunks: list[bytes]) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for chunk in chunks:
        assert chunk.endswith(b"\n\n"), chunk  # every chunk is one complete frame
        event = None
        data = None
        for line in chunk.decode().splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        assert data is not None
        out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


def read_stream(api: str, chunks: list[bytes]) -> Seen:
    frames = frames_of(chunks)
    text = ""
    stop = None
    tokens = None
    tools = 0
    if api in ("chat", "completions"):
        assert frames[-1][1] == "[DONE]"
        for _, doc in frames[:-1]:
            for choice in doc["choices"]:
                if api == "chat":
                    text += choice["delta"].get("content") or ""
                    tools += len(choice["delta"].get("tool_calls") or [])
                else:
                    text += choice.get("text") or ""
                stop = choice["finish_reason"] or stop
            if doc.get("usage"):
                tokens = doc["usage"]["completion_tokens"]
        return Seen(text, stop, tokens, tools)
    if api == "responses":
        final = frames[-1][1]
        assert final["type"] in ("response.completed", "response.incomplete")
        done = ""
        for _, doc in frames:
            if doc["type"] == "response.output_text.delta":
                text += doc["delta"]
            if doc["type"] == "response.output_text.done":
                done = doc["text"]
        assert done == text  # the deltas add up to the done event's text
        whole = read_whole("responses", json.dumps(final["response"]).encode())
        assert whole.text == text
        return whole
    assert [e for e, _ in frames][-1] == "message_stop"
    indexes = []
    for event, doc in frames:
        assert event == doc["type"]
        if event == "content_block_start":
            indexes.append(doc["index"])
            tools += doc["content_block"]["type"] == "tool_use"
        if event == "content_block_delta" and doc["delta"]["type"] == "text_delta":
            text += doc["delta"]["text"]
        if event == "message_delta":
            stop = doc["delta"]["stop_reason"]
            tokens = doc["usage"]["output_tokens"]
    assert indexes == list(range(len(indexes)))  # block indexes stay contiguous
    return Seen(text, stop, tokens, tools)


def apply(api: Api, flt: LlmFault, stream: bool, seed: int = 7) -> Seen:
    """What the agent reads when ``flt`` transforms the mock's reply to ``api``."""
    reply = api.reply(stream)
    rng = random.Random(seed)
    if stream:
        assert reply.chunks is not None
        # split upstream bytes at awkward places: the transform must reassemble frames
        raw = b"".join(reply.chunks)
        pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]
        out = list(fault_on_stream(flt, api.provider, pieces, rng))
        return read_stream(api.name, out)
    assert reply.body is not None
    result = fault_on_reply(flt, api.provider, reply.status, reply.headers, reply.body, rng)
    assert result.status == 200
    assert result.body is not None
    return read_whole(api.name, result.body)


def baseline(api: Api, stream: bool) -> Seen:
    """What the agent reads from the mock's reply to ``api`` with no fault."""
    reply = api.reply(stream)
    if stream:
        assert reply.chunks is not None
        return read_stream(api.name, list(reply.chunks))
    assert reply.body is not None
    return read_whole(api.name, reply.body)


def sse(*docs: Any, anthropic: bool = False) -> list[bytes]:
    """One SSE frame per document (a string is sent as is, e.g. ``"[DONE]"``); Anthropic
    frames carry an ``event:`` line."""
    out = []
    for doc in docs:
        data = doc if isinstance(doc, str) else json.dumps(doc)
        head = f"event: {doc['type']}\n" if anthropic and not isinstance(doc, str) else ""
        out.append(f"{head}data: {data}\n\n".encode())
    return out
