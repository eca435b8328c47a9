"""The official ``openai`` and ``anthropic`` SDKs against the mock LLM with faults applied.

A loopback server plays the chaos proxy's LLM routes (``/llm/openai/v1/...``,
``/llm/anthropic/v1/...``): it answers with :func:`mock_reply` passed through the fault
functions, so each test proves a fault surfaces the way the SDK documents it.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from typing import Any

import pytest
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.llm import (
    RETRY_AFTER_S,
    LlmResponse,
    fault_before_upstream,
    fault_on_reply,
    fault_on_stream,
    is_streaming,
    provider_of,
)
from flakestorm.chaos.proxy.upstreams.mock_llm import mock_reply
from flakestorm.config import DriftType, LlmFault, LlmFaultMode

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")  # the HTTP client of both SDKs

QUESTION = "What is the current share price of ACME, and how did it move since 2024?"
MESSAGES = [{"role": "user", "content": QUESTION}]
CLIENT_TIMEOUT_S = 0.3
HOLD_MS = 5_000  # far longer than the client waits; released when the server stops


class FaultyLlm:
    """The proxy's LLM path in miniature: mock upstream, one fault on every call."""

    def __init__(self) -> None:
        self.fault: LlmFault | None = None
        self.clients: dict[tuple[str, float], Any] = {}
        self.server = LoopbackServer(self.handle)

    def handle(self, request: Request) -> Response:
        provider = provider_of(request.path)
        streaming = is_streaming(request.body)
        reply: LlmResponse | None = None
        if self.fault is not None:
            reply = fault_before_upstream(self.fault, provider, streaming)
        if reply is None:
            reply = mock_reply(provider, request.path, request.body)
            if self.fault is not None and reply.status == 200:
                rng = random.Random(11)
                if reply.chunks is not None:
                    chunks = fault_on_stream(self.fault, provider, reply.chunks, rng)
                    reply = dataclasses.replace(reply, chunks=tuple(chunks))
                else:
                    assert reply.body is not None
                    reply = fault_on_reply(
                        self.fault, provider, reply.status, reply.headers, reply.body, rng
                    )
        return self.send(reply)

    def send(self, reply: LlmResponse) -> Response:
        wait_s = reply.delay_ms / 1000
        if reply.drop:
            self.server.released.wait(wait_s)
            return Response(drop=True)
        if reply.stall_after_chunks is not None:
            return Response(
                reply.status, headers=dict(reply.headers), chunks=self.stall(reply, wait_s)
            )
        if wait_s:
            self.server.released.wait(wait_s)
        if reply.chunks is not None:
            return Response(reply.status, headers=dict(reply.headers), chunks=reply.chunks)
        return Response(reply.status, reply.body or b"", dict(reply.headers))

    def stall(self, reply: LlmResponse, wait_s: float) -> Iterator[bytes]:
        yield from (reply.chunks or ())[: reply.stall_after_chunks]
        self.server.released.wait(wait_s)


@pytest.fixture(scope="module")
def llm() -> Iterator[FaultyLlm]:
    faulty = FaultyLlm()
    with faulty.server:
        yield faulty


@pytest.fixture
def use(llm: FaultyLlm) -> Iterator[FaultyLlm]:
    yield llm
    llm.fault = None


def openai_client(llm: FaultyLlm, timeout: float = 5.0) -> openai.OpenAI:
    key = ("openai", timeout)
    if key not in llm.clients:  # one client (and connection pool) per timeout, like an agent
        llm.clients[key] = openai.OpenAI(
            base_url=llm.server.url_for("/llm/openai/v1"),
            api_key="test",
            max_retries=0,
            timeout=timeout,
        )
    client: openai.OpenAI = llm.clients[key]
    return client


def anthropic_client(llm: FaultyLlm, timeout: float = 5.0) -> anthropic.Anthropic:
    key = ("anthropic", timeout)
    if key not in llm.clients:
        llm.clients[key] = anthropic.Anthropic(
            base_url=llm.server.url_for("/llm/anthropic"),
            api_key="test",
            max_retries=0,
            timeout=timeout,
        )
    client: anthropic.Anthropic = llm.clients[key]
    return client


def chat(llm: FaultyLlm) -> openai.types.chat.ChatCompletion:
    return openai_client(llm).chat.completions.create(model="gpt-test", messages=MESSAGES)


def message(llm: FaultyLlm) -> anthropic.types.Message:
    return anthropic_client(llm).messages.create(
        model="claude-test", max_tokens=256, messages=MESSAGES
    )


def fault(mode: str, **fields: object) -> LlmFault:
    return LlmFault(mode=LlmFaultMode(mode), **fields)


# --------------------------------------------------------------------------- baseline


def test_mock_answers_both_sdks(use: FaultyLlm) -> None:
    completion = chat(use)
    assert completion.choices[0].finish_reason == "stop"
    assert QUESTION[:20] in (completion.choices[0].message.content or "")
    msg = message(use)
    assert msg.stop_reason == "end_turn"
    assert msg.content[0].type == "text" and QUESTION[:20] in msg.content[0].text
    models = openai_client(use).models.list()
    assert [m.id for m in models] == ["flakestorm-mock"]


# --------------------------------------------------------------------------- rate limit


def test_rate_limit_raises_openai_rate_limit_error(use: FaultyLlm) -> None:
    use.fault = fault("rate_limit")
    client = openai_client(use)
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    error = caught.value
    assert error.status_code == 429
    assert error.code == "rate_limit_exceeded"
    assert error.response.headers["retry-after"] == str(RETRY_AFTER_S)
    assert client._parse_retry_after_header(error.response.headers) == RETRY_AFTER_S
    with pytest.raises(openai.RateLimitError):  # a streaming request: 429 before any stream
        client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)


def test_rate_limit_raises_anthropic_rate_limit_error(use: FaultyLlm) -> None:
    use.fault = fault("rate_limit", delay_ms=2_000)
    client = anthropic_client(use)
    with pytest.raises(anthropic.RateLimitError) as caught:
        message(use)
    error = caught.value
    assert error.status_code == 429
    assert isinstance(error.body, dict) and error.body["error"]["type"] == "rate_limit_error"
    assert client._parse_retry_after_header(error.response.headers) == 2
    with (
        pytest.raises(anthropic.RateLimitError),
        client.messages.stream(model="c", max_tokens=64, messages=MESSAGES) as stream,
    ):
        stream.get_final_message()


# --------------------------------------------------------------------------- truncation


def test_truncated_openai_reply_finishes_on_length(use: FaultyLlm) -> None:
    use.fault = fault("truncated_response", max_tokens=5)
    completion = chat(use)
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == 'Answer to "What is'
    assert completion.usage is not None and completion.usage.completion_tokens == 5


def test_truncated_anthropic_reply_stops_on_max_tokens(use: FaultyLlm) -> None:
    use.fault = fault("truncated_response", max_tokens=5)
    msg = message(use)
    assert msg.stop_reason == "max_tokens"
    assert msg.content[0].type == "text" and msg.content[0].text == 'Answer to "What is'
    assert msg.usage.output_tokens == 5


def test_truncated_openai_stream_ends_cleanly_on_length(use: FaultyLlm) -> None:
    use.fault = fault("truncated_response", max_tokens=5)
    stream = openai_client(use).chat.completions.create(
        model="gpt-test",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)  # ends without error
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert text == 'Answer to "What is'
    assert finishes[-1] == "length" and finishes.count("length") == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    # the SDK's stream helper reports a length finish the way it documents: by raising
    with (
        openai_client(use).chat.completions.stream(model="g", messages=MESSAGES) as helper,
        pytest.raises(openai.LengthFinishReasonError) as caught,
    ):
        helper.get_final_completion()
    final = caught.value.completion
    assert final.choices[0].finish_reason == "length"
    assert final.choices[0].message.content == 'Answer to "What is'


def test_truncated_anthropic_stream_ends_cleanly_on_max_tokens(use: FaultyLlm) -> None:
    use.fault = fault("truncated_response", max_tokens=5)
    client = anthropic_client(use)
    with client.messages.stream(model="c", max_tokens=256, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == 'Answer to "What is'
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 5
    events = list(client.messages.create(model="c", max_tokens=256, messages=MESSAGES, stream=True))
    assert [e.type for e in events][-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_truncated_responses_api_is_incomplete(use: FaultyLlm) -> None:
    use.fault = fault("truncated_response", max_tokens=5)
    response = openai_client(use).responses.create(model="gpt-test", input=QUESTION)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == 'Answer to "What is'
    events = list(
        openai_client(use).responses.create(model="gpt-test", input=QUESTION, stream=True)
    )
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == 'Answer to "What is'
    assert events[-1].type == "response.incomplete"  # the event the API ends such a stream with
    assert events[-1].response.status == "incomplete"
    assert events[-1].response.output_text == text


# --------------------------------------------------------------------------- empty, garbage, drift


def test_empty_reply_has_empty_content(use: FaultyLlm) -> None:
    use.fault = fault("empty")
    completion = chat(use)
    assert completion.choices[0].message.content == ""
    assert completion.choices[0].finish_reason == "stop"
    msg = message(use)
    assert msg.content[0].type == "text" and msg.content[0].text == ""
    with anthropic_client(use).messages.stream(model="c", max_tokens=99, messages=MESSAGES) as s:
        assert "".join(s.text_stream) == ""
        assert s.get_final_message().stop_reason == "end_turn"
    chunks = list(
        openai_client(use).chat.completions.create(model="g", messages=MESSAGES, stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ""
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_garbage_is_a_valid_reply_with_changed_content(use: FaultyLlm) -> None:
    clean = chat(use).choices[0].message.content
    use.fault = fault("garbage")
    completion = chat(use)
    assert completion.object == "chat.completion"
    assert completion.choices[0].finish_reason == "stop"
    garbled = completion.choices[0].message.content
    assert garbled and garbled != clean and "ACME" not in garbled
    msg = message(use)
    assert msg.content[0].type == "text" and "ACME" not in msg.content[0].text
    with anthropic_client(use).messages.stream(model="c", max_tokens=99, messages=MESSAGES) as s:
        streamed = "".join(s.text_stream)
    assert streamed and "ACME" not in streamed


@pytest.mark.parametrize("drift", list(DriftType))
def test_drift_is_a_valid_reply_with_changed_content(use: FaultyLlm, drift: DriftType) -> None:
    clean = chat(use).choices[0].message.content
    use.fault = fault("response_drift", drift_type=drift)
    drifted = chat(use).choices[0].message.content
    msg = message(use)
    assert msg.content[0].type == "text"
    with openai_client(use).chat.completions.stream(model="g", messages=MESSAGES) as stream:
        streamed = stream.get_final_completion().choices[0].message.content
    assert streamed == drifted
    if drift is not DriftType.JSON_FIELD_RENAME:  # the mock's prose names no identifiers
        assert drifted != clean


# --------------------------------------------------------------------------- timeout


def test_timeout_raises_openai_api_timeout_error(use: FaultyLlm) -> None:
    use.fault = fault("timeout", delay_ms=HOLD_MS)
    client = openai_client(use, timeout=CLIENT_TIMEOUT_S)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)


def test_timeout_on_a_stream_stalls_after_it_opened(use: FaultyLlm) -> None:
    use.fault = fault("timeout", delay_ms=HOLD_MS)
    client = openai_client(use, timeout=CLIENT_TIMEOUT_S)
    stream = client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    assert stream.response.status_code == 200  # the stream opened...
    with pytest.raises(openai.APITimeoutError):  # ...and then nothing came
        list(stream)


def test_timeout_raises_anthropic_api_timeout_error(use: FaultyLlm) -> None:
    use.fault = fault("timeout", delay_ms=HOLD_MS)
    client = anthropic_client(use, timeout=CLIENT_TIMEOUT_S)
    with pytest.raises(anthropic.APITimeoutError):
        client.messages.create(model="c", max_tokens=64, messages=MESSAGES)
    # a stream that opened and stalls: this SDK lets its HTTP client's read timeout through
    with client.messages.stream(model="c", max_tokens=64, messages=MESSAGES) as stream:
        assert stream.response.status_code == 200
        with pytest.raises(httpx2.ReadTimeout):
            stream.get_final_message()
