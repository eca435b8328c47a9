"""An OpenAI Agents SDK agent under flakestorm (SPEC §10): its ``FunctionTool`` wrapped from the
inside and its ``AsyncCompletions.create`` wrapped, driven by a fake OpenAI server that calls
the tool, whole and streamed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from agents.retry import ModelRetrySettings, RetryDecision, RetryPolicyContext
from support.framework_rig import (
    OPENAI_ASYNC,
    PAYLOAD,
    TEXT_MODES,
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

CALLS: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    CALLS.append(city)
    return f"sunny in {city}"


RESULT = "sunny in Paris"
ERROR_RESULT = "An error occurred while running the tool. Please try again."
"""What the SDK's default failure handler tells the model when a tool raises."""


@pytest.fixture(scope="module")
def provider() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as server:
        yield server


def run(provider: LoopbackServer, *, stream: bool, settings: ModelSettings | None = None) -> str:
    async def main() -> str:
        client = openai.AsyncOpenAI(base_url=provider.url_for("/v1"), api_key="k", max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
        agent = Agent(
            name="weather",
            instructions="Answer with the tool.",
            tools=[get_weather],
            model=model,
            model_settings=settings or ModelSettings(),
        )
        config = RunConfig(tracing_disabled=True)
        try:
            if not stream:
                result = await Runner.run(agent, "Weather in Paris?", run_config=config)
                return str(result.final_output)
            streamed = Runner.run_streamed(agent, "Weather in Paris?", run_config=config)
            async for _ in streamed.stream_events():
                pass
            return str(streamed.final_output)
        finally:
            await client.close()

    return asyncio.run(main())


@pytest.fixture
def rig() -> Iterator[Rig]:
    with wrapped(llm=OPENAI_ASYNC, tools=[f"{__name__}:get_weather"]) as r:
        yield r


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


@STREAMS
def test_with_no_fault_the_agent_answers_as_unwrapped(
    provider: LoopbackServer, stream: bool
) -> None:
    unwrapped = run(provider, stream=stream)
    tool = get_weather
    with wrapped(llm=OPENAI_ASYNC, tools=[f"{__name__}:get_weather"]) as rig:
        assert run(provider, stream=stream) == unwrapped == answer_to(RESULT)
        assert get_weather is tool and isinstance(tool, FunctionTool)
        assert tool.name == "get_weather" and "city" in tool.params_json_schema["properties"]
        calls = rig.interactions()
    assert [(i.target.value, i.fired) for i in calls] == [("llm", ()), ("tool", ()), ("llm", ())]
    assert run(provider, stream=stream) == unwrapped  # restored


@STREAMS
@pytest.mark.parametrize(
    ("fault", "told"),
    [
        (tool_fault("error"), ERROR_RESULT),
        (tool_fault("timeout", delay_ms=5), ERROR_RESULT),
        (tool_fault("malicious_response", payload=PAYLOAD), PAYLOAD),
        (tool_fault("slow", delay_ms=5), RESULT),
    ],
    ids=["error", "timeout", "malicious_response", "slow"],
)
def test_tool_faults_reach_the_sdk_tool_pipeline(
    provider: LoopbackServer, rig: Rig, stream: bool, fault: Any, told: str
) -> None:
    rig.activate(fault)
    assert run(provider, stream=stream) == answer_to(told)
    assert rig.fired() == [tool_fault_label(0, fault)]


@STREAMS
def test_a_malformed_tool_result_reaches_the_model(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(tool_fault("malformed"))
    answer = run(provider, stream=stream)
    assert answer.startswith("The tool said: ") and answer != answer_to(RESULT)


@STREAMS
def test_the_retry_policy_sees_openai_rate_limit_error_with_retry_after(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    seen: list[RetryPolicyContext] = []

    def policy(context: RetryPolicyContext) -> RetryDecision:
        seen.append(context)
        return RetryDecision(retry=True, delay=0)  # not the 1 s Retry-After: no test waits

    settings = ModelSettings(retry=ModelRetrySettings(max_retries=1, policy=policy))
    rig.activate(llm_fault("rate_limit"))
    with pytest.raises(openai.RateLimitError) as raised:
        run(provider, stream=stream, settings=settings)
    assert raised.value.response.headers["retry-after"] == "1"
    assert [type(c.error) for c in seen] == [openai.RateLimitError]
    assert seen[0].normalized.status_code == 429 and seen[0].normalized.retry_after == 1.0
    assert len(rig.interactions()) == 2  # the SDK retried once, then gave up


@STREAMS
def test_an_llm_timeout_is_openai_api_timeout_error(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("timeout", delay_ms=5))
    with pytest.raises(openai.APITimeoutError):
        run(provider, stream=stream)
    assert rig.waits_s == [0.005]


@STREAMS
def test_a_truncated_reply_is_the_agent_answer_cut(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("truncated_response", max_tokens=3, after_calls=1))
    assert run(provider, stream=stream) == truncate_text(answer_to(RESULT), 3)
    assert rig.fired() == ["llm_faults[0] truncated_response(3 tokens)"]


@STREAMS
@pytest.mark.parametrize("mode", TEXT_MODES)
def test_text_faults_reach_the_final_answer(
    provider: LoopbackServer, rig: Rig, stream: bool, mode: str
) -> None:
    rig.activate(text_fault(mode))
    answer = run(provider, stream=stream)
    assert answer != answer_to(RESULT)
    assert (answer == "") is (mode == "empty")
    assert [label.split("(")[0] for label in rig.fired()] == [f"llm_faults[0] {mode}"]


RESPONSES = "openai.resources.responses:AsyncResponses.create"


def run_responses(provider: LoopbackServer) -> str:
    """The agent on the SDK's default model, the Responses API (whole replies)."""

    async def main() -> str:
        client = openai.AsyncOpenAI(base_url=provider.url_for("/v1"), api_key="k", max_retries=0)
        agent = Agent(
            name="weather",
            instructions="Answer with the tool.",
            tools=[get_weather],
            model=OpenAIResponsesModel(model="gpt-test", openai_client=client),
        )
        try:
            config = RunConfig(tracing_disabled=True)
            result = await Runner.run(agent, "Weather in Paris?", run_config=config)
            return str(result.final_output)
        finally:
            await client.close()

    return asyncio.run(main())


def test_the_responses_api_model_gets_its_faults(provider: LoopbackServer) -> None:
    unwrapped = run_responses(provider)
    with wrapped(llm=RESPONSES, tools=[f"{__name__}:get_weather"]) as rig:
        assert run_responses(provider) == unwrapped == answer_to(RESULT)
        rig.activate(tool_fault("malicious_response", payload=PAYLOAD))
        assert run_responses(provider) == answer_to(PAYLOAD)
        rig.activate(llm_fault("garbage", after_calls=1))
        garbled = run_responses(provider)
        assert garbled and garbled != answer_to(RESULT)
        rig.activate(llm_fault("rate_limit"))
        with pytest.raises(openai.RateLimitError):
            run_responses(provider)
        assert [i.unapplied for i in rig.interactions()] == [()] * len(rig.interactions())
