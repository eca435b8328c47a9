"""The checks of what the agent did (SPEC §15), one invocation's calls at a time: counts, tokens,
cost, amplification, Retry-After kept, duplicate effects — each verdict and reason worked out
by hand from the calls written here."""

from __future__ import annotations

from typing import Any

import pytest

from flakestorm.checks.conduct import Conduct, Measures, Uncountable, counts, judge_conduct
from flakestorm.config import Invariant
from flakestorm.results.scenarios import CallRecord
from flakestorm.results.spend import Unpriced, aims_at, cost_of, spend_of
from flakestorm.results.usage import Counted, Usage


def call(target: str = "llm", tool: str | None = None, **fields: Any) -> CallRecord:
    return CallRecord(target=target, tool=tool, method=fields.pop("method", "POST"), url="u",
                      status=fields.pop("status", 200), **fields)  # fmt: skip


def billed(input_: int, output: int, model: str = "gpt-test", **more: Any) -> Usage:
    return Usage(input=input_, output=output, model=model, **more)


def price(usage: Usage) -> float | None:
    """$1 per million input tokens, $2 per million output tokens, cache reads $0.5, for
    ``gpt-test``; no other model has a price."""
    if usage.model != "gpt-test":
        return None
    return (usage.input + usage.cache_write + usage.output * 2 + usage.cache_read * 0.5) / 1e6


def judged(fields: dict[str, Any], calls: list[CallRecord], **conduct: Any) -> tuple[bool, str]:
    return judge_conduct(Invariant(**fields), Conduct(calls, **conduct))


LLM_3 = [
    call(usage=billed(100, 20)),
    call(usage=billed(100, 20)),
    call(status=429, fired=("llm_faults[0] rate_limit",)),
]
"""Three LLM calls: two billed 120 tokens each, one a faulted attempt (never billed)."""


def test_max_calls_counts_every_attempt_to_its_target() -> None:
    quotes = [call("tool", "quotes", fired=("tool_faults[0] error(503)",)), call("tool", "quotes")]
    fields = {"type": "max_calls", "target": "llm", "max": 2}
    assert judged(fields, [*LLM_3, *quotes]) == (False, "3 calls to llm (1 faulted) > 2")
    fields = {"type": "max_calls", "target": "quotes", "max": 2}
    assert judged(fields, [*LLM_3, *quotes]) == (True, "2 calls to quotes (1 faulted) ≤ 2")
    fields = {"type": "max_calls", "target": "*", "max": 4}
    assert judged(fields, [*LLM_3, *quotes]) == (False, "5 calls to * (2 faulted) > 4")
    negated = {"type": "max_calls", "target": "llm", "max": 2, "negate": True}
    assert judged(negated, LLM_3) == (
        True,
        "negated: 3 calls to llm (1 faulted) > 2 (must make more than 2)",
    )


def test_an_mcp_tool_is_named_bare_or_with_its_server() -> None:
    mcp = call("tool", "crm.lookup")
    assert aims_at(mcp, "crm.lookup") and aims_at(mcp, "lookup")
    assert not aims_at(mcp, "crm") and not aims_at(mcp, "llm")
    assert not aims_at(call("tool", "lookup_all"), "lookup")


def test_max_tokens_sums_what_the_llm_billed_and_never_a_faulted_attempt() -> None:
    fields = {"type": "max_tokens", "max": 240}
    assert judged(fields, LLM_3) == (True, "240 tokens over 3 LLM calls ≤ 240")
    fields = {"type": "max_tokens", "max": 200, "kind": "input"}
    assert judged(fields, LLM_3) == (True, "200 input tokens over 3 LLM calls ≤ 200")
    fields = {"type": "max_tokens", "max": 39, "kind": "output"}
    assert judged(fields, LLM_3) == (False, "40 output tokens over 3 LLM calls > 39")


def test_cached_tokens_count_as_input_tokens() -> None:
    cached = [call(usage=billed(10, 5, cache_read=90, cache_write=30))]
    fields = {"type": "max_tokens", "max": 130, "kind": "input"}
    assert judged(fields, cached) == (True, "130 input tokens over 1 LLM call ≤ 130")


def test_an_estimated_count_says_so_and_an_unknown_one_is_no_verdict() -> None:
    estimated = [call(usage=billed(100, 20, counted=Counted.ESTIMATED))]
    assert judged({"type": "max_tokens", "max": 100}, estimated) == (
        False,
        "120 tokens over 1 LLM call > 100 (estimated: a reply carried no usage)",
    )
    cut = [call(usage=billed(100, 0, counted=Counted.UNKNOWN)), *LLM_3]
    with pytest.raises(Uncountable, match="the tokens of 1 LLM call are unknown"):
        judged({"type": "max_tokens", "max": 10_000}, cut)
    with pytest.raises(Uncountable, match="unknown"):
        judged({"type": "max_cost", "max_usd": 1.0}, cut, price=price)


def test_max_cost_prices_each_call_and_errors_on_a_model_without_a_price() -> None:
    # each billed call: 100 × $1/M + 20 × $2/M = $0.00014; two of them $0.00028
    fields = {"type": "max_cost", "max_usd": 0.0003}
    assert judged(fields, LLM_3, price=price) == (
        True,
        "$0.0003 over 3 LLM calls ≤ $0.0003",
    )
    fields = {"type": "max_cost", "max_usd": 0.0002}
    assert judged(fields, LLM_3, price=price) == (False, "$0.0003 over 3 LLM calls > $0.0002")
    other = [call(usage=billed(100, 20, model="gpt-unpriced"))]
    with pytest.raises(Uncountable, match="no price for model 'gpt-unpriced'"):
        judged(fields, other, price=price)
    with pytest.raises(Unpriced):
        cost_of(other, price)


def test_max_amplification_compares_with_the_same_prompt_without_chaos() -> None:
    calm = Measures(calls=1, tokens=120, cost=0.00014)
    fields = {"type": "max_amplification", "max": 2}
    assert judged(fields, LLM_3, without=calm) == (
        False,
        "llm calls 3.0× of the same prompt without chaos (3 vs 1) > 2×",
    )
    tokens = {"type": "max_amplification", "max": 2, "measure": "tokens"}
    assert judged(tokens, LLM_3, without=calm) == (
        True,
        "llm tokens 2.0× of the same prompt without chaos (240 vs 120) ≤ 2×",
    )
    cost = {"type": "max_amplification", "max": 1.5, "measure": "cost"}
    assert judged(cost, LLM_3, without=calm, price=price) == (
        False,
        "llm cost 2.0× of the same prompt without chaos ($0.0003 vs $0.0001) > 1.5×",
    )
    none = Measures(calls=0, tokens=0, cost=0.0)
    assert judged(fields, LLM_3, without=none) == (
        False,
        "llm calls ∞× of the same prompt without chaos (3 vs 0) > 2×",
    )
    with pytest.raises(Uncountable, match="no measure to compare with"):
        judged(fields, LLM_3)


def timed(
    started: float, latency: float, retry_after: float | None = None, **more: Any
) -> CallRecord:
    status = 429 if retry_after is not None else 200
    return call(started_ms=started, latency_ms=latency, retry_after_s=retry_after, status=status,
                **more)  # fmt: skip


def test_retry_discipline_measures_the_wait_after_the_reply_that_asked_for_it() -> None:
    fields = {"type": "retry_discipline"}
    # a 429 answered at 1000 + 5 ms asked for 1 s: the next call at 1905 ms waited 0.9 s (the
    # 10% slack), one at 1904 ms waited 0.899 s
    kept = [timed(1000, 5, retry_after=1), timed(1905, 10)]
    assert judged(fields, kept) == (True, "every retry waited as Retry-After asked (1 time)")
    hasty = [timed(1000, 5, retry_after=1), timed(1904, 10)]
    assert judged(fields, hasty) == (
        False,
        "a 429 asked llm calls to wait 1 s (Retry-After); the next came after 0.899 s",
    )
    # the order the calls began in counts, not the order they were recorded in
    assert judged(fields, [timed(1904, 10), timed(1000, 5, retry_after=1)])[0] is False
    # another target's calls do not count as the retry
    other = [timed(1000, 5, retry_after=1), call("tool", "quotes", started_ms=1010), timed(2100, 1)]
    assert judged(fields, other)[0] is True
    assert judged(fields, [timed(0, 1), timed(2, 1)]) == (
        True,
        "no call to llm was retried after a Retry-After",
    )


def effect(body: str, key: str | None = None, method: str = "POST", **more: Any) -> CallRecord:
    return call("tool", "payments", method=method, fingerprint=body, idempotency_key=key, **more)


def test_no_duplicate_effects_needs_one_idempotency_key_on_a_repeated_request() -> None:
    fields = {"type": "no_duplicate_effects", "target": "payments"}
    assert judged(fields, [effect("a"), effect("a")]) == (
        False,
        "POST payments sent 2 times with the same path and body, without an Idempotency-Key",
    )
    assert judged(fields, [effect("a", "k1"), effect("a", "k1")]) == (
        True,
        "no repeated effect among 2 calls to payments",
    )
    assert judged(fields, [effect("a", "k1"), effect("a", "k2")])[1].endswith(
        "with different Idempotency-Keys"
    )
    assert judged(fields, [effect("a", "k1"), effect("a")])[1].endswith(
        "not every one with an Idempotency-Key"
    )
    assert judged(fields, [effect("a"), effect("b")])[0] is True  # different bodies
    # GET is not an effect by default; a python tool's call always is
    assert judged(fields, [effect("a", method="GET"), effect("a", method="GET")])[0] is True
    gets = {**fields, "methods": ["GET"]}
    assert judged(gets, [effect("a", method="GET"), effect("a", method="GET")])[0] is False
    assert judged(fields, [effect("a", method="CALL"), effect("a", method="CALL")]) == (
        False,
        "call payments sent 2 times with the same arguments, without an Idempotency-Key",
    )


def test_spend_counts_calls_per_target_faulted_ones_and_cost() -> None:
    quotes = call("tool", "quotes", fired=("tool_faults[0] error(503)",))
    spent = spend_of([*LLM_3, quotes], price)
    assert dict(spent.calls) == {"llm": 3, "quotes": 1}
    assert dict(spent.faulted) == {"llm": 1, "quotes": 1}
    assert spent.usage is not None and (spent.usage.input, spent.usage.output) == (200, 40)
    assert spent.cost_usd == pytest.approx(0.00028)
    unpriced = spend_of([call(usage=billed(1, 1, model="x"))], price)
    assert unpriced.cost_usd is None and unpriced.unpriced == ("x",)


def test_validate_says_what_each_counts() -> None:
    assert counts(Invariant(type="max_calls", target="quotes", max=3)) == (
        "calls to quotes per invocation, faulted ones included, ≤ 3"
    )
    assert counts(Invariant(type="max_amplification", max=2, measure="cost"), "calm") == (
        "llm cost per invocation ≤ 2× the same prompt in 'calm'"
    )
