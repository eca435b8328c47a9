"""Through the real in-process proxy, an LLM call's interaction carries the usage its upstream
reported (whole and streamed), and a call a fault answered in place of the LLM has none."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import LlmFault
from flakestorm.results.usage import Counted, Usage

REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
    ],
    "usage": {
        "prompt_tokens": 130,
        "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 64},
    },
}
STREAM = [
    b'data: {"object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": '
    b'[{"index": 0, "delta": {"content": "4',
    b'2"}, "finish_reason": "stop"}]}\n\ndata: {"object": "chat.completion.chunk", '
    b'"model": "gpt-4o-mini", "choices": [], "usage": {"prompt_tokens": 7',
    b'7, "completion_tokens": 5}}\n\nda',
    b"ta: [DONE]\n\n",
]


def upstream(request: Request) -> Response:
    if request.json().get("stream"):
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=STREAM)
    return Response.json(REPLY)


@pytest.fixture
def proxy() -> Iterator[ChaosProxy]:
    with (
        LoopbackServer(upstream) as server,
        ChaosProxy(llm_upstream=server.url, upstream_timeout_s=5) as p,
    ):
        yield p


def ask(proxy: ChaosProxy, stream: bool = False) -> requests.Response:
    body: dict[str, object] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return requests.post(f"{proxy.url}/llm/openai/v1/chat/completions", json=body, timeout=5)


def test_a_whole_reply_carries_the_upstream_usage(proxy: ChaosProxy) -> None:
    assert ask(proxy).status_code == 200
    item = proxy.log.snapshot(wait_s=5)[-1]
    assert item.usage == Usage(input=66, output=9, cache_read=64, model="gpt-4o-2024-08-06")


def test_a_streamed_reply_carries_its_usage_chunk(proxy: ChaosProxy) -> None:
    reply = ask(proxy, stream=True)
    assert b"[DONE]" in reply.content
    item = proxy.log.snapshot(wait_s=5)[-1]
    assert item.usage == Usage(input=77, output=5, model="gpt-4o-mini")


def test_a_rate_limited_call_is_an_attempt_without_usage(proxy: ChaosProxy) -> None:
    fault = LlmFault.model_validate({"mode": "rate_limit"})
    proxy.activate(ActiveScenario("429", 1, llm_faults=(fault,)))
    assert ask(proxy).status_code == 429
    item = proxy.log.snapshot(wait_s=5)[-1]
    assert item.fired and item.usage is None


def test_a_content_fault_meters_what_the_upstream_sent(proxy: ChaosProxy) -> None:
    fault = LlmFault.model_validate({"mode": "empty"})
    proxy.activate(ActiveScenario("empty", 1, llm_faults=(fault,)))
    reply = ask(proxy)
    assert reply.json()["choices"][0]["message"]["content"] == ""
    item = proxy.log.snapshot(wait_s=5)[-1]
    assert item.usage is not None and item.usage.counted is Counted.REPORTED
    assert (item.usage.input, item.usage.output) == (66, 9)


def test_a_tool_call_has_no_usage() -> None:
    with (
        LoopbackServer(lambda r: Response.json({"ok": json.dumps(REPLY)})) as tool,
        ChaosProxy(tools={"quotes": tool.url}) as p,
    ):
        assert requests.post(f"{p.url}/tools/quotes", json={}, timeout=5).status_code == 200
        assert p.log.snapshot(wait_s=5)[-1].usage is None


def test_a_faulted_stream_bills_what_the_upstream_streamed(proxy: ChaosProxy) -> None:
    fault = LlmFault.model_validate({"mode": "empty"})
    proxy.activate(ActiveScenario("empty", 1, llm_faults=(fault,)))
    reply = ask(proxy, stream=True)
    assert b"[DONE]" in reply.content and b"42" not in reply.content
    item = proxy.log.snapshot(wait_s=5)[-1]
    assert item.usage == Usage(input=77, output=5, model="gpt-4o-mini")
