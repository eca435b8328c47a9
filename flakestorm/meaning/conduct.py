"""Meaning checks of the invariants on what the agent did (SPEC §15): calls and tokens counted
in whole numbers, a ``target`` some call can have (with "did you mean"), ``max_amplification``
only where a scenario without faults gives it something to compare with, and where each is
judged (the matrix phases, not the mutation phase: a warning)."""

from __future__ import annotations

from collections.abc import Sequence

from flakestorm.agents.source import defines_function
from flakestorm.config import (
    AgentConfig,
    AgentType,
    Invariant,
    InvariantType,
    Proxy,
    Scenario,
    When,
)
from flakestorm.meaning.scope import Scope, listing
from flakestorm.structure.paths import ConfigPath
from flakestorm.structure.wording import did_you_mean

_WHOLE = (InvariantType.MAX_CALLS, InvariantType.MAX_TOKENS)
"""Types whose ``max`` counts calls or tokens: a whole number."""
_LLM_ONLY = (InvariantType.MAX_TOKENS, InvariantType.MAX_COST)


def check_conduct(scope: Scope) -> None:
    """Reads ``agent`` and ``proxy``: each invariant on calls, top-level and the contract's."""
    agent, proxy = scope.parts.agent, scope.parts.proxy
    assert agent is not None
    known = _known_tools(scope, agent, proxy)
    routed = proxy is not None and bool(proxy.tools or proxy.mcp_routes or proxy.a2a)
    seen = agent.type is AgentType.HTTP or bool(agent.tools or agent.tool_registry or agent.llm)
    for items in (scope.parts.invariants, scope.parts.contract_invariants):
        for item in items:
            inv = item.model
            if inv is None or not inv.type.reads_calls:
                continue
            if inv.type in _WHOLE and inv.max is not None and inv.max != int(inv.max):
                scope.error(
                    (*item.path, "max"),
                    f"{inv.type.value} counts whole {_counted(inv)}: max must be a whole "
                    f"number, got {inv.max:g}",
                )
            if not (seen or routed):
                scope.error(
                    (*item.path, "type"),
                    f"{inv.type.value} counts the agent's calls, but flakestorm sees none of this "
                    "python agent's: set agent.llm, agent.tools (or agent.tool_registry), or "
                    "proxy.tools for the URLs its tools call",
                )
            elif inv.target is not None:
                _target(scope, (*item.path, "target"), inv, agent, proxy, known)


def _counted(inv: Invariant) -> str:
    return "calls" if inv.type is InvariantType.MAX_CALLS else "tokens"


def _known_tools(scope: Scope, agent: AgentConfig, proxy: Proxy | None) -> list[str] | None:
    """Every tool name a call can have, when all are known before the run (None when some
    are named only at run time: a registry, a framework object's tools)."""
    routes = list(proxy.tools) if proxy is not None else []
    mcp = list(proxy.mcp) if proxy is not None else []
    agents = list(proxy.a2a) if proxy is not None else []
    wrapped: list[str] = []
    if agent.type is AgentType.PYTHON:
        if agent.tool_registry:
            return None
        for reference in agent.tools or ():
            if defines_function(reference, scope.base_dir) is not True:
                return None
            wrapped.append(reference.partition(":")[2])
    return sorted({*routes, *wrapped, *mcp, *agents})


def _target(
    scope: Scope,
    at: ConfigPath,
    inv: Invariant,
    agent: AgentConfig,
    proxy: Proxy | None,
    known: list[str] | None,
) -> None:
    target = inv.target or ""
    if target == "*":
        return
    if target == "llm":
        if agent.type is AgentType.PYTHON and agent.llm is None:
            scope.error(
                at,
                "target llm: the python agent names no `agent.llm` callable, so flakestorm "
                "sees none of its LLM calls: set agent.llm to the module:attr it calls its LLM "
                "through",
            )
        return
    if inv.type in _LLM_ONLY:
        return  # its structure says it counts the LLM (a target here is a field error)
    mcp = list(proxy.mcp) if proxy is not None else []
    server, dot, _ = target.partition(".")
    if dot and server in mcp:
        return  # an MCP server's tools are known only at run time
    if mcp and not dot:
        return  # a bare name may be an MCP tool of any server
    if known is None or target in known:
        return
    names = ["llm", "*", *known]
    guess = did_you_mean(target, names)
    hint = f" (did you mean '{guess}'?)" if guess else ""
    scope.error(
        at,
        f"{target!r} is no target a call can have{hint}: a target is llm, '*', a route of "
        f"proxy.tools, a tool the agent wraps, SERVER.TOOL of proxy.mcp or an A2A agent of "
        f"proxy.a2a ({listing(names)})",
    )


def check_amplification(scope: Scope) -> None:
    """Reads ``contract.chaos_matrix[*]`` and ``chaos``: ``max_amplification`` compares with the
    same prompt in a scenario without faults, which its matrix must have."""
    parts = scope.parts
    scenarios = [item.model for item in parts.chaos_matrix if item.model is not None]
    for item in parts.contract_invariants:
        inv = item.model
        if inv is None or inv.type is not InvariantType.MAX_AMPLIFICATION:
            continue
        if inv.when is not When.ALWAYS:
            scope.error(
                (*item.path, "when"),
                f"max_amplification compares each scenario with the one without faults, so it "
                f"runs in both: `when: {inv.when.value}` leaves one of them out (use `always`)",
            )
        if not _calm(scenarios):
            scope.error(
                (*item.path, "type"),
                "max_amplification compares each cell with the same prompt without chaos, but "
                "contract.chaos_matrix has no scenario without faults: add one (e.g. "
                "`- name: no-chaos`)",
            )
    for top in parts.invariants:
        if top.model is None or top.model.type is not InvariantType.MAX_AMPLIFICATION:
            continue
        if parts.chaos is not None:
            scope.error(
                (*top.path, "type"),
                "max_amplification compares with the same prompt without chaos, but the chaos "
                "phase runs only its `chaos` scenario: put it in contract.invariants, beside a "
                "contract.chaos_matrix scenario without faults",
            )


def _calm(scenarios: Sequence[Scenario]) -> bool:
    return any(not s.has_chaos for s in scenarios)


def check_conduct_phases(scope: Scope) -> None:
    """Reads nothing whole: an invariant on calls is judged in the matrices (the contract, the
    chaos phase), not on mutations nor replayed sessions: a warning where the config has
    those."""
    written = scope.parts.written
    places = (
        (scope.parts.invariants, "mutations", "the mutation phase judges each mutation's reply"),
        (scope.parts.contract_invariants, "replays", "the replay phase judges each replayed reply"),
    )
    for items, section, why in places:
        if section not in written:
            continue
        for item in items:
            inv = item.model
            if inv is not None and inv.type.reads_calls:
                scope.warn(
                    (*item.path, "type"),
                    f"{inv.type.value} is judged on the calls of the contract and chaos "
                    f"matrices' cells; {why}, not its calls, so it does not check this invariant",
                )
