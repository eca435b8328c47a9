"""Whether a scenario's faults depend on which invocation made a call, and in what order
(SPEC §4.2).

When the agent forwards no attribution (no cell header, baggage or trace context), the calls
of cells running side by side cannot be told apart: the proxy counts and seeds them all as the
scenario's. A scenario whose every fault fires on every matching call (``probability`` 1 or
unset, no ``after_calls``, no schedule, every turn) and injects the same thing whatever call it
meets gives each cell the same verdict either way, so its cells still run concurrently. A fault
scoped to ``turns`` needs each call's turn, which only its invocation knows: its scenario runs
one conversation at a time, each turn declared active before it is sent. Any other fault
makes the verdicts depend on the order of the calls: :func:`order_dependence` says which and
why, and those scenarios run one cell at a time.
"""

from __future__ import annotations

from flakestorm.chaos.faults.labels import (
    attack_label,
    llm_fault_label,
    schedule_of,
    tool_fault_label,
)
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.config import ContextAttack, ContextAttackType, Scenario, Scheduled


def order_dependence(scenario: Scenario) -> tuple[str, ...]:
    """Why ``scenario``'s faults depend on call order, one reason per fault that does (none:
    its cells may run concurrently without attribution)."""
    reasons = []
    faults: list[tuple[str, Scheduled, bool]] = [
        (tool_fault_label(i, f), f, False) for i, f in enumerate(scenario.tool_faults)
    ]
    faults += [
        (llm_fault_label(i, f), f, LLM_MODES[f.mode].draws)
        for i, f in enumerate(scenario.llm_faults)
    ]
    faults += [
        (attack_label(i, a), a, _draws(a))
        for i, a in enumerate(scenario.context_attacks)
        if a.type.acts_on_calls  # memory_poisoning acts on the input, not on calls
    ]
    for label, fault, draws in faults:
        why = []
        probability = getattr(fault, "probability", None)
        if probability is not None and probability < 1:
            why.append(f"probability {probability:g}")
        schedule = schedule_of(fault)
        if not schedule.every_call or schedule.turns:
            # a call's turn is known only from its invocation: without attribution, from the
            # invocation declared active, one conversation at a time (SPEC §4.2, §12)
            why.append(f"acts on {schedule.describe()}")
        if draws:
            why.append("draws its payload per call")
        if why:
            reasons.append(f"{label}: {', '.join(why)}")
    return tuple(reasons)


def _draws(attack: ContextAttack) -> bool:
    """Whether the text a tool-result attack adds is chosen at random per call."""
    if attack.type is ContextAttackType.INDIRECT_INJECTION:
        return len(attack.payloads or ()) > 1
    if attack.type is ContextAttackType.CONFLICTING_CONTEXT:
        return not attack.statements
    return False
