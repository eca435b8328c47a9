"""Where a python agent's tools and LLM callable are: one :class:`Site` per name in
``agent.tools`` / ``agent.llm`` / the tool registry, with the slots its wrappers go into.

- ``module:attr`` (attr may be dotted: ``module:client.search``) naming a callable: the slot is
  that attribute of its owner (the module, object or class; a ``staticmethod`` or
  ``classmethod`` stays one). The agent must look the callable up at call time: a name bound
  earlier with ``from tools import get_quote`` keeps the original function.
- ``module:attr`` naming a framework tool object (:mod:`.tool_kinds`): the slots are the
  function inside the object; the object stays where it is, so every reference the framework
  holds sees the wrapper.
- ``module:attr`` naming a framework object that holds tools (:mod:`.tool_holders`: a Pydantic
  AI ``Agent``, an OpenAI Agents SDK ``Agent``, a Strands ``Agent``, a LangGraph ``ToolNode``):
  one site per tool it holds, each by its own name, wrapped from the inside.
- a tool registry (``names()``, ``get(name)``, ``set(name, fn)``): a callable is swapped
  through ``set``; a framework tool object it hands out is wrapped from the inside.

A plain callable that a holder of its module keeps as one of its tools (``@agent.tool_plain``
returns the function it registered) is wrapped where it was named, which the framework never
calls: its site says so (:attr:`Site.held_by`), for the wiring hint.

A tool's name, as ``tool_faults[].tool`` refers to it, is the last part of ``attr`` (or the
registry's name for it).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flakestorm.agents.importer import Locate, describe_exception, load_reference
from flakestorm.chaos.faults.decisions import Target
from flakestorm.chaos.wrappers.tool_holders import holder_of
from flakestorm.chaos.wrappers.tool_kinds import Slot, slots_of, supported_kinds
from flakestorm.errors import ConfigError

_MISSING = object()
CALLABLE = "a callable"
"""The :attr:`Site.kind` of a plain callable."""


@dataclass(frozen=True)
class Site:
    """One wrapped tool or LLM callable: how the log names it, and where its wrappers go."""

    name: str
    url: str
    target: Target
    slots: tuple[Slot, ...]
    kind: str = CALLABLE
    """What it is, for messages (``a Strands @tool``)."""
    cause: str = ""
    """For a tool of a holder: what is probably wrong when none of its calls was seen."""
    held_by: str = ""
    """For a plain callable: the holder of its module that keeps it as a tool, if any
    (``the Pydantic AI Agent "agent:agent"``)."""


def _fail(locate: Locate, config_field: str, message: str) -> ConfigError:
    return ConfigError([locate(config_field, message)])


def _framework_slots(
    value: object, what: str, config_field: str, locate: Locate
) -> tuple[str, list[Slot]] | None:
    found = slots_of(value)
    if found is None:
        return None
    kind, slots = found
    if not slots:
        raise _fail(
            locate,
            config_field,
            f"{what} is {kind.label} whose function flakestorm cannot reach "
            "(a version of the framework this flakestorm does not know?): name the "
            "function it wraps instead",
        )
    return kind.label, slots


def _held_sites(
    value: object, reference: str, config_field: str, locate: Locate
) -> list[Site] | None:
    """The sites of the tools a framework object holds; None when it holds none."""
    holder = holder_of(value)
    if holder is None:
        return None
    sites = []
    for name, tool in holder.tools(value):
        found = slots_of(tool)
        if found is None or not found[1]:
            continue  # a tool of a kind flakestorm cannot wrap: left alone
        kind, slots = found
        sites.append(
            Site(
                name,
                f"python:{reference}/{name}",
                Target.TOOL,
                tuple(slots),
                f'{kind.label} of {holder.label} "{reference}"',
                cause=holder.cause,
            )
        )
    if not sites:
        raise _fail(
            locate,
            config_field,
            f'"{reference}" is {holder.label}, but it holds no tool flakestorm can wrap '
            f"(expected {supported_kinds()})",
        )
    return sites


def _holder_keeping(function: object, module: object) -> str:
    """The holder among ``module``'s globals that keeps ``function`` as a tool, described."""
    for attr, value in list(vars(module).items()):
        holder = holder_of(value)
        if holder is None:
            continue
        for _, tool in holder.tools(value):
            found = slots_of(tool)
            if found is not None and any(
                inspect.unwrap(slot.original) is function for slot in found[1]
            ):
                return f'{holder.label} "{module.__name__}:{attr}"'  # type: ignore[attr-defined]
    return ""


def attribute_sites(
    reference: str, config_field: str, target: Target, base_dir: Path, locate: Locate
) -> list[Site]:
    """The sites of ``agent.tools[i]`` (one per tool a holder holds) or ``agent.llm``."""
    value = load_reference(reference, base_dir, config_field, locate)
    if target is Target.TOOL:
        held = _held_sites(value, reference, config_field, locate)
        if held is not None:
            return held
    return [attribute_site(reference, config_field, target, base_dir, locate, value)]


def attribute_site(
    reference: str,
    config_field: str,
    target: Target,
    base_dir: Path,
    locate: Locate,
    value: object = _MISSING,
) -> Site:
    """The site of ``agent.tools[i]`` or ``agent.llm`` naming one callable or tool object
    (module doc)."""
    if value is _MISSING:
        value = load_reference(reference, base_dir, config_field, locate)
    module_name, _, attr_path = reference.partition(":")
    parent, _, attr = attr_path.rpartition(".")
    url = f"python:{reference}"
    if target is Target.TOOL:
        framework = _framework_slots(value, f'"{reference}"', config_field, locate)
        if framework is not None:
            return Site(attr, url, target, tuple(framework[1]), framework[0])
    if not callable(value):
        expected = supported_kinds() if target is Target.TOOL else "a callable"
        raise _fail(
            locate,
            config_field,
            f'"{reference}" is a {type(value).__name__}: expected {expected}',
        )
    owner: Any = (
        load_reference(f"{module_name}:{parent}", base_dir, config_field, locate)
        if parent
        else sys.modules[module_name]
    )
    raw = vars(owner).get(attr, _MISSING) if hasattr(owner, "__dict__") else value
    original: Callable[..., Any] = value
    rewrap: Callable[[Callable[..., Any]], Any] = _same
    # the descriptor itself, also when a base class defines it
    mro = owner.__mro__ if inspect.isclass(owner) else ()
    static = next((vars(k)[attr] for k in mro if attr in vars(k)), None)
    if isinstance(static, (staticmethod, classmethod)):
        original, rewrap = static.__func__, type(static)
    elif inspect.isfunction(static):
        original = static

    def install(wrapper: Callable[..., Any]) -> None:
        setattr(owner, attr, rewrap(wrapper))

    def restore() -> None:
        if raw is _MISSING:
            delattr(owner, attr)
        else:
            setattr(owner, attr, raw)

    keeps = target is Target.TOOL and inspect.ismodule(owner)
    held_by = _holder_keeping(value, owner) if keeps else ""
    return Site(attr, url, target, (Slot(original, install, restore),), held_by=held_by)


def _same(wrapper: Callable[..., Any]) -> Any:
    return wrapper


def registry_sites(reference: str, base_dir: Path, locate: Locate) -> list[Site]:
    """The sites of every tool of ``agent.tool_registry``."""
    config_field = "agent.tool_registry"

    def fail(message: str) -> ConfigError:
        return _fail(locate, config_field, message)

    registry = load_reference(reference, base_dir, config_field, locate)
    missing = [m for m in ("names", "get", "set") if not callable(getattr(registry, m, None))]
    if missing:
        without = ", ".join(f"{m}()" for m in missing)
        raise fail(
            f'"{reference}" is a {type(registry).__name__} without {without}: '
            "expected a tool registry (names() -> list[str], get(name) -> callable, "
            "set(name, callable))"
        )
    try:
        names = registry.names()
    except Exception as exc:
        raise fail(f'"{reference}".names() failed: {describe_exception(exc)}') from None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        shown = type(names).__name__ if not isinstance(names, (list, tuple)) else "a non-str name"
        raise fail(f'"{reference}".names() returned {shown}: expected a list of str')
    sites = []
    for name in names:
        try:
            tool = registry.get(name)
        except Exception as exc:
            raise fail(f'"{reference}".get({name!r}) failed: {describe_exception(exc)}') from None
        url = f"python:{reference}/{name}"
        what = f'"{reference}".get({name!r})'
        framework = _framework_slots(tool, what, config_field, locate)
        if framework is not None:
            sites.append(Site(name, url, Target.TOOL, tuple(framework[1]), framework[0]))
            continue
        if not callable(tool):
            raise fail(f"{what} returned a {type(tool).__name__}: expected {supported_kinds()}")
        slot = Slot(
            tool, functools.partial(registry.set, name), functools.partial(registry.set, name, tool)
        )
        sites.append(Site(name, url, Target.TOOL, (slot,)))
    return sites
