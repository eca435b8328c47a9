"""Meaning checks of faults and scenarios: each fault's mode fields (from its mode unit) and
each context attack's type fields, unique scenario names, and python agents' tool faults need
tools to wrap."""

from __future__ import annotations

from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.modes import Fields, field_names
from flakestorm.chaos.schedule import CALLS_EXAMPLES, Schedule, ScheduleError, parse_calls
from flakestorm.chaos.tool_modes import TOOL_MODES
from flakestorm.config import CONTEXT_ATTACK_FIELDS, AgentType, ContextAttack, Scheduled
from flakestorm.semantics.scope import Scope, a, fields_set, listing
from flakestorm.validation.paths import ConfigPath

# a fault's mode-specific fields are its mode unit's (besides tool, mode, probability,
# after_calls and match_url, which every fault has)
_TOOL_MODE_FIELDS = field_names(TOOL_MODES.values())
_LLM_MODE_FIELDS = field_names(LLM_MODES.values())
_ATTACK_TYPE_FIELDS = frozenset(
    f for req, opt in CONTEXT_ATTACK_FIELDS.values() for f in (*req, *opt)
)


def check_faults(scope: Scope) -> None:
    """The fields of every fault that validated, in the scenarios and the chaos section."""
    for faults in scope.parts.fault_sets:
        for item in faults.tool_faults:
            if item.model is not None:
                given = fields_set(item.model)
                fields = TOOL_MODES[item.model.mode].fields
                mode = item.model.mode.value
                _mode_fields(scope, item.path, "tool fault", mode, given, fields, _TOOL_MODE_FIELDS)
                _schedule(scope, item.path, item.model, item.model.after_calls)
        for llm in faults.llm_faults:
            if llm.model is not None:
                given = fields_set(llm.model)
                fields = LLM_MODES[llm.model.mode].fields
                mode = llm.model.mode.value
                _mode_fields(scope, llm.path, "LLM fault", mode, given, fields, _LLM_MODE_FIELDS)
                _schedule(scope, llm.path, llm.model, llm.model.after_calls)
        for attack in faults.context_attacks:
            if attack.model is not None:
                _attack(scope, attack.path, attack.model)
                _schedule(scope, attack.path, attack.model, 0)


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


def _schedule(scope: Scope, at: ConfigPath, fault: Scheduled, after_calls: int) -> None:
    """A schedule's own checks: ``calls`` parses, ``after_calls`` is not given beside it, the
    window opens before it closes, and some call can be inside it."""
    calls = None
    if fault.calls is not None:
        try:
            calls = parse_calls(fault.calls)
        except ScheduleError as exc:
            scope.error((*at, "calls"), str(exc))
            return
        if after_calls:
            scope.error(
                (*at, "after_calls"),
                f'after_calls: {after_calls} is a shorthand for calls: "{after_calls + 1}-"; '
                "give one of them",
                key=True,
            )
            return
    window = fault.window_ms
    if window is not None and window[0] >= window[1]:
        scope.error(
            (*at, "window_ms"),
            f"window_ms [{window[0]}, {window[1]}] closes before it opens: give [FROM, TO] "
            "in ms after the invocation started, FROM below TO (e.g. [0, 500])",
        )
        return
    schedule = Schedule(calls or (), fault.every, window)
    if not schedule.can_fire():
        scope.error(
            at,
            f"this schedule acts on no call ({schedule.describe()}): no call number in "
            f"calls is a multiple of every ({CALLS_EXAMPLES})",
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
    """Reads ``agent``: a python agent's tool faults need ``agent.tools`` or a registry (a
    tool fault wrong in itself is still a tool fault)."""
    agent = scope.parts.agent
    if agent is None or agent.type is not AgentType.PYTHON or agent.tools or agent.tool_registry:
        return
    for faults in scope.parts.fault_sets:
        if faults.tool_faults:
            scope.error(
                (*faults.path, "tool_faults"),
                f"{faults.label} has tool faults but the python agent names no tools: set "
                "agent.tools (module:attr of each tool) or agent.tool_registry",
                key=True,
            )
