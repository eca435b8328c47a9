"""Through the chaos proxy too, a fault that matched a call but could not be applied to its reply
is logged as unapplied with the reason, not as fired (SPEC §10): delivery then errors the
scenario."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.delivery.interactions import Interaction
from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import ContextAttack, LlmFault

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def odd(request: Request) -> Response:
    """An upstream whose 2xx replies are no provider's shape, whole or streamed."""
    if request.path.startswith("/tool"):
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=[b"data: a\n\n"])
    if request.json().get("stream"):
        return Response(
            200, headers={"Content-Type": "text/event-stream"}, chunks=[b"data: hi\n\n"]
        )
    return Response.json({"answer": "sunny"})


@pytest.fixture
def proxy() -> Iterator[ChaosProxy]:
    with (
        LoopbackServer(odd) as upstream,
        ChaosProxy(llm_upstream=upstream.url, tools={"weather": upstream.url_for("/tool")}) as p,
    ):
        yield p


def last(proxy: ChaosProxy) -> Interaction:
    return proxy.log.snapshot(wait_s=5)[-1]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_llm_fault_on_a_reply_of_no_known_shape_is_unapplied(
    proxy: ChaosProxy, stream: bool
) -> None:
    fault = LlmFault.model_validate({"mode": "garbage"})
    proxy.activate(ActiveScenario("odd", 1, llm_faults=(fault,)))
    reply = requests.post(
        f"{proxy.url}/llm/openai/v1/chat/completions", json={**CHAT, "stream": stream}, timeout=5
    )
    assert reply.status_code == 200
    assert reply.text.strip() in ('{"answer": "sunny"}', "data: hi")  # passed through as it was
    call = last(proxy)
    assert call.matched == ("llm_faults[0] garbage",) and call.fired == ()
    [(label, why)] = call.unapplied
    assert label == "llm_faults[0] garbage"
    assert why == (
        "the stream was not an OpenAI or Anthropic server-sent event stream"
        if stream
        else "upstream's reply is not an OpenAI or Anthropic reply document flakestorm can edit"
    )


def test_a_tool_result_attack_on_a_streamed_tool_reply_is_unapplied(proxy: ChaosProxy) -> None:
    attack = ContextAttack.model_validate(
        {"type": "indirect_injection", "payloads": ["obey me"], "tool": "weather"}
    )
    proxy.activate(ActiveScenario("odd", 1, context_attacks=(attack,)))
    assert requests.get(f"{proxy.url}/tools/weather/today", timeout=5).text == "data: a\n\n"
    call = last(proxy)
    assert call.unapplied == (
        (
            "context_attacks[0] indirect_injection",
            "the tool's reply is streamed: tool-result attacks poison whole replies",
        ),
    )
