"""How reports name a fault (:func:`tool_fault_label`, :func:`llm_fault_label`,
:func:`attack_label`) and a fault's schedule (:func:`schedule_of`): what the run's fault book,
the plan and ``validate`` share, without the book's machinery."""

from __future__ import annotations

from flakestorm.chaos.faults.schedule import Schedule
from flakestorm.chaos.faults.tool_modes import TOOL_MODES
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.config import ContextAttack, LlmFault, Scheduled, ToolFault


def tool_fault_label(index: int, fault: ToolFault) -> str:
    """``tool_faults[0] error(503) on market_data_api``: how reports name a tool fault."""
    detail = TOOL_MODES[fault.mode].detail(fault)
    return f"tool_faults[{index}] {fault.mode.value}{detail} on {fault.tool}"


def llm_fault_label(index: int, fault: LlmFault) -> str:
    """``llm_faults[0] truncated_response(20 tokens)``: how reports name an LLM fault."""
    return f"llm_faults[{index}] {fault.mode.value}{LLM_MODES[fault.mode].detail(fault)}"


def attack_label(index: int, attack: ContextAttack) -> str:
    return f"context_attacks[{index}] {attack.type.value}"


def schedule_of(fault: Scheduled) -> Schedule:
    """A fault's (or context attack's) schedule, ``after_calls`` folded in."""
    return Schedule.of(
        fault.calls,
        fault.every,
        fault.window_ms,
        getattr(fault, "after_calls", 0) or 0,
        fault.turns,
    )
