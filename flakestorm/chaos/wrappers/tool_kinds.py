"""The kinds of tool object ``agent.tools`` (and a tool registry) may hold (SPEC §10), one small
registered unit per framework: how to recognise the object and where the function inside it is.

A framework keeps its own references to its tool objects (an agent's tool list, a toolset, a
tool node), so flakestorm never replaces the object: it wraps the function *inside* it, in
every place the object calls it from, and puts the original back after the run. With no fault
firing, the object, its name, its schema and the framework's references are untouched, and the
framework behaves as without flakestorm.

================================  ===========================================================
kind                              the function wrapped
================================  ===========================================================
OpenAI Agents SDK ``FunctionTool``  the decorated function the SDK's invoker calls (after it
                                  parsed and validated the model's JSON arguments, before its
                                  failure handler); a ``FunctionTool`` built by hand: its
                                  ``on_invoke_tool(ctx, json)``
LangChain ``BaseTool``            ``func`` and ``coroutine`` (``StructuredTool``, ``Tool``,
                                  ``@tool``); a subclass without them: its ``_run``/``_arun``
Strands ``@tool``                 the decorated function (``DecoratedFunctionTool``)
Pydantic AI ``Tool``              ``function``, also where its function schema calls it
================================  ===========================================================

Objects are recognised by the names of their classes (and their bases), so no framework is
imported: flakestorm does not depend on any of them. :data:`TOOL_KINDS` lists the kinds in the
order they are tried; :func:`slots_of` answers for an object.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import CellType, FunctionType
from typing import Any, Protocol

__all__ = ["TOOL_KINDS", "Slot", "ToolKind", "slots_of", "supported_kinds"]


@dataclass(frozen=True)
class Slot:
    """One place a function is called from: the function, how to put a wrapper there and how to
    put the function back."""

    original: Callable[..., Any]
    install: Callable[[Callable[..., Any]], None]
    restore: Callable[[], None]


class ToolKind(Protocol):
    """One kind of framework tool object."""

    @property
    def label(self) -> str:
        """What the kind is called in messages (``a Strands @tool``)."""
        ...

    def recognises(self, value: object) -> bool: ...

    def slots(self, value: Any) -> list[Slot]:
        """Where ``value`` calls its function from (empty: it has none flakestorm can reach)."""
        ...


def is_a(value: object, module: str, *names: str) -> bool:
    """Whether a class of ``value``'s MRO is one of ``names`` in a module under ``module``."""
    return any(
        k.__name__ in names and (k.__module__ == module or k.__module__.startswith(module + "."))
        for k in type(value).__mro__
    )


def attribute_slot(owner: Any, attr: str, *, instance_only: bool = False) -> Slot:
    """The callable ``owner.attr``, swapped by setting the attribute (``instance_only``: in the
    instance's ``__dict__``, shadowing a method, as pydantic models need for ``_run``)."""
    original = getattr(owner, attr)
    if instance_only:

        def install(wrapper: Callable[..., Any]) -> None:
            vars(owner)[attr] = wrapper

        def restore() -> None:
            vars(owner).pop(attr, None)

        return Slot(original, install, restore)

    def set_attr(wrapper: Callable[..., Any]) -> None:
        setattr(owner, attr, wrapper)

    def put_back() -> None:
        setattr(owner, attr, original)

    return Slot(original, set_attr, put_back)


def _cell_slot(function: FunctionType, name: str) -> Slot | None:
    """The closure variable ``name`` of ``function``, swapped in its cell: every copy of the
    closure sees the wrapper."""
    code = function.__code__
    if function.__closure__ is None or name not in code.co_freevars:
        return None
    cell: CellType = function.__closure__[code.co_freevars.index(name)]
    original = cell.cell_contents
    if not callable(original):
        return None

    def install(wrapper: Callable[..., Any]) -> None:
        cell.cell_contents = wrapper

    def restore() -> None:
        cell.cell_contents = original

    return Slot(original, install, restore)


class AgentsFunctionTool:
    label = "an OpenAI Agents SDK FunctionTool"

    def recognises(self, value: object) -> bool:
        return is_a(value, "agents", "FunctionTool")

    def slots(self, value: Any) -> list[Slot]:
        invoker = value.on_invoke_tool
        # function_tool(): the SDK's failure-handling invoker around a closure over the function
        impl = getattr(invoker, "_invoke_tool_impl", None)
        if isinstance(impl, FunctionType):
            slot = _cell_slot(impl, "the_func")
            return [slot] if slot is not None else []
        if inspect.isfunction(invoker) or inspect.ismethod(invoker):  # built by hand
            return [attribute_slot(value, "on_invoke_tool")]
        return []


class LangChainTool:
    label = "a LangChain BaseTool"

    def recognises(self, value: object) -> bool:
        return is_a(value, "langchain_core", "BaseTool")

    def slots(self, value: Any) -> list[Slot]:
        own = [
            attribute_slot(value, attr)
            for attr in ("func", "coroutine")
            if callable(getattr(value, attr, None))
        ]
        if own:
            return own
        # a BaseTool subclass: its own _run (and _arun when it defines one)
        base_arun = next(
            (vars(k)["_arun"] for k in type(value).__mro__ if k.__name__ == "BaseTool"), None
        )
        methods = ["_run"]
        if getattr(type(value), "_arun", base_arun) is not base_arun:
            methods.append("_arun")
        return [attribute_slot(value, m, instance_only=True) for m in methods]


class StrandsTool:
    label = "a Strands @tool"

    def recognises(self, value: object) -> bool:
        return is_a(value, "strands", "DecoratedFunctionTool")

    def slots(self, value: Any) -> list[Slot]:
        return (
            [attribute_slot(value, "_tool_func")] if callable(vars(value).get("_tool_func")) else []
        )


class PydanticAiTool:
    label = "a Pydantic AI Tool"

    def recognises(self, value: object) -> bool:
        return is_a(value, "pydantic_ai", "Tool")

    def slots(self, value: Any) -> list[Slot]:
        original = value.function
        schema: Any = getattr(value, "function_schema", None)
        shared = getattr(schema, "function", None) is original

        def install(wrapper: Callable[..., Any]) -> None:
            value.function = wrapper
            if shared:
                schema.function = wrapper

        def restore() -> None:
            value.function = original
            if shared:
                schema.function = original

        return [Slot(original, install, restore)] if callable(original) else []


TOOL_KINDS: tuple[ToolKind, ...] = (
    AgentsFunctionTool(),
    LangChainTool(),
    StrandsTool(),
    PydanticAiTool(),
)
"""The framework tool kinds, tried in order (before a plain callable: a Strands tool is one)."""


def supported_kinds() -> str:
    """What ``agent.tools`` may name, for messages."""
    labels = [k.label for k in TOOL_KINDS]
    listed = ", ".join(labels[:-1]) + " or " + labels[-1]
    return f"a callable or a framework tool object ({listed})"


def slots_of(value: object) -> tuple[ToolKind, list[Slot]] | None:
    """The kind of framework tool ``value`` is and where its function is called from; None
    when it is none of :data:`TOOL_KINDS`."""
    for kind in TOOL_KINDS:
        if kind.recognises(value):
            return kind, kind.slots(value)
    return None
