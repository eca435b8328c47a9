"""The providers' protocols: routing, streaming requests, error bodies."""

from __future__ import annotations

import json

import pytest

from flakestorm.chaos.llm import (
    Provider,
    error_body,
    is_llm_path,
    is_streaming,
    provider_of,
)
from flakestorm.chaos.llm.protocol import dump_json, json_object

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
