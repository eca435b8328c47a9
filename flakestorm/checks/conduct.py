"""The invariants on what the agent did (SPEC §15): each judged on the calls one invocation made
— counted where they passed through flakestorm — not on its reply. One registered check per
type (:data:`CONDUCT`); :func:`judge_conduct` applies ``negate``.

A count that cannot be known is never a pass: a token or cost invariant over a call whose
usage is ``unknown`` (a stream cut before its usage), or over a model with no price, is
:class:`Uncountable` and errors its cell.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flakestorm.config import EffectMethod, Invariant, InvariantType, Measure, TokenKind
from flakestorm.results.scenarios import CallRecord
from flakestorm.results.spend import LLM, Pricer, Unpriced, aims_at, calls_to, cost_of, tokens_of
from flakestorm.results.usage import Counted, Usage

RETRY_SLACK = 0.1
"""How much sooner than ``Retry-After`` asked a next call may come (10%: clocks and queues)."""
DEFAULT_METHODS = (EffectMethod.POST, EffectMethod.PUT, EffectMethod.PATCH, EffectMethod.DELETE)
PYTHON_METHOD = "CALL"
"""A python callable's call: it has no HTTP method, so ``methods`` does not filter it."""


class Uncountable(Exception):
    """What the invariant counts cannot be known for this invocation: its cell is ERRORED."""


@dataclass(frozen=True)
class Measures:
    """One invocation's measures, as ``max_amplification`` compares them."""

    calls: float
    """The calls (a mean over runs may be fractional)."""
    tokens: float | None
    """None when a call's usage is unknown."""
    cost: float | None
    """None when a call's usage is unknown or its model has no price (``unpriced``)."""
    unpriced: str = ""

    def of(self, measure: Measure) -> float:
        if measure is Measure.CALLS:
            return self.calls
        if measure is Measure.TOKENS:
            if self.tokens is None:
                raise Uncountable("a call's token count is unknown (its stream was cut)")
            return float(self.tokens)
        if self.cost is None:
            raise Uncountable(self.unpriced or "a call's token count is unknown")
        return self.cost


def measures(calls: Sequence[CallRecord], target: str, price: Pricer | None) -> Measures:
    """The measures of the calls to ``target`` among ``calls``."""
    own = calls_to(calls, target)
    usage = tokens_of(own)
    known = usage.counted is not Counted.UNKNOWN
    cost: float | None = None
    unpriced = ""
    if known and price is not None:
        try:
            cost = cost_of(own, price)
        except Unpriced as exc:
            unpriced = str(exc)
    elif price is None:
        unpriced = "no prices were given"
    return Measures(len(own), usage.total if known else None, cost, unpriced)


@dataclass(frozen=True)
class Conduct:
    """What a conduct invariant is judged on: one invocation's calls, the prices, and for
    ``max_amplification`` the same prompt's measures without chaos."""

    calls: Sequence[CallRecord]
    price: Pricer | None = None
    without: Measures | None = None
    """None when there is nothing to compare with (the prompt's cell without chaos did not
    run to a verdict): ``max_amplification`` is then uncountable."""


@dataclass(frozen=True)
class Finding:
    holds: bool
    reason: str
    negated: str


_Check = Callable[[Invariant, Conduct], Finding]
CONDUCT: dict[InvariantType, _Check] = {}
"""The registry: one check per conduct invariant type."""


def _registers(kind: InvariantType) -> Callable[[_Check], _Check]:
    def register(check: _Check) -> _Check:
        CONDUCT[kind] = check
        return check

    return register


def judge_conduct(invariant: Invariant, conduct: Conduct) -> tuple[bool, str]:
    """Whether ``invariant`` held over ``conduct``, and why in one line (``negate`` applied).
    Raises :class:`Uncountable` when what it counts cannot be known."""
    finding = CONDUCT[invariant.type](invariant, conduct)
    passed = finding.holds != invariant.negate
    if invariant.negate:
        return passed, f"negated: {finding.reason} ({finding.negated})"
    return passed, finding.reason


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _whole(value: float | None) -> int:
    return int(value or 0)


@_registers(InvariantType.MAX_CALLS)
def _max_calls(invariant: Invariant, conduct: Conduct) -> Finding:
    target = invariant.target or LLM
    most = _whole(invariant.max)
    own = calls_to(conduct.calls, target)
    hit = sum(1 for c in own if c.fired)
    faulted = f" ({hit} faulted)" if hit else ""
    made = f"{_plural(len(own), 'call')} to {target}{faulted}"
    sign = "≤" if len(own) <= most else ">"
    return Finding(len(own) <= most, f"{made} {sign} {most}", f"must make more than {most}")


def _tokens(usage: Usage, kind: TokenKind) -> int:
    if kind is TokenKind.INPUT:
        return usage.prompt
    if kind is TokenKind.OUTPUT:
        return usage.output
    return usage.total


@_registers(InvariantType.MAX_TOKENS)
def _max_tokens(invariant: Invariant, conduct: Conduct) -> Finding:
    kind = invariant.kind or TokenKind.TOTAL
    most = _whole(invariant.max)
    own = calls_to(conduct.calls, LLM)
    usage = tokens_of(own)
    if usage.counted is Counted.UNKNOWN:
        cut = sum(1 for c in own if c.usage is not None and c.usage.counted is Counted.UNKNOWN)
        raise Uncountable(
            f"the tokens of {_plural(cut, 'LLM call')} are unknown (a stream cut before its "
            "usage): a token count over them is no verdict"
        )
    used = _tokens(usage, kind)
    words = "tokens" if kind is TokenKind.TOTAL else f"{kind.value} tokens"
    estimated = ""
    if usage.counted is Counted.ESTIMATED:
        estimated = " (estimated: a reply carried no usage)"
    sign = "≤" if used <= most else ">"
    reason = f"{used:,} {words} over {_plural(len(own), 'LLM call')} {sign} {most:,}{estimated}"
    return Finding(used <= most, reason, f"must use more than {most:,} {words}")


@_registers(InvariantType.MAX_COST)
def _max_cost(invariant: Invariant, conduct: Conduct) -> Finding:
    most = invariant.max_usd or 0.0
    own = calls_to(conduct.calls, LLM)
    got = measures(own, LLM, conduct.price)
    if got.tokens is None:
        raise Uncountable("an LLM call's token count is unknown (a stream cut before its usage)")
    if got.cost is None:
        raise Uncountable(got.unpriced)
    sign = "≤" if got.cost <= most else ">"
    reason = f"${got.cost:.4f} over {_plural(len(own), 'LLM call')} {sign} ${most:.4f}"
    return Finding(got.cost <= most, reason, f"must cost more than ${most:.4f}")


@_registers(InvariantType.MAX_AMPLIFICATION)
def _max_amplification(invariant: Invariant, conduct: Conduct) -> Finding:
    target = invariant.target or LLM
    measure = invariant.measure or Measure.CALLS
    most = invariant.max or 0.0
    if conduct.without is None:
        raise Uncountable(
            "the same prompt without chaos has no measure to compare with (its cell did not "
            "run to a verdict)"
        )
    here = measures(conduct.calls, target, conduct.price).of(measure)
    base = conduct.without.of(measure)
    words = f"{target} {measure.value}"
    shown = _shown(measure, here, base)
    if base == 0:
        ratio_text = "1.0×" if here == 0 else "∞×"
        holds = here == 0
    else:
        ratio = here / base
        holds = ratio <= most
        ratio_text = f"{ratio:.1f}×"
    sign = "≤" if holds else ">"
    reason = f"{words} {ratio_text} of the same prompt without chaos ({shown}) {sign} {most:g}×"
    return Finding(holds, reason, f"must amplify more than {most:g}×")


def _shown(measure: Measure, here: float, base: float) -> str:
    if measure is Measure.COST:
        return f"${here:.4f} vs ${base:.4f}"
    return f"{here:,.0f} vs {base:,.0f}"


@_registers(InvariantType.RETRY_DISCIPLINE)
def _retry_discipline(invariant: Invariant, conduct: Conduct) -> Finding:
    target = invariant.target or LLM
    negated = "must retry sooner than Retry-After asked"
    asked = 0
    for name, own in _by_target(conduct.calls, target).items():
        for before, after in itertools.pairwise(own):
            if before.retry_after_s is None:
                continue
            asked += 1
            waited_s = (after.started_ms - before.started_ms - before.latency_ms) / 1000
            if waited_s < before.retry_after_s * (1 - RETRY_SLACK):
                reason = (
                    f"a {before.status} asked {name} calls to wait {before.retry_after_s:g} s "
                    f"(Retry-After); the next came after {waited_s:.3f} s"
                )
                return Finding(False, reason, negated)
    if not asked:
        return Finding(True, f"no call to {target} was retried after a Retry-After", negated)
    return Finding(
        True, f"every retry waited as Retry-After asked ({_plural(asked, 'time')})", negated
    )


def _by_target(calls: Sequence[CallRecord], target: str) -> dict[str, list[CallRecord]]:
    """The calls to ``target``, grouped by what they called (each tool apart), in order."""
    grouped: dict[str, list[CallRecord]] = {}
    for call in calls_to(calls, target):
        name = LLM if call.target == LLM else (call.tool or "other")
        grouped.setdefault(name, []).append(call)
    return grouped


@_registers(InvariantType.NO_DUPLICATE_EFFECTS)
def _no_duplicate_effects(invariant: Invariant, conduct: Conduct) -> Finding:
    target = invariant.target or LLM
    methods = {m.value for m in invariant.methods or DEFAULT_METHODS}
    negated = "must repeat an effect"
    seen: dict[tuple[str, str], list[CallRecord]] = {}
    for call in conduct.calls:
        if not aims_at(call, target) or not call.fingerprint:
            continue
        if call.method != PYTHON_METHOD and call.method.upper() not in methods:
            continue
        seen.setdefault((call.fingerprint, call.tool or call.target), []).append(call)
    for (_, name), same in seen.items():
        if len(same) < 2:
            continue
        keys = {c.idempotency_key for c in same}
        if len(keys) == 1 and None not in keys:
            continue
        what, sameness = _sameness(same[0])
        reason = f"{what} {name} sent {len(same)} times with the same {sameness}, {_keys(keys)}"
        return Finding(False, reason, negated)
    checked = sum(len(v) for v in seen.values())
    reason = f"no repeated effect among {_plural(checked, 'call')} to {target}"
    return Finding(True, reason, negated)


def _sameness(call: CallRecord) -> tuple[str, str]:
    """How a repeated call is named, and what was the same each time: a python callable's
    arguments, a downstream A2A agent's method and message (its ids aside), else the HTTP
    method's path and body."""
    if call.method == PYTHON_METHOD:
        return "call", "arguments"
    if call.detail:  # an A2A call: ``SendMessage -> TASK_STATE_FAILED``
        return call.detail.partition(" -> ")[0], "message (its ids aside)"
    return call.method, "path and body"


def _keys(keys: set[str | None]) -> str:
    if keys == {None}:
        return "without an Idempotency-Key"
    if None in keys:
        return "not every one with an Idempotency-Key"
    return "with different Idempotency-Keys"


def counts(invariant: Invariant, compared_with: str | None = None) -> str:
    """What an invariant on calls counts, in one line (``validate`` lists it)."""
    target = invariant.target or LLM
    kind = invariant.type
    if kind is InvariantType.MAX_CALLS:
        return f"calls to {target} per invocation, faulted ones included, ≤ {_whole(invariant.max)}"
    if kind is InvariantType.MAX_TOKENS:
        which = (invariant.kind or TokenKind.TOTAL).value
        return f"{which} tokens the LLM billed per invocation ≤ {_whole(invariant.max):,}"
    if kind is InvariantType.MAX_COST:
        return f"the LLM's cost per invocation ≤ ${invariant.max_usd or 0:.4f}"
    if kind is InvariantType.MAX_AMPLIFICATION:
        measure = (invariant.measure or Measure.CALLS).value
        against = f"{compared_with!r}" if compared_with else "the scenario without faults"
        most = f"{invariant.max or 0:g}×"
        return f"{target} {measure} per invocation ≤ {most} the same prompt in {against}"
    if kind is InvariantType.RETRY_DISCIPLINE:
        return f"after a 429/503 with Retry-After, the next call to {target} waits as asked"
    methods = ", ".join(m.value for m in invariant.methods or DEFAULT_METHODS)
    return (
        f"no two {methods} calls to {target} with the same path and body in an invocation, "
        "unless both carry the same Idempotency-Key"
    )
