"""Framework objects that hold tools, named whole in ``agent.tools`` (SPEC §10): one small
registered unit per framework, saying how to recognise the object, which tools it holds (each
by its own name) and, for a fault that none of its tools' calls reached, what is probably
wrong.

================================  ===========================================================
holder                            its tools
================================  ===========================================================
Pydantic AI ``Agent``             the tools of its function toolsets (``agent.toolsets``):
                                  ``@agent.tool``, ``@agent.tool_plain``, ``tools=[...]``, and
                                  a ``FunctionToolset`` given in ``toolsets=[...]``
OpenAI Agents SDK ``Agent``       its ``tools`` that are ``FunctionTool`` s
Strands ``Agent``                 its tool registry (``agent.tool_registry.registry``)
LangGraph ``ToolNode``            ``tools_by_name``
================================  ===========================================================

Each tool is then wrapped from the inside, as when named alone (:mod:`.tool_kinds`): the
holder and every reference the framework keeps stay as they are. A held tool of no kind
flakestorm knows (a hosted tool, an MCP tool) is left alone; a fault on it is not delivered.
Holders are recognised by the names of their classes, so no framework is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from flakestorm.chaos.wrappers.tool_kinds import is_a

__all__ = ["TOOL_HOLDERS", "ToolHolder", "holder_of"]


class ToolHolder(Protocol):
    """One kind of framework object that holds tools."""

    @property
    def label(self) -> str:
        """What the kind is called in messages (``the Pydantic AI Agent``)."""
        ...

    @property
    def cause(self) -> str:
        """The likely cause when a held tool was never called, for the wiring hint."""
        ...

    def recognises(self, value: object) -> bool: ...

    def tools(self, value: Any) -> list[tuple[str, object]]:
        """The tools ``value`` holds, by name, in its order."""
        ...


@dataclass(frozen=True)
class PydanticAiAgent:
    label: str = "the Pydantic AI Agent"
    cause: str = (
        "does every request run on that module-level agent (not an agent built per request, "
        "nor one under agent.override(tools=...))"
    )

    def recognises(self, value: object) -> bool:
        return is_a(value, "pydantic_ai", "Agent")

    def tools(self, value: Any) -> list[tuple[str, object]]:
        return [
            (name, tool)
            for toolset in value.toolsets
            if is_a(toolset, "pydantic_ai", "FunctionToolset")
            for name, tool in toolset.tools.items()
        ]


@dataclass(frozen=True)
class AgentsSdkAgent:
    label: str = "the OpenAI Agents SDK Agent"
    cause: str = (
        "does the run start from that agent (not a clone, nor a handoff's agent with its own tools)"
    )

    def recognises(self, value: object) -> bool:
        return is_a(value, "agents", "Agent")

    def tools(self, value: Any) -> list[tuple[str, object]]:
        return [(tool.name, tool) for tool in value.tools if is_a(tool, "agents", "FunctionTool")]


@dataclass(frozen=True)
class StrandsAgent:
    label: str = "the Strands Agent"
    cause: str = "do requests run on that agent (not an Agent built per request)"

    def recognises(self, value: object) -> bool:
        return is_a(value, "strands", "Agent")

    def tools(self, value: Any) -> list[tuple[str, object]]:
        return list(value.tool_registry.registry.items())


@dataclass(frozen=True)
class LangGraphToolNode:
    label: str = "the LangGraph ToolNode"
    cause: str = "is that ToolNode the one in the graph that runs (not a node built per request)"

    def recognises(self, value: object) -> bool:
        return is_a(value, "langgraph", "ToolNode")

    def tools(self, value: Any) -> list[tuple[str, object]]:
        return list(value.tools_by_name.items())


TOOL_HOLDERS: tuple[ToolHolder, ...] = (
    PydanticAiAgent(),
    AgentsSdkAgent(),
    StrandsAgent(),
    LangGraphToolNode(),
)
"""The framework objects that hold tools, tried in order."""


def holder_of(value: object) -> ToolHolder | None:
    """The kind of tool holder ``value`` is; None when it is none of :data:`TOOL_HOLDERS`."""
    return next((h for h in TOOL_HOLDERS if h.recognises(value)), None)
