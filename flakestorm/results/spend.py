"""What the agent spent (SPEC §15), counted from the calls it made: calls per target (faulted
ones among them), tokens and cost — per invocation for the invariants on calls, per cell and
per scenario for the reports. Pure: the calls are :class:`CallRecord` values, prices a
function given by the caller.

A *target* is ``llm`` (every LLM call), a tool's name (a route's, a python tool's, or an MCP
tool's ``SERVER.TOOL`` — a bare ``TOOL`` names an MCP tool of any server), or ``*`` (every
call flakestorm saw).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from flakestorm.results.scenarios import CallRecord
from flakestorm.results.usage import Counted, Spend, Usage, summed

LLM = "llm"
EVERY = "*"

Pricer = Callable[[Usage], float | None]
"""A call's cost in USD from what it billed; None when its model has no price."""


def aims_at(call: CallRecord, target: str) -> bool:
    """Whether ``call`` is a call to ``target``."""
    if target == EVERY:
        return True
    if target == LLM:
        return call.target == LLM
    tool = call.tool
    if tool is None or call.target == LLM:
        return False
    return tool == target or ("." not in target and tool.partition(".")[2] == target)


def calls_to(calls: Iterable[CallRecord], target: str) -> list[CallRecord]:
    """The calls of ``calls`` to ``target``, in the order they began."""
    return sorted((c for c in calls if aims_at(c, target)), key=lambda c: c.started_ms)


def billed(calls: Iterable[CallRecord]) -> list[Usage]:
    """What each LLM call of ``calls`` billed (a faulted attempt bills nothing)."""
    return [c.usage for c in calls if c.target == LLM and c.usage is not None]


def tokens_of(calls: Iterable[CallRecord]) -> Usage:
    """The tokens ``calls`` billed together (``counted``: the least certain of theirs)."""
    return summed(billed(calls))


class Unpriced(Exception):
    """A call's model has no price: the cost of its cell cannot be known."""

    def __init__(self, model: str) -> None:
        # the model a reply names is the upstream's text: quoted (repr escapes control
        # characters) and cut
        name = repr(model[:80]) if model else "(a reply that names no model)"
        super().__init__(f"no price for model {name}: add it under `prices:` in the config")
        self.model = model


def cost_of(calls: Iterable[CallRecord], price: Pricer) -> float:
    """The USD cost of the LLM calls of ``calls``; raises :class:`Unpriced` for a model with
    no price."""
    total = 0.0
    for usage in billed(calls):
        cost = price(usage)
        if cost is None:
            raise Unpriced(usage.model)
        total += cost
    return total


def faulted(call: CallRecord) -> bool:
    """Whether a fault answered or edited the call (an attempt the agent saw fail or change)."""
    return bool(call.fired)


def target_name(call: CallRecord) -> str:
    """The name a report counts ``call`` under: ``llm``, its tool, or ``other``."""
    if call.target == LLM:
        return LLM
    return call.tool or "other"


def spend_of(calls: Sequence[CallRecord], price: Pricer | None = None) -> Spend:
    """What ``calls`` spent: counted per target, their tokens and (with ``price``) cost."""
    counts: dict[str, int] = {}
    hit: dict[str, int] = {}
    for call in calls:
        name = target_name(call)
        counts[name] = counts.get(name, 0) + 1
        if faulted(call):
            hit[name] = hit.get(name, 0) + 1
    usages = billed(calls)
    usage = summed(usages) if usages else None
    cost: float | None = None
    unpriced: list[str] = []
    if usage is not None and price is not None and usage.counted is not Counted.UNKNOWN:
        total = 0.0
        for one in usages:
            each = price(one)
            if each is None:
                unpriced.append(one.model)
            else:
                total += each
        cost = None if unpriced else total
    return Spend(counts, hit, usage, cost, tuple(dict.fromkeys(unpriced)))


def added(spends: Iterable[Spend]) -> Spend:
    """Several spends together (a scenario's cells)."""
    counts: dict[str, int] = {}
    hit: dict[str, int] = {}
    usages: list[Usage] = []
    cost: float | None = 0.0
    unpriced: list[str] = []
    any_usage = False
    for spend in spends:
        for name, n in spend.calls.items():
            counts[name] = counts.get(name, 0) + n
        for name, n in spend.faulted.items():
            hit[name] = hit.get(name, 0) + n
        if spend.usage is not None:
            any_usage = True
            usages.append(spend.usage)
            if spend.cost_usd is None or cost is None:
                cost = None
            else:
                cost += spend.cost_usd
        unpriced += spend.unpriced
    return Spend(
        counts,
        hit,
        summed(usages) if any_usage else None,
        cost if any_usage else None,
        tuple(dict.fromkeys(unpriced)),
    )
