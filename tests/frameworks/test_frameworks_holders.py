"""Framework objects that hold tools, named whole in ``agent.tools`` (SPEC §10): a Pydantic AI
``Agent`` with ``@agent.tool_plain`` / ``@agent.tool`` tools, an OpenAI Agents SDK ``Agent``, a
Strands ``Agent`` and a LangGraph ``ToolNode``. Each tool is reached by its own name, the agent
answers as it does to that failure, and every reference the framework holds is put back."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from agents import Agent as SdkAgent
from agents import OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from langchain_core.messages import AIMessage
from langchain_core.tools import tool as langchain_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from strands import Agent as StrandsAgent
from strands import tool as strands_tool
from strands.models.openai import OpenAIModel
from support.framework_rig import PAYLOAD, tool_fault, wrapped
from support.server import LoopbackServer
from support.tool_provider import answer_to, tool_provider

from flakestorm.chaos.channels.channel import WrapperChannel
from flakestorm.chaos.delivery.interactions import InteractionLog
from flakestorm.chaos.wrappers import Wrapping
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import ConfigError

RESULT = "sunny in Paris"

# -- Pydantic AI: the idiom its documentation leads with

weather_agent: Agent[None, str] = Agent(None, instructions="Use the tools.")


@weather_agent.tool_plain
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@weather_agent.tool
def get_humidity(ctx: RunContext[None], city: str) -> str:
    """The humidity in a city."""
    return f"humid in {city}"


@pytest.fixture(scope="module")
def provider() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as server:
        yield server


def _client(provider: LoopbackServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=provider.url_for("/v1"), api_key="k", max_retries=0)


def run_pydantic_ai(provider: LoopbackServer) -> str:
    async def main() -> str:
        client = _client(provider)
        model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client))
        try:
            return str((await weather_agent.run("Weather in Paris?", model=model)).output)
        finally:
            await client.close()

    return asyncio.run(main())


def test_a_pydantic_ai_agent_named_whole_reaches_its_decorated_tools(
    provider: LoopbackServer,
) -> None:
    tools = weather_agent._function_toolset.tools
    functions = {name: tool.function for name, tool in tools.items()}
    with wrapped(tools=[f"{__name__}:weather_agent"]) as rig:
        assert rig.wrapping.tool_names == ("get_weather", "get_humidity")
        assert run_pydantic_ai(provider) == answer_to(RESULT)  # no fault: as unwrapped
        rig.activate(tool_fault("malicious_response", payload=PAYLOAD))
        assert run_pydantic_ai(provider) == answer_to(PAYLOAD)
        assert rig.fired() == ["tool_faults[0] malicious_response on get_weather"]
    assert {name: tool.function for name, tool in tools.items()} == functions
    assert all(t.function is t.function_schema.function for t in tools.values())


def test_a_pydantic_ai_tool_error_ends_the_run_as_pydantic_ai_lets_it(
    provider: LoopbackServer,
) -> None:
    from flakestorm.errors import ToolFaultError

    with wrapped(tools=[f"{__name__}:weather_agent"]) as rig:
        rig.activate(tool_fault("error"))
        with pytest.raises(ToolFaultError):
            run_pydantic_ai(provider)
        assert rig.fired() == ["tool_faults[0] error(503) on get_weather"]


def test_naming_the_decorated_function_says_to_name_the_agent() -> None:
    """``@agent.tool_plain`` returns the function it registered: named alone, it is wrapped
    where the framework never calls it, and the hint says what to name instead."""
    agent = AgentConfig(type=AgentType.PYTHON, endpoint="a:b", tools=[f"{__name__}:get_weather"])
    with Wrapping(agent, Path("."), InteractionLog()) as wrapping:
        hint = WrapperChannel(wrapping).wiring_hint("tool_faults[0] error(503)", "get_weather")
    assert hint == (
        "the agent made no call to `get_weather` where it is named: the Pydantic AI Agent "
        f'"{__name__}:weather_agent" keeps its own reference to that function as its tool '
        "`get_weather` — name the holder in agent.tools (its tools are each wrapped by their "
        "own names)"
    )


def test_a_holder_with_no_tool_to_wrap_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "empty_agent", Agent(None), raising=False)
    agent = AgentConfig(type=AgentType.PYTHON, endpoint="a:b", tools=[f"{__name__}:empty_agent"])
    with pytest.raises(ConfigError, match="is the Pydantic AI Agent, but it holds no tool"):
        Wrapping(agent, Path("."), InteractionLog())


# -- OpenAI Agents SDK: an Agent named whole


@function_tool
def sdk_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


sdk_agent = SdkAgent(name="weather", instructions="Use the tool.", tools=[sdk_weather])


def run_agents_sdk(provider: LoopbackServer) -> str:
    async def main() -> str:
        client = _client(provider)
        model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
        config = RunConfig(model=model, tracing_disabled=True)
        try:
            result = await Runner.run(sdk_agent, "Weather in Paris?", run_config=config)
            return str(result.final_output)
        finally:
            await client.close()

    return asyncio.run(main())


def test_an_agents_sdk_agent_named_whole_reaches_its_function_tools(
    provider: LoopbackServer,
) -> None:
    invoker = sdk_weather.on_invoke_tool
    with wrapped(tools=[f"{__name__}:sdk_agent"]) as rig:
        assert rig.wrapping.tool_names == ("sdk_weather",)
        assert run_agents_sdk(provider) == answer_to(RESULT)
        rig.activate(tool_fault("error", tool="sdk_weather"))
        answer = run_agents_sdk(provider)
        assert rig.fired() == ["tool_faults[0] error(503) on sdk_weather"]
    # the SDK's failure handler told the model the tool failed
    assert answer.startswith("The tool said: An error occurred while running the tool")
    assert sdk_agent.tools == [sdk_weather] and sdk_weather.on_invoke_tool is invoker
    assert run_agents_sdk(provider) == answer_to(RESULT)


# -- Strands: an Agent named whole (its tool registry)


@strands_tool
def strands_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city
    """
    return f"sunny in {city}"


@pytest.fixture
def strands_agent(provider: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> StrandsAgent:
    model = OpenAIModel(
        client_args={"base_url": provider.url_for("/v1"), "api_key": "k", "max_retries": 0},
        model_id="gpt-test",
    )
    agent = StrandsAgent(model=model, tools=[strands_weather], callback_handler=None)
    monkeypatch.setattr(sys.modules[__name__], "strands_agent_", agent, raising=False)
    return agent


def test_a_strands_agent_named_whole_reaches_its_registry(strands_agent: StrandsAgent) -> None:
    function = strands_weather._tool_func
    with wrapped(tools=[f"{__name__}:strands_agent_"]) as rig:
        assert rig.wrapping.tool_names == ("strands_weather",)
        rig.activate(tool_fault("error", tool="strands_weather"))
        answer = str(strands_agent("Weather in Paris?")).strip()
        assert rig.fired() == ["tool_faults[0] error(503) on strands_weather"]
    assert answer.startswith("The tool said: Error: ToolFaultError - 503 Service Unavailable")
    assert strands_agent.tool_registry.registry["strands_weather"] is strands_weather
    assert strands_weather._tool_func is function


# -- LangGraph: a ToolNode named whole


@langchain_tool
def graph_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


tool_node = ToolNode([graph_weather])


def test_a_langgraph_tool_node_named_whole_reaches_its_tools() -> None:
    call = {"name": "graph_weather", "args": {"city": "Paris"}, "id": "1", "type": "tool_call"}
    func = graph_weather.func
    with wrapped(tools=[f"{__name__}:tool_node"]) as rig:
        assert rig.wrapping.tool_names == ("graph_weather",)
        rig.activate(tool_fault("malicious_response", tool="graph_weather", payload=PAYLOAD))
        graph = StateGraph(MessagesState)
        graph.add_node("tools", tool_node)
        graph.add_edge(START, "tools")
        state = graph.compile().invoke({"messages": [AIMessage("", tool_calls=[call])]})
        assert rig.fired() == ["tool_faults[0] malicious_response on graph_weather"]
    assert state["messages"][-1].content == PAYLOAD
    assert graph_weather.func is func and tool_node.tools_by_name["graph_weather"] is graph_weather
