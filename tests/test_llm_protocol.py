"""The providers' protocols: routing, streaming requests, error bodies, and the faults that
replace the upstream call (``rate_limit``, ``timeout``)."""

from __future__ import annotations

import json

import pytest
from support.llm_shapes import fault

from flakestorm.chaos.llm import (
    DEFAULT_TIMEOUT_MS,
    RETRY_AFTER_S,
    STALL_COMMENT,
    Provider,
    error_body,
    fault_before_upstream,
    is_llm_path,
    is_streaming,
    provider_of,
    rate_limit_body,
)
from flakestorm.chaos.llm.protocol import dump_json, json_object

# --------------------------------------------------------------------------- rate limit, timeout


@pytest.mark.parametrize("mode", ["truncated_response", "empty", "garbage", "response_drift"])
def test_content_modes_need_the_upstream_reply(mode: str) -> None:
    for provider in Provider:
        for streaming in (False, True):
            assert fault_before_upstream(fault(mode), provider, streaming) is None


def test_rate_limit_openai_shape() -> None:
    got = fault_before_upstream(fault("rate_limit"), Provider.OPENAI, streaming=True)
    assert got is not None and got.body is not None
    assert got.status == 429
    headers = dict(got.headers)
    assert headers["retry-after"] == str(RETRY_AFTER_S)
    assert headers["content-type"] == "application/json"
    error = json.loads(got.body)["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert error["type"] == "requests"
    assert error["param"] is None and "Rate limit" in error["message"]
    assert got.body == rate_limit_body(Provider.OPENAI)


def test_rate_limit_anthropic_shape() -> None:
    got = fault_before_upstream(fault("rate_limit"), Provider.ANTHROPIC, streaming=False)
    assert got is not None and got.body is not None
    doc = json.loads(got.body)
    assert doc["type"] == "error"
    assert doc["error"]["type"] == "rate_limit_error"
    assert doc["error"]["message"]


def test_rate_limit_delay_sets_retry_after_in_whole_seconds() -> None:
    got = fault_before_upstream(fault("rate_limit", delay_ms=2500), Provider.OPENAI, False)
    assert got is not None
    assert dict(got.headers)["retry-after"] == "3"


def test_timeout_drops_after_delay() -> None:
    got = fault_before_upstream(fault("timeout"), Provider.OPENAI, streaming=False)
    assert got is not None
    assert got.drop and got.delay_ms == DEFAULT_TIMEOUT_MS and got.body is None


def test_timeout_on_a_stream_opens_it_then_stalls() -> None:
    got = fault_before_upstream(fault("timeout", delay_ms=50), Provider.ANTHROPIC, streaming=True)
    assert got is not None
    assert got.status == 200 and not got.drop
    assert got.chunks == (STALL_COMMENT,) and got.stall_after_chunks == 1 and got.delay_ms == 50
    assert dict(got.headers)["content-type"].startswith("text/event-stream")


# --------------------------------------------------------------------------- error bodies


def test_error_body_kinds_follow_the_status() -> None:
    anthropic = json.loads(error_body(Provider.ANTHROPIC, 529, "busy"))
    assert anthropic == {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    assert json.loads(error_body(Provider.ANTHROPIC, 502, "x"))["error"]["type"] == "api_error"
    openai = json.loads(error_body(Provider.OPENAI, 404, "nope"))["error"]
    assert openai == {
        "message": "nope",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert json.loads(error_body(Provider.OPENAI, 503, "x"))["error"]["type"] == "server_error"
    assert json.loads(error_body(Provider.OPENAI, 400, "x", "own"))["error"]["type"] == "own"


# --------------------------------------------------------------------------- routing


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/llm/openai/v1/chat/completions", Provider.OPENAI),
        ("/llm/anthropic/v1/messages", Provider.ANTHROPIC),
        ("/v1/messages", Provider.ANTHROPIC),
        ("/v1/messages?beta=true", Provider.ANTHROPIC),
        ("/v1/chat/completions", Provider.OPENAI),
        ("/v1/completions", Provider.OPENAI),
        ("/v1/responses", Provider.OPENAI),
        ("/v1/threads/t1/messages", Provider.OPENAI),
        ("https://api.anthropic.com/v1/complete", Provider.ANTHROPIC),
        ("http://llm.internal/v1/messages", Provider.ANTHROPIC),
    ],
)
def test_provider_of(path: str, provider: Provider) -> None:
    assert provider_of(path) is provider


def test_is_llm_path() -> None:
    for path in (
        "/v1/chat/completions",
        "/v1/completions/",
        "/openai/deployments/x/chat/completions?api-version=1",
        "/v1/responses",
        "/llm/anthropic/v1/messages",
        "http://h/v1/messages",
    ):
        assert is_llm_path(path), path
    for path in ("/v1/models", "/v1/embeddings", "/v1/responses/resp_1", "/tools/x"):
        assert not is_llm_path(path), path


def test_is_streaming() -> None:
    assert is_streaming(b'{"stream": true}')
    assert not is_streaming(b'{"stream": "true"}')
    assert not is_streaming(b"{}")
    assert not is_streaming(b"not json")
    assert not is_streaming(b"[1]")


# --------------------------------------------------------------------------- JSON bodies


def test_json_object_and_dump_json() -> None:
    assert json_object(b'{"a": 1}') == {"a": 1}
    assert json_object(b"[1]") is None and json_object(b"\xff") is None
    assert dump_json({"t": "héllo"}) == '{"t": "héllo"}'.encode()
    # a lone surrogate (half of an emoji split across deltas) is sent escaped, as it came
    assert dump_json({"t": "\ud83d"}) == b'{"t": "\\ud83d"}'
