"""A LangChain / LangGraph agent under flakestorm (SPEC §10): its ``@tool`` (a
``StructuredTool``) wrapped from the inside and ``Completions.create`` wrapped, in a LangGraph
ReAct graph (``ToolNode``) on ``ChatOpenAI``, driven by a fake OpenAI server that calls the
tool, whole and streamed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from support.framework_rig import (
    OPENAI,
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


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


RESULT = "sunny in Paris"


@pytest.fixture(scope="module")
def provider() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as server:
        yield server


def chat_model(provider: LoopbackServer, *, stream: bool) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-test",
        base_url=provider.url_for("/v1"),
        api_key="k",
        max_retries=0,
        streaming=stream,
    )


def run(provider: LoopbackServer, *, stream: bool, retries: int = 1) -> Any:
    """The agent's last message."""
    model = chat_model(provider, stream=stream).bind_tools([get_weather])
    if retries > 1:
        model = model.with_retry(
            retry_if_exception_type=(openai.RateLimitError,),
            stop_after_attempt=retries,
            wait_exponential_jitter=False,
        )

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([get_weather], handle_tool_errors=True))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    state = graph.compile().invoke({"messages": [HumanMessage("Weather in Paris?")]})
    return state["messages"][-1]


@pytest.fixture
def rig() -> Iterator[Rig]:
    with wrapped(llm=OPENAI, tools=[f"{__name__}:get_weather"]) as r:
        yield r


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


@STREAMS
def test_with_no_fault_the_agent_answers_as_unwrapped(
    provider: LoopbackServer, stream: bool
) -> None:
    unwrapped = run(provider, stream=stream).content
    function = get_weather.func
    with wrapped(llm=OPENAI, tools=[f"{__name__}:get_weather"]) as rig:
        assert run(provider, stream=stream).content == unwrapped == answer_to(RESULT)
        assert isinstance(get_weather, StructuredTool) and get_weather.name == "get_weather"
        assert get_weather.args == {"city": {"title": "City", "type": "string"}}
        calls = rig.interactions()
    assert [(i.target.value, i.fired) for i in calls] == [("llm", ()), ("tool", ()), ("llm", ())]
    assert get_weather.func is function


@STREAMS
@pytest.mark.parametrize(
    ("fault", "told"),
    [
        (tool_fault("error"), "Error: ToolFaultError('503 Service Unavailable')"),
        (tool_fault("timeout", delay_ms=5), "Error: TimeoutError("),
        (tool_fault("malicious_response", payload=PAYLOAD), PAYLOAD),
        (tool_fault("slow", delay_ms=5), RESULT),
    ],
    ids=["error", "timeout", "malicious_response", "slow"],
)
def test_tool_faults_reach_the_tool_node(
    provider: LoopbackServer, rig: Rig, stream: bool, fault: Any, told: str
) -> None:
    rig.activate(fault)
    assert run(provider, stream=stream).content.startswith(answer_to(told))
    assert rig.fired() == [tool_fault_label(0, fault)]


@STREAMS
def test_the_retry_hook_sees_openai_rate_limit_error(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("rate_limit"))
    with pytest.raises(openai.RateLimitError) as raised:
        run(provider, stream=stream, retries=2)
    assert raised.value.status_code == 429
    assert raised.value.response.headers["retry-after"] == "1"
    assert len(rig.interactions()) == 2  # with_retry retried on RateLimitError, then gave up


@STREAMS
def test_an_llm_timeout_is_openai_api_timeout_error(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("timeout", delay_ms=5))
    with pytest.raises(openai.APITimeoutError):
        run(provider, stream=stream)
    assert rig.waits_s == [0.005]


@STREAMS
def test_a_truncated_reply_is_cut_with_finish_reason_length(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(llm_fault("truncated_response", max_tokens=3, after_calls=1))
    message = run(provider, stream=stream)
    assert message.content == truncate_text(answer_to(RESULT), 3)
    assert message.response_metadata["finish_reason"] == "length"


@STREAMS
@pytest.mark.parametrize("mode", TEXT_MODES)
def test_text_faults_reach_the_answer(
    provider: LoopbackServer, rig: Rig, stream: bool, mode: str
) -> None:
    rig.activate(text_fault(mode))
    answer = run(provider, stream=stream).content
    assert answer != answer_to(RESULT)
    assert (answer == "") is (mode == "empty")
    assert [label.split("(")[0] for label in rig.fired()] == [f"llm_faults[0] {mode}"]


@STREAMS
def test_a_malformed_tool_result_reaches_the_model(
    provider: LoopbackServer, rig: Rig, stream: bool
) -> None:
    rig.activate(tool_fault("malformed"))
    answer = run(provider, stream=stream).content
    assert answer.startswith("The tool said: ") and answer != answer_to(RESULT)
    assert rig.fired() == ["tool_faults[0] malformed on get_weather"]
