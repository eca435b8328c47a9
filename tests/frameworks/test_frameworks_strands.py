"""A Strands agent under flakestorm (SPEC §10): its ``@tool`` wrapped from the inside and
``AsyncCompletions.create`` wrapped, driven by a fake OpenAI server that calls the tool.
Strands always streams, so every LLM fault here acts on an SDK stream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from strands import Agent, ModelRetryStrategy, tool
from strands.models.anthropic import AnthropicModel
from strands.models.openai import OpenAIModel
from strands.tools.decorator import DecoratedFunctionTool
from strands.types.exceptions import MaxTokensReachedException, ModelThrottledException
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

from flakestorm.chaos.faults.labels import llm_fault_label, tool_fault_label


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city
    """
    return f"sunny in {city}"


RESULT = "sunny in Paris"


class SeenRetries(ModelRetryStrategy):
    """Strands' own retry strategy, without waiting, remembering what it was asked about."""

    def __init__(self) -> None:
        super().__init__(max_attempts=2, initial_delay=0, max_delay=0)
        self.seen: list[Exception] = []

    def is_retryable(self, exception: Exception) -> bool:
        self.seen.append(exception)
        return super().is_retryable(exception)


@pytest.fixture(scope="module")
def provider() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as server:
        yield server


def run(provider: LoopbackServer, retries: ModelRetryStrategy | None = None) -> str:
    model = OpenAIModel(
        client_args={"base_url": provider.url_for("/v1"), "api_key": "k", "max_retries": 0},
        model_id="gpt-test",
    )
    agent = Agent(
        model=model,
        tools=[get_weather],
        callback_handler=None,
        retry_strategy=retries or ModelRetryStrategy(max_attempts=1, initial_delay=0),
    )
    return str(agent("Weather in Paris?")).strip()


@pytest.fixture
def rig() -> Iterator[Rig]:
    with wrapped(llm=OPENAI_ASYNC, tools=[f"{__name__}:get_weather"]) as r:
        yield r


def test_with_no_fault_the_agent_answers_as_unwrapped(provider: LoopbackServer) -> None:
    unwrapped = run(provider)
    with wrapped(llm=OPENAI_ASYNC, tools=[f"{__name__}:get_weather"]) as rig:
        assert run(provider) == unwrapped == answer_to(RESULT)
        assert isinstance(get_weather, DecoratedFunctionTool)
        assert get_weather.tool_name == "get_weather"
        calls = rig.interactions()
    assert [(i.target.value, i.fired) for i in calls] == [("llm", ()), ("tool", ()), ("llm", ())]


@pytest.mark.parametrize(
    ("fault", "told"),
    [
        (tool_fault("error"), "Error: ToolFaultError - 503 Service Unavailable"),
        (tool_fault("timeout", delay_ms=5), "Error: TimeoutError - "),
        (tool_fault("malicious_response", payload=PAYLOAD), PAYLOAD),
        (tool_fault("slow", delay_ms=5), RESULT),
    ],
    ids=["error", "timeout", "malicious_response", "slow"],
)
def test_tool_faults_reach_the_strands_tool_result(
    provider: LoopbackServer, rig: Rig, fault: Any, told: str
) -> None:
    rig.activate(fault)
    assert run(provider).startswith(answer_to(told))
    assert rig.fired() == [tool_fault_label(0, fault)]


def test_the_retry_strategy_sees_openai_rate_limit_error(
    provider: LoopbackServer, rig: Rig
) -> None:
    retries = SeenRetries()
    rig.activate(llm_fault("rate_limit"))
    with pytest.raises(ModelThrottledException) as raised:
        run(provider, retries)
    assert isinstance(raised.value.__cause__, openai.RateLimitError)
    assert [type(e.__cause__) for e in retries.seen] == [openai.RateLimitError] * 2
    assert len(rig.interactions()) == 2  # Strands retried once, then gave up


def test_a_truncated_stream_is_strands_max_tokens_reached(
    provider: LoopbackServer, rig: Rig
) -> None:
    """The stream ends with ``finish_reason: "length"``, which Strands reads as the model
    stopping at its token limit, keeping the cut text."""
    fault = llm_fault("truncated_response", max_tokens=3, after_calls=1)
    rig.activate(fault)
    with pytest.raises(MaxTokensReachedException):
        run(provider)
    assert rig.fired() == [llm_fault_label(0, fault)]


@pytest.mark.parametrize("mode", TEXT_MODES)
def test_text_faults_reach_the_answer(provider: LoopbackServer, rig: Rig, mode: str) -> None:
    rig.activate(text_fault(mode))
    answer = run(provider)
    assert answer != answer_to(RESULT)
    assert (answer == "") is (mode == "empty")
    assert [label.split("(")[0] for label in rig.fired()] == [f"llm_faults[0] {mode}"]


def test_a_malformed_tool_result_reaches_the_model(provider: LoopbackServer, rig: Rig) -> None:
    rig.activate(tool_fault("malformed"))
    answer = run(provider)
    assert answer.startswith("The tool said: ") and answer != answer_to(RESULT)
    assert rig.fired() == ["tool_faults[0] malformed on get_weather"]


def test_an_llm_timeout_is_openai_api_timeout_error(provider: LoopbackServer, rig: Rig) -> None:
    rig.activate(llm_fault("timeout", delay_ms=5))
    with pytest.raises(openai.APITimeoutError):
        run(provider)
    assert rig.waits_s == [0.005]


# --------------------------------------------------------------------------- on Anthropic

ANTHROPIC_STREAM = "anthropic.resources.messages:AsyncMessages.stream"
"""Strands' ``AnthropicModel`` calls the SDK's stream helper, ``messages.stream(...)``."""


def run_anthropic(provider: LoopbackServer, retries: ModelRetryStrategy | None = None) -> str:
    model = AnthropicModel(
        client_args={"base_url": provider.url, "api_key": "k", "max_retries": 0},
        model_id="claude-test",
        max_tokens=100,
    )
    agent = Agent(
        model=model,
        tools=[get_weather],
        callback_handler=None,
        retry_strategy=retries or ModelRetryStrategy(max_attempts=1, initial_delay=0),
    )

    async def main() -> str:
        try:
            return str(await agent.invoke_async("Weather in Paris?")).strip()
        finally:  # Strands keeps one client per model: close it in the loop that used it
            await model.client.close()

    return asyncio.run(main())


@pytest.fixture
def anthropic_rig() -> Iterator[Rig]:
    with wrapped(llm=ANTHROPIC_STREAM, tools=[f"{__name__}:get_weather"]) as r:
        yield r


def test_on_anthropic_with_no_fault_the_agent_answers_as_unwrapped(
    provider: LoopbackServer,
) -> None:
    unwrapped = run_anthropic(provider)
    with wrapped(llm=ANTHROPIC_STREAM, tools=[f"{__name__}:get_weather"]) as rig:
        assert run_anthropic(provider) == unwrapped == answer_to(RESULT)
        calls = rig.interactions()
    assert [(i.target.value, i.fired) for i in calls] == [("llm", ()), ("tool", ()), ("llm", ())]


def test_on_anthropic_the_retry_strategy_sees_anthropic_rate_limit_error(
    provider: LoopbackServer, anthropic_rig: Rig
) -> None:
    retries = SeenRetries()
    anthropic_rig.activate(llm_fault("rate_limit"))
    with pytest.raises(ModelThrottledException):
        run_anthropic(provider, retries)
    assert [type(e.__cause__) for e in retries.seen] == [anthropic.RateLimitError] * 2


def test_on_anthropic_a_truncated_stream_stops_at_max_tokens(
    provider: LoopbackServer, anthropic_rig: Rig
) -> None:
    anthropic_rig.activate(llm_fault("truncated_response", max_tokens=3, after_calls=1))
    with pytest.raises(MaxTokensReachedException):
        run_anthropic(provider)
    assert anthropic_rig.fired() == ["llm_faults[0] truncated_response(3 tokens)"]


@pytest.mark.parametrize("mode", TEXT_MODES)
def test_on_anthropic_text_faults_and_tool_faults_reach_the_answer(
    provider: LoopbackServer, anthropic_rig: Rig, mode: str
) -> None:
    anthropic_rig.activate(text_fault(mode), tool_fault("malicious_response", payload=PAYLOAD))
    answer = run_anthropic(provider)
    assert answer != answer_to(PAYLOAD) and (answer == "") is (mode == "empty")
    assert [label.split("(")[0] for label in anthropic_rig.fired()] == [
        "tool_faults[0] malicious_response on get_weather",
        f"llm_faults[0] {mode}",
    ]


def test_on_anthropic_an_llm_timeout_waits_without_blocking_then_times_out(
    provider: LoopbackServer, anthropic_rig: Rig
) -> None:
    anthropic_rig.activate(llm_fault("timeout", delay_ms=5))
    with pytest.raises(anthropic.APITimeoutError):
        run_anthropic(provider)
    assert anthropic_rig.waits_s == [0.005]  # the async wait, where entering the stream waits
