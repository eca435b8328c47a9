"""A Pydantic AI agent under flakestorm (SPEC §10): its ``Tool`` wrapped from the inside and its
SDK method wrapped (OpenAI ``AsyncCompletions.create``, Anthropic ``AsyncMessages.create`` of
the beta API it uses), driven by a fake OpenAI / Anthropic server that calls the tool, whole
and streamed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.exceptions import ModelRateLimitError, ModelTimeoutError, UnexpectedModelBehavior
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from support.framework_rig import (
    OPENAI_ASYNC,
    PAYLOAD,
    Rig,
    llm_fault,
    text_fault,
    tool_fault,
    wrapped,
)
from support.server import LoopbackServer
from support.tool_provider import answer_to, tool_provider

from flakestorm.chaos.faults.labels import tool_fault_label
from flakestorm.chaos.llm import truncate_text
from flakestorm.errors import ToolFaultError

ANTHROPIC_BETA = "anthropic.resources.beta.messages:AsyncMessages.create"


def _get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


get_weather = Tool(_get_weather, name="get_weather")
RESULT = "sunny in Paris"

PROVIDERS = {"openai": OPENAI_ASYNC, "anthropic": ANTHROPIC_BETA}
SDK_ERRORS = {"openai": openai, "anthropic": anthropic}


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as s:
        yield s


@pytest.fixture(params=list(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(server: LoopbackServer, provider: str, *, stream: bool) -> str:
    async def handler(_: RunContext[None], events: AsyncIterable[Any]) -> None:
        async for _event in events:
            pass

    async def main() -> str:
        client: Any
        if provider == "openai":
            client = openai.AsyncOpenAI(base_url=server.url_for("/v1"), api_key="k", max_retries=0)
            model: Any = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client))
        else:
            client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
            model = AnthropicModel(
                "claude-test", provider=AnthropicProvider(anthropic_client=client)
            )
        agent = Agent(model, tools=[get_weather])
        try:
            result = await agent.run(
                "Weather in Paris?", event_stream_handler=handler if stream else None
            )
            return str(result.output)
        finally:
            await client.close()

    return asyncio.run(main())


@pytest.fixture
def rig(provider: str) -> Iterator[Rig]:
    with wrapped(llm=PROVIDERS[provider], tools=[f"{__name__}:get_weather"]) as r:
        yield r


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


@STREAMS
def test_with_no_fault_the_agent_answers_as_unwrapped(
    server: LoopbackServer, provider: str, stream: bool
) -> None:
    unwrapped = run(server, provider, stream=stream)
    function = get_weather.function
    with wrapped(llm=PROVIDERS[provider], tools=[f"{__name__}:get_weather"]) as rig:
        assert run(server, provider, stream=stream) == unwrapped == answer_to(RESULT)
        assert get_weather.name == "get_weather" and get_weather.function is not function
        calls = rig.interactions()
    assert [(i.target.value, i.fired) for i in calls] == [("llm", ()), ("tool", ()), ("llm", ())]
    assert get_weather.function is function is get_weather.function_schema.function


@STREAMS
@pytest.mark.parametrize(
    ("fault", "told"),
    [
        (tool_fault("malicious_response", payload=PAYLOAD), PAYLOAD),
        (tool_fault("slow", delay_ms=5), RESULT),
    ],
    ids=["malicious_response", "slow"],
)
def test_tool_results_reach_the_model(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool, fault: Any, told: str
) -> None:
    rig.activate(fault)
    assert run(server, provider, stream=stream) == answer_to(told)
    assert rig.fired() == [tool_fault_label(0, fault)]


@pytest.mark.parametrize(
    ("fault", "raised"),
    [(tool_fault("error"), ToolFaultError), (tool_fault("timeout", delay_ms=5), TimeoutError)],
    ids=["error", "timeout"],
)
def test_tool_errors_end_the_run_as_pydantic_ai_lets_them(
    server: LoopbackServer, provider: str, rig: Rig, fault: Any, raised: type[Exception]
) -> None:
    """Pydantic AI retries a tool only on ``ModelRetry``: any other error ends the run."""
    rig.activate(fault)
    with pytest.raises(raised):
        run(server, provider, stream=False)


@STREAMS
def test_a_rate_limit_is_the_sdk_error_pydantic_ai_categorises(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("rate_limit"))
    with pytest.raises(ModelRateLimitError) as raised:
        run(server, provider, stream=stream)
    assert raised.value.status_code == 429
    assert isinstance(raised.value.__cause__, SDK_ERRORS[provider].RateLimitError)


@STREAMS
def test_an_llm_timeout_is_the_sdk_timeout(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("timeout", delay_ms=5))
    with pytest.raises(ModelTimeoutError) as raised:
        run(server, provider, stream=stream)
    assert isinstance(raised.value.__cause__, SDK_ERRORS[provider].APITimeoutError)
    assert rig.waits_s == [0.005]


@STREAMS
def test_a_truncated_reply_is_the_output_cut(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("truncated_response", max_tokens=3, after_calls=1))
    assert run(server, provider, stream=stream) == truncate_text(answer_to(RESULT), 3)
    assert rig.fired() == ["llm_faults[0] truncated_response(3 tokens)"]


@STREAMS
@pytest.mark.parametrize("mode", ["garbage", "response_drift"])
def test_text_faults_reach_the_output(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool, mode: str
) -> None:
    rig.activate(text_fault(mode))
    answer = run(server, provider, stream=stream)
    assert answer and answer != answer_to(RESULT)
    assert [label.split("(")[0] for label in rig.fired()] == [f"llm_faults[0] {mode}"]


@STREAMS
def test_an_empty_reply_makes_pydantic_ai_retry_then_give_up(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool
) -> None:
    rig.activate(text_fault("empty"))
    with pytest.raises(UnexpectedModelBehavior, match="output retries"):
        run(server, provider, stream=stream)
    assert rig.fired() == ["llm_faults[0] empty"] * 2  # the first answer and its retry


@STREAMS
def test_a_malformed_tool_result_reaches_the_model(
    server: LoopbackServer, provider: str, rig: Rig, stream: bool
) -> None:
    rig.activate(tool_fault("malformed"))
    answer = run(server, provider, stream=stream)
    assert answer.startswith("The tool said: ") and answer != answer_to(RESULT)
    assert rig.fired() == ["tool_faults[0] malformed on get_weather"]
