"""The fault book's decisions (SPEC §4.1): which tool-result attacks a call can carry when a
tool fault fires on it, and how that is recorded as delivery proof."""

from __future__ import annotations

from typing import Any

import pytest

from flakestorm.chaos.faults import ActiveScenario, FaultBook
from flakestorm.config import ContextAttack, ToolFault, ToolFaultMode

INJECTION = ContextAttack.model_validate({"type": "indirect_injection", "payloads": ["obey"]})
LABEL = "context_attacks[0] indirect_injection"
MALICIOUS = "tool_faults[0] malicious_response on market_data"


def book(*faults: ToolFault, attack: ContextAttack = INJECTION) -> FaultBook:
    return FaultBook(ActiveScenario("storm", 7, tool_faults=faults, context_attacks=(attack,)))


def fault(mode: str, **fields: Any) -> ToolFault:
    return ToolFault.model_validate({"tool": "market_data", "mode": mode, **fields})


@pytest.mark.parametrize(
    ("mode", "fields", "label"),
    [
        ("error", {}, "tool_faults[0] error(503) on market_data"),
        ("timeout", {"delay_ms": 10}, "tool_faults[0] timeout(10 ms) on market_data"),
        ("malformed", {}, "tool_faults[0] malformed on market_data"),
        ("malicious_response", {"payload": "x"}, MALICIOUS),
    ],
)
def test_a_fault_that_replaces_the_result_leaves_the_attack_nothing_to_poison(
    mode: str, fields: dict[str, Any], label: str
) -> None:
    decision = book(fault(mode, **fields)).tool_call("market_data", "u", "c1")
    assert decision.tool_fault is not None and decision.attacks == ()
    assert decision.matched == (label,)  # the attack is not proven by this call
    assert decision.replaced == ((LABEL, label),)
    assert decision.fired == (label,)


def test_a_slow_fault_leaves_the_real_result_to_the_attack() -> None:
    decision = book(fault("slow", delay_ms=50)).tool_call("market_data", "u", "c1")
    assert decision.tool_fault is not None
    assert [a.type.value for _, a in decision.attacks] == ["indirect_injection"]
    assert decision.matched == ("tool_faults[0] slow(50 ms) on market_data", LABEL)
    assert decision.replaced == ()
    assert decision.fired == ("tool_faults[0] slow(50 ms) on market_data", LABEL)


def test_a_call_the_fault_does_not_fire_on_carries_the_attack() -> None:
    faults = book(fault("error", after_calls=1))
    first, second = (faults.tool_call("market_data", "u", "c1") for _ in range(2))
    assert first.tool_fault is None and first.matched[-1] == LABEL and first.replaced == ()
    assert second.tool_fault is not None and LABEL not in second.matched
    assert second.replaced == ((LABEL, "tool_faults[0] error(503) on market_data"),)


def test_an_attack_on_another_tool_is_not_replaced_by_this_tools_fault() -> None:
    attack = ContextAttack.model_validate(
        {"type": "indirect_injection", "payloads": ["obey"], "tool": "news"}
    )
    decision = book(fault("error"), attack=attack).tool_call("market_data", "u", "c1")
    assert decision.replaced == () and LABEL not in decision.matched


def test_an_attack_that_does_not_fire_by_its_own_probability_is_still_matched() -> None:
    attack = ContextAttack.model_validate(
        {"type": "indirect_injection", "payloads": ["obey"], "trigger_probability": 0.0}
    )
    decision = book(attack=attack).tool_call("market_data", "u", "c1")
    assert decision.attacks == () and decision.matched == (LABEL,) and decision.replaced == ()


def test_every_mode_is_covered_above() -> None:
    assert {m.value for m in ToolFaultMode} == {
        "error",
        "timeout",
        "malformed",
        "malicious_response",
        "slow",
    }
