"""The fault book's decisions (SPEC §4.1): which context attacks a call can carry when a fault
fires on it (a tool-result attack on a tool call, ``injection_via_context`` on an LLM call),
and how that is recorded as delivery proof."""

from __future__ import annotations

from typing import Any

import pytest

from flakestorm.chaos.faults import decisions
from flakestorm.chaos.faults.decisions import ActiveScenario, FaultBook
from flakestorm.config import (
    A2aMethod,
    ContextAttack,
    LlmFault,
    LlmFaultMode,
    ToolFault,
    ToolFaultMode,
)

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


@pytest.mark.parametrize("mode", ["empty", "tool_removed", "session_expired"])
def test_the_modes_made_for_mcp_tools_answer_in_place_of_the_tool(mode: str) -> None:
    decision = book(fault(mode)).tool_call("market_data", "u", "c1")
    label = f"tool_faults[0] {mode} on market_data"
    assert decision.tool_fault is not None and decision.attacks == ()
    assert decision.replaced == ((LABEL, label),)


def test_an_mcp_tool_is_matched_by_its_own_name_and_by_its_servers() -> None:
    bare = book(fault("error", tool="get_quote"))
    assert bare.tool_call("quotes.get_quote", "u", "c1", short="get_quote").tool_fault is not None
    assert bare.tool_call("quotes.get_news", "u", "c1", short="get_news").tool_fault is None
    qualified = book(fault("error", tool="quotes.get_quote"))
    call = qualified.tool_call("quotes.get_quote", "u", "c1", short="get_quote")
    assert call.tool_fault is not None
    other = qualified.tool_call("prices.get_quote", "u", "c1", short="get_quote")
    assert other.tool_fault is None


def test_every_mode_is_covered_above() -> None:
    assert {m.value for m in ToolFaultMode} == {
        "error",
        "timeout",
        "malformed",
        "malicious_response",
        "slow",
        "empty",
        "tool_removed",
        "session_expired",
        "task_state",
        "lost_reply",
        "stream_cut",
        "card",
    }


def test_a_fault_scoped_to_an_a2a_method_matches_only_its_calls() -> None:
    scoped = book(fault("lost_reply", tool="booking", method="SendMessage"))
    send = scoped.tool_call("booking", "u", "c1", method=A2aMethod.SEND_MESSAGE)
    look = scoped.tool_call("booking", "u", "c1", method=A2aMethod.GET_TASK)
    assert send.tool_fault is not None and look.tool_fault is None
    # a fault with no method acts on every call of the agent
    anyone = book(fault("lost_reply", tool="booking"))
    assert anyone.tool_call("booking", "u", "c1", method=A2aMethod.GET_TASK).tool_fault


# --------------------------------------------------------------------------- LLM calls

CONTEXT = ContextAttack.model_validate({"type": "injection_via_context", "payload": "obey"})
CONTEXT_LABEL = "context_attacks[0] injection_via_context"


def llm_book(fault: LlmFault) -> FaultBook:
    return FaultBook(ActiveScenario("storm", 7, llm_faults=(fault,), context_attacks=(CONTEXT,)))


@pytest.mark.parametrize(
    ("mode", "fields", "label"),
    [
        ("rate_limit", {}, "llm_faults[0] rate_limit"),
        ("timeout", {"delay_ms": 10}, "llm_faults[0] timeout"),
    ],
)
def test_an_llm_fault_that_answers_instead_of_the_llm_leaves_the_injection_no_request(
    mode: str, fields: dict[str, Any], label: str
) -> None:
    decision = llm_book(LlmFault.model_validate({"mode": mode, **fields})).llm_call("c1")
    assert decision.llm_fault is not None and decision.attacks == ()
    assert decision.matched == (label,)  # the injection is not proven by this call
    assert decision.replaced == ((CONTEXT_LABEL, label),)
    assert decision.fired == (label,)


@pytest.mark.parametrize(
    ("mode", "fields"),
    [
        ("truncated_response", {"max_tokens": 3}),
        ("empty", {}),
        ("garbage", {}),
        ("response_drift", {"drift_type": "tone_shift"}),
        ("cut_stream", {"after_chunks": 3}),
        ("slow_stream", {"first_token_ms": 300}),
    ],
)
def test_an_llm_fault_on_the_real_reply_lets_the_injection_reach_the_llm(
    mode: str, fields: dict[str, Any]
) -> None:
    decision = llm_book(LlmFault.model_validate({"mode": mode, **fields})).llm_call("c1")
    assert decision.llm_fault is not None and decision.replaced == ()
    assert [a.type.value for _, a in decision.attacks] == ["injection_via_context"]
    assert decision.matched[-1] == CONTEXT_LABEL
    assert decision.fired[-1] == CONTEXT_LABEL


def test_an_llm_call_the_fault_does_not_fire_on_carries_the_injection() -> None:
    faults = llm_book(LlmFault.model_validate({"mode": "rate_limit", "after_calls": 1}))
    first, second = (faults.llm_call("c1") for _ in range(2))
    assert first.llm_fault is None and first.matched[-1] == CONTEXT_LABEL
    assert first.replaced == () and len(first.attacks) == 1
    assert second.replaced == ((CONTEXT_LABEL, "llm_faults[0] rate_limit"),)
    assert CONTEXT_LABEL not in second.matched


def test_every_llm_mode_is_covered_above() -> None:
    assert {m.value for m in LlmFaultMode} == {
        "rate_limit",
        "timeout",
        "truncated_response",
        "empty",
        "garbage",
        "response_drift",
        "cut_stream",
        "slow_stream",
    }


def test_a_fault_book_forgets_the_call_counts_of_its_oldest_invocations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(decisions, "MAX_COUNTS", 2)  # a scenario of any size: bounded memory
    faults = book(fault("error"))
    assert faults.tool_call("market_data", "u", "c1").call_index == 0
    assert faults.tool_call("market_data", "u", "c1").call_index == 1
    assert faults.tool_call("market_data", "u", "c2").call_index == 0
    assert faults.tool_call("market_data", "u", "c3").call_index == 0  # c1's counts forgotten
    assert faults.tool_call("market_data", "u", "c2").call_index == 1
    assert faults.tool_call("market_data", "u", "c1").call_index == 0
