"""Meaning checks of faults and scenarios: each fault's mode fields (from its mode unit) and
each context attack's type fields, unique scenario names, and python agents' tool faults need
tools to wrap."""

from __future__ import annotations

from flakestorm.agents.source import defines_function
from flakestorm.chaos.channels.choice import undeliverable
from flakestorm.chaos.faults.modes import Fields, field_names
from flakestorm.chaos.faults.schedule import CALLS_EXAMPLES, Schedule, ScheduleError, parse_calls
from flakestorm.chaos.faults.tool_modes import TOOL_MODES
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.config import (
    CONTEXT_ATTACK_FIELDS,
    AgentType,
    ContextAttack,
    Faults,
    LlmFault,
    Scheduled,
    ToolFault,
)
from flakestorm.meaning.scope import Scope, a, fields_set, listing, type_fields
from flakestorm.meaning.sweeps import SweepError, expand, parse_path, swept_name, value_text
from flakestorm.structure.paths import ConfigPath
from flakestorm.structure.wording import did_you_mean

# a fault's mode-specific fields are its mode unit's (besides tool, mode, probability,
# after_calls and match_url, which every fault has)
_TOOL_MODE_FIELDS = field_names(TOOL_MODES.values())
_LLM_MODE_FIELDS = field_names(LLM_MODES.values())
_ATTACKS = frozenset(f for req, opt in CONTEXT_ATTACK_FIELDS.values() for f in (*req, *opt))


def check_faults(scope: Scope) -> None:
    """The fields of every fault that validated, in the scenarios and the chaos section."""
    for faults in scope.parts.fault_sets:
        for tool in faults.tool_faults:
            if tool.model is not None:
                fields = TOOL_MODES[tool.model.mode].fields
                _fault(scope, tool.path, "tool fault", tool.model, fields, _TOOL_MODE_FIELDS)
        for llm in faults.llm_faults:
            if llm.model is not None:
                fields = LLM_MODES[llm.model.mode].fields
                _fault(scope, llm.path, "LLM fault", llm.model, fields, _LLM_MODE_FIELDS)
        for attack in faults.context_attacks:
            if attack.model is not None:
                by_type = CONTEXT_ATTACK_FIELDS[attack.model.type]
                type_fields(scope, attack.path, "context attack", attack.model, by_type, _ATTACKS)
                _schedule(scope, attack.path, attack.model, 0)


def _fault(
    scope: Scope,
    at: ConfigPath,
    what: str,
    fault: ToolFault | LlmFault,
    fields: Fields,
    mode_fields: frozenset[str],
) -> None:
    """A tool or LLM fault's fields (its mode unit's) and its schedule."""
    _mode_fields(scope, at, what, fault.mode.value, fields_set(fault), fields, mode_fields)
    _schedule(scope, at, fault, fault.after_calls)


def _mode_fields(
    scope: Scope,
    at: ConfigPath,
    what: str,
    mode: str,
    given: set[str],
    fields: Fields,
    mode_fields: frozenset[str],
) -> None:
    required = fields.required
    for name in required:
        if name not in given:
            scope.error(at, f"{a(mode)} {what} needs '{name}'")
    if fields.one_of and not given & set(fields.one_of):
        either = " or ".join(f"'{name}'" for name in fields.one_of)
        scope.error(at, f"{a(mode)} {what} needs {either}")
    for name in sorted(given & mode_fields - set(fields.names)):
        scope.error(
            (*at, name),
            f"'{name}' means nothing for {a(mode)} {what} (its fields: {listing(fields.names)})",
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
    """Reads ``contract.chaos_matrix``: names are compared even on scenarios wrong elsewhere,
    a sweep's scenarios (``name[value]``) with the rest."""
    names: dict[str, int] = {}
    swept: set[str] = set()
    for i, item in enumerate(scope.parts.chaos_matrix):
        name = item.text("name")
        if name is None:
            continue
        sweep = item.model.sweep if item.model is not None else None
        own = [name] if sweep is None else [swept_name(name, v) for v in sweep.values]
        for each in own:
            if each in names:
                also = " (a sweep's scenarios are NAME[VALUE])" if swept & {each} or sweep else ""
                scope.error(
                    (*item.path, "name"),
                    f"duplicate scenario name {each!r} (also chaos_matrix[{names[each]}]; "
                    f"names must be unique){also}",
                )
                break
            names[each] = i
        if sweep is not None:
            swept.update(own)


def check_sweeps(scope: Scope) -> None:
    """Reads ``contract.chaos_matrix[*]``: a sweep names a numeric field of one of its
    scenario's faults that the fault uses, with distinct values each fault accepts."""
    for item in scope.parts.chaos_matrix:
        scenario = item.model
        if scenario is None or scenario.sweep is None:
            continue
        at = (*item.path, "sweep")
        sweep = scenario.sweep
        try:
            path = parse_path(sweep.field)
        except SweepError as exc:
            scope.error((*at, "field"), str(exc))
            continue
        faults = getattr(scenario, path.faults)
        if path.index < len(faults):
            unused = _unused(path.faults, faults[path.index], path.field)
            if unused:
                scope.error((*at, "field"), f"{path}: {unused}")
                continue
        texts = [value_text(v) for v in sweep.values]
        if len(set(texts)) != len(texts):
            scope.error((*at, "values"), f"the values repeat ({', '.join(texts)}): give each once")
            continue
        try:
            expand(scenario)
        except SweepError as exc:
            scope.error(at, f"{path}: {exc}")


def _unused(faults: str, fault: ToolFault | LlmFault | ContextAttack, field: str) -> str:
    """Why ``field`` means nothing for ``fault`` (empty when it does)."""
    if isinstance(fault, ContextAttack):
        required, optional = CONTEXT_ATTACK_FIELDS[fault.type]
        if field in (*required, *optional):
            return ""
        return f"'{field}' means nothing for {a(fault.type.value)} context attack"
    if field in ("probability", "calls"):
        return ""
    if isinstance(fault, ToolFault):
        fields, what, mode = TOOL_MODES[fault.mode].fields, "tool fault", fault.mode.value
    else:
        fields, what, mode = LLM_MODES[fault.mode].fields, "LLM fault", fault.mode.value
    if field in fields.names:
        return ""
    return f"'{field}' means nothing for {a(mode)} {what} (its fields: {listing(fields.names)})"


def check_delivery(scope: Scope) -> None:
    """Reads ``agent`` and ``proxy``: what a python agent lacks to receive each scenario's faults
    (:func:`flakestorm.chaos.channels.choice.undeliverable`, the rule the run keeps: LLM faults need
    ``agent.llm``; tool faults need tools to wrap or HTTP calls to route). A fault wrong in itself
    is still a fault of its kind."""
    agent, proxy = scope.parts.agent, scope.parts.proxy
    if agent is None or agent.type is not AgentType.PYTHON:
        return
    for faults in scope.parts.fault_sets:
        written = Faults.model_construct(
            tool_faults=[item.model or item.raw for item in faults.tool_faults],
            llm_faults=[item.model or item.raw for item in faults.llm_faults],
            context_attacks=[a.model for a in faults.context_attacks if a.model is not None],
        )
        for where, message in undeliverable(agent, proxy, written):
            scope.error((*faults.path, where), f"{faults.label} {message}", key=True)


def check_tool_names(scope: Scope) -> None:
    """Reads ``agent`` and ``proxy``: with every tool name known before the run — the routes of
    ``proxy.tools`` and, for a python agent, the attribute names of the tools it wraps when the
    source shows each is a function (not a framework object holding tools of its own names,
    nor a registry) — and no MCP server (whose tools are known only at run time: :mod:`.mcp`
    warns), a tool fault's ``tool`` must be one of them, ``*``, or matched by its
    ``match_url``: a name no call can have is a config error with "did you mean"."""
    agent, proxy = scope.parts.agent, scope.parts.proxy
    if agent is None or (proxy is not None and proxy.mcp):
        return
    routes = sorted(proxy.tools) if proxy is not None else []
    agents = sorted(proxy.a2a) if proxy is not None else []
    wrapped: list[str] = []
    if agent.type is AgentType.PYTHON:
        if agent.tool_registry:
            return
        for reference in agent.tools or ():
            if defines_function(reference, scope.base_dir) is not True:
                return  # a holder's tools, or a source that does not say: named at run time
            wrapped.append(reference.partition(":")[2])
    known = sorted({*routes, *wrapped, *agents})
    if not known:
        return  # nothing to name: the delivery check says what is missing
    kinds = (
        ("a route of proxy.tools", routes),
        ("a tool the agent wraps", wrapped),
        ("an A2A agent of proxy.a2a", agents),
    )
    what = " or ".join(kind for kind, names in kinds if names)
    for faults in scope.parts.fault_sets:
        for item in faults.tool_faults:
            fault = item.model
            if fault is None or fault.match_url or fault.tool == "*" or fault.tool in known:
                continue
            guess = did_you_mean(fault.tool, known)
            hint = f" (did you mean '{guess}'?)" if guess else ""
            scope.error(
                (*item.path, "tool"),
                f"{fault.tool!r} is not {what}{hint}: no call could be of that tool; a fault's "
                f"tool is one of {listing(known)}, '*', or any name with match_url",
            )
