"""Meaning checks of faults and scenarios: each fault's mode fields (from its mode unit) and
each context attack's type fields, unique scenario names, and python agents' tool faults need
tools to wrap."""

from __future__ import annotations

from collections.abc import Iterator

from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.modes import Fields, field_names
from flakestorm.chaos.tool_modes import TOOL_MODES
from flakestorm.config import CONTEXT_ATTACK_FIELDS, AgentType, ContextAttack, Faults, Scenario
from flakestorm.semantics.scope import Scope, a, fields_set, listing
from flakestorm.validation.paths import ConfigPath

# a fault's mode-specific fields are its mode unit's (besides tool, mode, probability,
# after_calls and match_url, which every fault has)
_TOOL_MODE_FIELDS = field_names(TOOL_MODES.values())
_LLM_MODE_FIELDS = field_names(LLM_MODES.values())
_ATTACK_TYPE_FIELDS = frozenset(
    f for req, opt in CONTEXT_ATTACK_FIELDS.values() for f in (*req, *opt)
)


def fault_sets(scope: Scope) -> Iterator[tuple[ConfigPath, Faults]]:
    """The scenarios that validated, then the top-level chaos if it did."""
    for item in scope.parts.chaos_matrix:
        if item.model is not None:
            yield item.path, item.model
    if scope.parts.chaos is not None:
        yield ("chaos",), scope.parts.chaos


def check_faults(scope: Scope) -> None:
    """The fields of every fault of the scenarios and the chaos section that validated."""
    for at, faults in fault_sets(scope):
        for i, tool_fault in enumerate(faults.tool_faults):
            given = fields_set(tool_fault)
            fields = TOOL_MODES[tool_fault.mode].fields
            where = (*at, "tool_faults", i)
            mode = tool_fault.mode.value
            _mode_fields(scope, where, "tool fault", mode, given, fields, _TOOL_MODE_FIELDS)
        for i, llm_fault in enumerate(faults.llm_faults):
            given = fields_set(llm_fault)
            fields = LLM_MODES[llm_fault.mode].fields
            where = (*at, "llm_faults", i)
            mode = llm_fault.mode.value
            _mode_fields(scope, where, "LLM fault", mode, given, fields, _LLM_MODE_FIELDS)
        for i, attack in enumerate(faults.context_attacks):
            _attack(scope, (*at, "context_attacks", i), attack)


def _mode_fields(
    scope: Scope,
    at: ConfigPath,
    what: str,
    mode: str,
    given: set[str],
    fields: Fields,
    mode_fields: frozenset[str],
) -> None:
    required, optional = fields.required, fields.optional
    for name in required:
        if name not in given:
            scope.error(at, f"{a(mode)} {what} needs '{name}'")
    for name in sorted(given & mode_fields - {*required, *optional}):
        scope.error(
            (*at, name),
            f"'{name}' means nothing for {a(mode)} {what} (its fields: "
            f"{listing((*required, *optional))})",
            key=True,
        )


def _attack(scope: Scope, at: ConfigPath, attack: ContextAttack) -> None:
    required, optional = CONTEXT_ATTACK_FIELDS[attack.type]
    given = fields_set(attack)
    kind = attack.type.value
    for name in required:
        if name not in given:
            scope.error(
                at,
                f"{a(kind)} context attack needs '{name}' (its fields: "
                f"{listing((*required, *optional))})",
            )
    for name in sorted(given & _ATTACK_TYPE_FIELDS - {*required, *optional}):
        scope.error(
            (*at, name),
            f"'{name}' does not apply to {a(kind)} context attack (its fields: "
            f"{listing((*required, *optional))})",
            key=True,
        )


def check_unique_names(scope: Scope) -> None:
    """Reads ``contract.chaos_matrix``: names are compared even on scenarios wrong elsewhere."""
    names: dict[str, int] = {}
    for i, item in enumerate(scope.parts.chaos_matrix):
        name = item.text("name")
        if name is None:
            continue
        if name in names:
            scope.error(
                (*item.path, "name"),
                f"duplicate scenario name {name!r} (also chaos_matrix[{names[name]}]; "
                "names must be unique)",
            )
        else:
            names[name] = i


def check_tool_delivery(scope: Scope) -> None:
    """Reads ``agent``: a python agent's tool faults need ``agent.tools`` or a registry."""
    agent = scope.parts.agent
    if agent is None or agent.type is not AgentType.PYTHON or agent.tools or agent.tool_registry:
        return
    for at, faults in fault_sets(scope):
        if faults.tool_faults:
            name = f"scenario {faults.name!r}" if isinstance(faults, Scenario) else "chaos"
            scope.error(
                (*at, "tool_faults"),
                f"{name} has tool faults but the python agent names no tools: set "
                "agent.tools (module:attr of each tool) or agent.tool_registry",
                key=True,
            )
