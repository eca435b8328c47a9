"""What a run keeps of each scenario — its delivery proof, how its cells ran and the calls not
attributed to a cell — and of each call the agent made (:class:`CallRecord`): result values,
read back from ``results.json`` (re-exported by :mod:`flakestorm.results.model`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flakestorm.results import delivery_reasons
from flakestorm.results.usage import Spend, Usage

MAX_UNATTRIBUTED_CALLS = 20
"""The most calls not attributed to a cell a scenario keeps (all are counted)."""

_KINDS = ("tool_faults", "llm_faults", "context_attacks")
"""A scenario's fault lists in the order they are declared (each label starts ``KIND[i]``)."""
_DECLARED = re.compile(r"(tool_faults|llm_faults|context_attacks)\[(\d+)\]")


def declaration_order(labels: Iterable[str]) -> tuple[str, ...]:
    """The distinct fault labels of ``labels`` in the order their scenario declares them —
    ``tool_faults[i]`` by index, then ``llm_faults[i]``, then ``context_attacks[i]`` —
    whatever order the calls that fired them arrived in; a label naming no declared fault
    comes after them, as given. Every list of faults that fired is kept and shown so."""

    def key(label: str) -> tuple[int, int]:
        found = _DECLARED.match(label)
        if found is None:
            return len(_KINDS), 0
        return _KINDS.index(found[1]), int(found[2])

    return tuple(sorted(dict.fromkeys(labels), key=key))


@dataclass(frozen=True)
class CallRecord:
    """One call the agent made to a tool or its LLM during a cell, as flakestorm saw it."""

    target: str
    """``tool``, ``llm`` or ``other``."""
    tool: str | None
    method: str
    url: str
    status: int | None
    """What the agent received; None when the connection was dropped or an error was raised."""
    fired: tuple[str, ...] = ()
    upstream_error: str | None = None
    latency_ms: float = 0.0
    invocation: str = ""
    """Which invocation of the cell made it: ``RUN.PROMPT`` (0-based), "" when unknown."""
    request: str | None = None
    """What the agent sent (bounded; see ``docs/results.md``): a replay's arguments."""
    response: str | None = None
    """What the agent got (bounded): what ``replay export`` serves again."""
    started_ms: float = 0.0
    """When the call began, in ms on the recorder's monotonic clock (comparable between the
    calls of one run only)."""
    retry_after_s: float | None = None
    """The ``Retry-After`` the agent was given with this call's 429 or 503, in seconds."""
    idempotency_key: str | None = None
    fingerprint: str = ""
    """A digest of the method, path and whole body sent: equal for calls that sent the same."""
    usage: Usage | None = None
    """What an LLM call billed; None for tool calls and faulted attempts (never billed)."""
    detail: str = ""
    """What the call was beyond its URL: a downstream A2A agent's method and what its reply
    said (``SendMessage -> TASK_STATE_FAILED``); "" for other calls."""


@dataclass(frozen=True)
class ScenarioInfo:
    name: str
    faults: tuple[str, ...]
    """A one-line description of each declared fault."""
    undelivered: tuple[str, ...] = ()
    """Declared faults that never reached the agent — no matching call reached flakestorm in
    any cell, or the fault could not be applied (:meth:`why` says which): the scenario's cells
    are ERRORED (SPEC §4, §10)."""
    serial: bool = False
    """Cells ran one at a time: the agent forwards no attribution (SPEC §4.2) and the
    scenario's faults depend on call order (``order`` says why)."""
    declared: tuple[str, ...] = ()
    """The delivery proof: labels of the declared faults that must reach the agent's calls…"""
    matched: tuple[str, ...] = ()
    """…the labels some call of the scenario matched (fired or not)…"""
    hints: Mapping[str, str] = field(default_factory=dict)
    """…and, per declared label, what is probably mis-wired if it is not delivered…"""
    unapplied: Mapping[str, str] = field(default_factory=dict)
    """…and the labels that matched a call but could not be applied to it, with why (the
    first reason): not delivered either (SPEC §10)…"""
    replaced: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """…and, per context attack, the calls it matched that a fault answered in place of the
    tool (a tool fault replacing the result) or the LLM (an LLM fault stopping the request),
    counted per fault label: such a call is not in ``matched`` (nothing to poison), so an
    attack every matching call of which was replaced is not delivered, and this says why…"""
    unscheduled: Mapping[str, str] = field(default_factory=dict)
    """…and the labels whose matching calls all came outside their schedule (``calls``,
    ``every``, ``window_ms``), with why ("the agent made 1 matching call per invocation; the
    fault acts on calls 2-3"): not delivered either…"""
    seen: Mapping[str, int] | None = None
    """…and what the scenario's calls were, counted by kind (``tool NAME``, ``llm``, ``forward
    ORIGIN``, ``other``; None when not recorded): summed over shards, so the hint's account of
    what flakestorm saw is the same for a merged run."""
    order: tuple[str, ...] = ()
    """Why the scenario's faults depend on the order of calls, one reason per fault
    (``tool_faults[0] …: probability 0.5``): with an agent that forwards no attribution, why
    its cells ran one at a time."""
    unattributed: int = 0
    """The scenario's calls not attributed to any cell: its cells ran side by side and the
    agent forwards no attribution, so its calls are reported per scenario (summed over shards)."""
    unattributed_calls: tuple[CallRecord, ...] = ()
    """The first :data:`MAX_UNATTRIBUTED_CALLS` of them, in order."""
    spend: Spend | None = None
    """What its cells' calls spent together (SPEC §15); None when none was recorded per cell:
    compared with the scenario without faults, the amplification reports show."""
    in_flight: bool = False
    """Its cells ran side by side with the other chaos scenarios' cells, every call decided by
    its own cell's scenario (SPEC §9: every call was attributed); false when the scenarios ran
    one after another."""

    def why(self, label: str) -> str:
        """Why ``label`` is not delivered: it could not be applied, or a fault answered in
        place of the tool or LLM on every call it matched, or (the wiring hint) no call matched
        it."""
        if label in self.unapplied:
            return f"it matched a call but could not be applied: {self.unapplied[label]}"
        if label not in self.matched and self.replaced.get(label):
            return delivery_reasons.replaced(label, self.replaced[label])
        if label not in self.matched and label in self.unscheduled:
            return self.unscheduled[label]
        return self.hint(label)

    def hint(self, label: str) -> str:
        """The wiring hint of ``label``, led by what flakestorm saw instead (when recorded)."""
        static = self.hints.get(label, "")
        if self.seen is None:
            return static
        saw = delivery_reasons.saw(self.seen, label)
        return f"{saw} — {static}" if static else saw


def call_records(docs: Iterable[Mapping[str, Any]]) -> tuple[CallRecord, ...]:
    return tuple(_call_record(c) for c in docs)


def _call_record(doc: Mapping[str, Any]) -> CallRecord:
    usage = doc.get("usage")
    return CallRecord(
        **{
            **doc,
            "fired": tuple(doc["fired"]),
            "usage": usage if usage is None else Usage.from_document(usage),
        }
    )


def scenario_from_document(s: Mapping[str, Any]) -> ScenarioInfo:
    spend = s.get("spend")
    return ScenarioInfo(
        **{
            **s,
            **{k: tuple(s[k]) for k in ("faults", "undelivered", "declared", "matched")},
            "hints": dict(s["hints"]),
            "unapplied": dict(s.get("unapplied", {})),
            "unscheduled": dict(s.get("unscheduled", {})),
            "replaced": {k: dict(v) for k, v in s.get("replaced", {}).items()},
            "seen": None if s.get("seen") is None else dict(s["seen"]),
            "order": tuple(s.get("order", ())),
            "unattributed_calls": call_records(s.get("unattributed_calls", ())),
            "spend": None if spend is None else Spend.from_document(spend),
        }
    )
