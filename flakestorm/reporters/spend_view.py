"""What the agent spent, as every report says it (SPEC §15): a cell's calls per target (the
faulted ones among them), its tokens in and out and its cost, and each scenario's
amplification against the scenario without faults.

The lines are plain text: each format escapes them whole with its own function of
:mod:`flakestorm.reporters.escape` (a target is a tool's name from the config, a model's name
is the upstream's reply: both untrusted). A number is shown only when it is known: estimated
tokens are marked, unknown ones said, and a cost without prices is left out, never made up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from flakestorm.results.model import PhaseOutcome
from flakestorm.results.scenarios import ScenarioInfo
from flakestorm.results.usage import Counted, Spend, Usage

MAX_SCENARIO_LINES = 50
"""Amplification lines listed per phase in the summary and the HTML report; the rest are
counted."""
COMMENT_SCENARIO_LINES = 10
"""The same in the PR comment (its limit is 65,536 characters)."""
NAME_CHARS = 100
"""How much of a scenario's name a line quotes."""


def money(usd: float) -> str:
    """``usd`` as dollars: cents from a cent up, else two significant digits."""
    if usd <= 0:
        return "$0"
    if usd >= 0.01:
        return f"${usd:,.2f}"
    digits = 1 - math.floor(math.log10(usd))
    return "$" + f"{usd:.{digits}f}".rstrip("0").rstrip(".")


def _model(name: str) -> str:
    return repr(name[:80]) if name else "(a reply that names no model)"


def _unpriced(spend: Spend) -> str:
    return "cost unknown: no price for " + ", ".join(_model(m) for m in spend.unpriced[:3])


def _calls(spend: Spend) -> str:
    if not spend.calls:
        return "calls: none"
    parts = []
    for target, n in spend.calls.items():
        hit = spend.faulted.get(target, 0)
        parts.append(f"{target} {n}" + (f" ({hit} faulted)" if hit else ""))
    return "calls: " + ", ".join(parts)


def _tokens(usage: Usage) -> str:
    if usage.counted is Counted.UNKNOWN:
        return "tokens unknown (a reply cut before its usage)"
    cached = [
        f"{n:,} {what}"
        for n, what in ((usage.cache_read, "cache read"), (usage.cache_write, "cache write"))
        if n
    ]
    into = f"{usage.prompt:,} in" + (f" ({', '.join(cached)})" if cached else "")
    estimated = " (estimated)" if usage.counted is Counted.ESTIMATED else ""
    return f"tokens {into} / {usage.output:,} out{estimated}"


def cell_spend(spend: Spend | None) -> str | None:
    """A cell's spend on one line: ``calls: llm 6, quotes 6 (6 faulted); tokens 720 in / 120
    out; $0.0008``; None when its calls were not recorded per cell."""
    if spend is None:
        return None
    parts = [_calls(spend)]
    usage = spend.usage
    if usage is not None:
        parts.append(_tokens(usage))
        if spend.cost_usd is not None:
            estimated = " (estimated)" if usage.counted is Counted.ESTIMATED else ""
            parts.append(money(spend.cost_usd) + estimated)
        elif spend.unpriced:
            parts.append(_unpriced(spend))
        elif usage.counted is Counted.UNKNOWN:
            parts.append("cost unknown")
    return "; ".join(parts)


@dataclass(frozen=True)
class Amplification:
    """A phase's scenarios against its scenario without faults."""

    base: str
    """The scenario without faults they are compared with."""
    lines: tuple[str, ...]
    """One per scenario with faults: ``quote-down: LLM calls 3.0×, tokens 3.0×, $0.84 vs
    $0.14``; past :data:`MAX_SCENARIO_LINES`, a last line counts the rest."""

    @property
    def heading(self) -> str:
        return f"Spend against {self.base}, the scenario without faults:"

    def escaped(self, escape: Callable[[str], str]) -> Amplification:
        """The same, each text through ``escape`` (the format's, of
        :mod:`flakestorm.reporters.escape`)."""
        return Amplification(escape(self.base), tuple(escape(line) for line in self.lines))


def _ratio(what: str, value: int, base: int) -> str:
    if base == 0:
        return f"{what} {value:,} vs 0"
    return f"{what} {value / base:.1f}×"


def _measure_calls(spend: Spend, base: Spend) -> str | None:
    if spend.llm_calls or base.llm_calls:
        return _ratio("LLM calls", spend.llm_calls, base.llm_calls)
    total, base_total = sum(spend.calls.values()), sum(base.calls.values())
    return _ratio("calls", total, base_total) if total or base_total else None


def _counted(spend: Spend, base: Spend) -> Counted | None:
    """The least certain count of the two spends' tokens; None when neither billed."""
    counts = [s.usage.counted for s in (spend, base) if s.usage is not None]
    if not counts:
        return None
    rank = [Counted.REPORTED, Counted.ESTIMATED, Counted.UNKNOWN]
    return max(counts, key=rank.index)


def _total(spend: Spend) -> int:
    return 0 if spend.usage is None else spend.usage.total


def _compared(spend: Spend, base: Spend) -> list[str]:
    parts = [p for p in [_measure_calls(spend, base)] if p is not None]
    counted = _counted(spend, base)
    if counted is None:
        return parts
    if counted is Counted.UNKNOWN:
        return [*parts, "tokens unknown", "cost unknown"]
    estimated = " (estimated)" if counted is Counted.ESTIMATED else ""
    parts.append(_ratio("tokens", _total(spend), _total(base)) + estimated)
    cost, base_cost = spend.cost_usd, base.cost_usd
    if cost is not None and base_cost is not None:
        parts.append(f"{money(cost)} vs {money(base_cost)}{estimated}")
    elif spend.unpriced or base.unpriced:
        priced = spend if spend.unpriced else base
        parts.append(_unpriced(priced))
    return parts


def _without_faults(outcome: PhaseOutcome) -> ScenarioInfo | None:
    return next((s for s in outcome.scenarios if not s.faults), None)


def amplification(outcome: PhaseOutcome, limit: int = MAX_SCENARIO_LINES) -> Amplification | None:
    """The amplification lines of ``outcome``'s scenarios with faults; None without a
    scenario without faults, or without spend recorded in it and one other."""
    base = _without_faults(outcome)
    if base is None or base.spend is None:
        return None
    lines = []
    listed: list[tuple[str, Spend]] = [
        (s.name, s.spend) for s in outcome.scenarios if s.faults and s.spend is not None
    ]
    for name, spend in listed[:limit]:
        parts = _compared(spend, base.spend)
        if parts:
            lines.append(f"{_cut(name)}: {', '.join(parts)}")
    if len(listed) > limit:
        lines.append(f"… and {len(listed) - limit} more scenarios (report.html, results.json)")
    return Amplification(_cut(base.name), tuple(lines)) if lines else None


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def markdown_lines(
    outcome: PhaseOutcome, escape: Callable[[str], str], limit: int = MAX_SCENARIO_LINES
) -> list[str]:
    """The amplification of ``outcome`` as markdown lines (a bold heading, a list of at most
    ``limit`` scenarios), each text through ``escape``
    (:func:`flakestorm.reporters.escape.text`); none without it."""
    shown = amplification(outcome, limit)
    if shown is None:
        return []
    return [f"**{escape(shown.heading)}**", "", *(f"- {escape(line)}" for line in shown.lines), ""]
