"""Framework tool objects in ``agent.tools`` and tool registries (SPEC §10): the function inside
is wrapped, sync and async, the object and its references are kept, and the original comes
back; an object flakestorm cannot reach into is a located config error."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext
from langchain_core.tools import BaseTool, StructuredTool
from strands import tool as strands_tool
from support.framework_rig import PAYLOAD, llm_fault, tool_fault, wrapped

from flakestorm.chaos.delivery.interactions import InteractionLog
from flakestorm.chaos.wrappers import Wrapping
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import ConfigError, ToolFaultError


class WeatherTool(BaseTool):
    """A LangChain tool written as a subclass, without ``func``."""

    name: str = "get_weather"
    description: str = "The weather in a city."

    def _run(self, city: str) -> str:
        return f"sunny in {city}"


get_weather = WeatherTool()


async def _forecast(city: str) -> str:
    return f"rain in {city}"


forecast = StructuredTool.from_function(
    coroutine=_forecast, name="forecast", description="The forecast for a city."
)


@function_tool
async def agents_forecast(city: str) -> str:
    """The forecast for a city."""
    return f"rain in {city}"


async def _hand_made(ctx: Any, arguments: str) -> str:
    return "hand made " + json.loads(arguments)["city"]


hand_made = FunctionTool(
    name="hand_made",
    description="A tool built by hand.",
    params_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    on_invoke_tool=_hand_made,
)


@strands_tool
async def strands_forecast(city: str) -> str:
    """The forecast for a city.

    Args:
        city: the city
    """
    return f"rain in {city}"


class Registry:
    def __init__(self) -> None:
        self.tools: dict[str, Any] = {"strands_forecast": strands_forecast}
        self.sets: list[str] = []

    def names(self) -> list[str]:
        return list(self.tools)

    def get(self, name: str) -> Any:
        return self.tools[name]

    def set(self, name: str, fn: Any) -> None:
        self.sets.append(name)
        self.tools[name] = fn


registry = Registry()


unreachable = FunctionTool(
    name="unreachable",
    description="Its invoker is a partial: no function flakestorm knows how to reach.",
    params_json_schema={"type": "object", "properties": {}},
    on_invoke_tool=functools.partial(_hand_made),
)


def test_a_langchain_tool_subclass_has_its_run_wrapped_and_restored() -> None:
    with wrapped(tools=[f"{__name__}:get_weather"]) as rig:
        rig.activate(tool_fault("malicious_response", payload=PAYLOAD))
        assert get_weather.invoke({"city": "Paris"}) == PAYLOAD
        assert asyncio.run(get_weather.ainvoke({"city": "Paris"})) == PAYLOAD  # via _run
        rig.calm()
        assert get_weather.invoke({"city": "Paris"}) == "sunny in Paris"
    assert "_run" not in vars(get_weather)
    assert get_weather.invoke({"city": "Paris"}) == "sunny in Paris"


def test_a_langchain_coroutine_is_wrapped_async() -> None:
    with wrapped(tools=[f"{__name__}:forecast"]) as rig:
        rig.activate(tool_fault("error", tool="forecast", error_code=502))
        with pytest.raises(ToolFaultError, match="502"):
            asyncio.run(forecast.ainvoke({"city": "Paris"}))
    assert forecast.coroutine is _forecast


def test_agents_sdk_tools_async_and_hand_made() -> None:
    def invoke(tool: FunctionTool) -> Any:
        arguments = json.dumps({"city": "Paris"})
        context = ToolContext(
            context=None, tool_name=tool.name, tool_call_id="c1", tool_arguments=arguments
        )
        return asyncio.run(tool.on_invoke_tool(context, arguments))

    tools = [f"{__name__}:agents_forecast", f"{__name__}:hand_made"]
    with wrapped(tools=tools) as rig:
        rig.activate(
            tool_fault("malicious_response", tool="agents_forecast", payload=PAYLOAD),
            tool_fault("malformed", tool="hand_made"),
        )
        assert invoke(agents_forecast) == PAYLOAD
        malformed = invoke(hand_made)
        with pytest.raises(ValueError):
            json.loads(malformed)
    assert invoke(agents_forecast) == "rain in Paris"
    assert invoke(hand_made) == "hand made Paris"


def test_a_registry_handing_out_framework_tools_keeps_them() -> None:
    log = InteractionLog()
    agent = AgentConfig(
        type=AgentType.PYTHON, endpoint="agent:run", tool_registry=f"{__name__}:registry"
    )
    with Wrapping(agent, Path("."), log) as wrapping:
        wrapping.activate(None)
        assert registry.get("strands_forecast") is strands_forecast
        assert asyncio.run(strands_forecast(city="Paris")) == "rain in Paris"
        assert wrapping.tool_kind("strands_forecast") == "a Strands @tool"
    assert registry.sets == []  # the object never left the registry
    assert [i.tool for i in log.snapshot()] == ["strands_forecast"]


def test_a_framework_object_without_a_reachable_function_is_a_config_error() -> None:
    agent = AgentConfig(
        type=AgentType.PYTHON, endpoint="agent:run", tools=[f"{__name__}:unreachable"]
    )
    with pytest.raises(ConfigError) as raised:
        Wrapping(agent, Path("."), InteractionLog())
    [problem] = raised.value.problems
    assert problem.path == "agent.tools[0]"
    assert problem.message == (
        f'"{__name__}:unreachable" is an OpenAI Agents SDK FunctionTool whose function '
        "flakestorm cannot reach (a version of the framework this flakestorm does not know?): "
        "name the function it wraps instead"
    )


def test_llm_faults_do_not_touch_tools() -> None:
    with wrapped(tools=[f"{__name__}:get_weather"]) as rig:
        rig.activate(llm_fault("empty"))
        assert get_weather.invoke({"city": "Paris"}) == "sunny in Paris"
        assert rig.fired() == []
