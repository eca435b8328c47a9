"""Meaning checks of conversations (SPEC §12): a conversation needs a way to be isolated (a
session — for a python agent, a callable taking ``session_id`` — or a reset before it), and a
``turn: N`` or ``turns: [N, ...]`` names a turn some conversation has."""

from __future__ import annotations

from flakestorm.agents.source import no_session, takes_session
from flakestorm.config import AgentType, Conversation, turns_of
from flakestorm.meaning.scope import Scope


def check_isolation(scope: Scope) -> None:
    """Reads ``golden_prompts`` and ``agent``. An http agent without ``agent.session`` or a
    reset cannot hold a conversation apart from another; nor can a python agent without
    ``reset_function`` whose callable, as its source says (:mod:`flakestorm.agents.source`,
    read without importing it), takes no ``session_id``. When the source does not decide it
    (a class, a decorated function, no source file), the run start checks the imported
    callable."""
    agent, prompts = scope.parts.agent, scope.parts.golden_prompts or []
    conversations = [i for i, p in enumerate(prompts) if isinstance(p, Conversation)]
    if agent is None or not conversations:
        return
    if agent.type is AgentType.HTTP:
        if agent.session is not None or agent.reset_endpoint or agent.reset_function:
            return
        message = (
            "a conversation is sent in one session of its own, and this agent has no way "
            "to isolate it: set agent.session ({header: NAME} or {template: true}) or "
            "agent.reset_endpoint"
        )
    else:
        if agent.reset_function or takes_session(agent.endpoint, scope.base_dir) is not False:
            return
        message = no_session(agent.endpoint)
    for i in conversations:
        scope.error(("golden_prompts", i), message)


def check_turns(scope: Scope) -> None:
    """Reads ``golden_prompts``. Each invariant's ``turn: N`` and each fault's and context
    attack's ``turns`` within the longest conversation."""
    longest = max((len(turns_of(p)) for p in scope.parts.golden_prompts or []), default=1)
    has = f"the longest conversation has {longest} turn{'s' if longest != 1 else ''}"
    for items in (scope.parts.invariants, scope.parts.contract_invariants):
        for item in items:
            inv = item.model
            if inv is None or not isinstance(inv.turn, int):
                continue
            if inv.probes and inv.turn > 1:
                scope.error(
                    (*item.path, "turn"),
                    f"turn {inv.turn}: this invariant sends its probes, one message each (turn 1)",
                )
            elif inv.turn > longest:
                scope.error(
                    (*item.path, "turn"),
                    f"turn {inv.turn} is past every golden prompt: {has} "
                    "(use a turn number up to it, `last` or `every`)",
                )
    for faults in scope.parts.fault_sets:
        scoped = [
            (item.path, item.model.turns)
            for items in (faults.tool_faults, faults.llm_faults, faults.context_attacks)
            for item in items
            if item.model is not None and item.model.turns is not None
        ]
        for at, turns in scoped:
            past = [n for n in turns if n > longest]
            if past:
                shown = ", ".join(map(str, past))
                scope.error(
                    (*at, "turns"),
                    f"turn{'s' if len(past) > 1 else ''} {shown} past every golden prompt: "
                    f"{has}, so the fault could never be active",
                )
