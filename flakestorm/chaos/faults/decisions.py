"""Fault decisions: which declared fault fires on which interaction (SPEC §4.1).

Both delivery paths — the chaos proxy (HTTP agents) and the python wrappers (python agents) —
ask one :class:`FaultBook` per active scenario what to do with each call the agent makes, and
report back what happened, so the two paths cannot disagree on semantics.

Decisions are deterministic: a fault's schedule (:mod:`flakestorm.chaos.faults.schedule`: ``calls``,
``every``, ``window_ms``; ``after_calls`` is ``calls: "N+1-"``) counts matching calls *per cell* (an
invocation: the cell header is ``cell#run.prompt``, ``cell#run.prompt.turn`` for a conversation's
turn, whose number decides a fault scoped to ``turns``) and times them from when the invocation
started (:meth:`FaultBook.begin`), and a ``probability`` draw comes from an RNG seeded by ``(seed,
scenario, cell, fault, call index)``, so a run with the same seed injects the same faults in the
same cells, whatever the thread scheduling — provided calls can be attributed to their cell (see
SPEC §4.2). The payloads a fired fault injects (which ``indirect_injection`` payload, which garbage
text) come from the same kind of RNG, seeded by ``(seed, scenario, cell, call key, call index)``
(:func:`call_rng` with :func:`tool_key` or :data:`LLM_KEY`), so both delivery paths inject the same
payloads for the same seed.

Vocabulary: an *interaction* is one call the agent makes to a tool or LLM; a fault *fires*
on an interaction when it is injected into it; a fault is *delivered* in a scenario when at
least one matching interaction reached flakestorm in any of its cells, and it could act on it.
A tool-result attack cannot act on a call whose result a tool fault replaced (``error``,
``timeout``, ``malformed``, ``malicious_response``; not ``slow``, whose real result still
comes), nor an ``injection_via_context`` on an LLM call an LLM fault answered before the
request reached the LLM (``rate_limit``, ``timeout``; not the modes that distort the real
reply): such a call is listed in the decision's ``replaced``, not in its ``matched``, so an
attack that every matching call had replaced is not delivered (SPEC §10).
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from flakestorm.agents.attribution import PRE_MATRIX, trace_id
from flakestorm.chaos.faults.labels import (
    attack_label,
    llm_fault_label,
    schedule_of,
    tool_fault_label,
)
from flakestorm.chaos.faults.recording import Recording
from flakestorm.chaos.faults.schedule import Schedule
from flakestorm.chaos.faults.tool_modes import TOOL_MODES
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.config import (
    A2aMethod,
    A2aTaskState,
    ContextAttack,
    LlmFault,
    Scheduled,
    ToolFault,
    ToolFaultMode,
)
from flakestorm.config.vocabulary import LLM_REQUEST_ATTACKS as LLM_REQUEST_ATTACKS
from flakestorm.config.vocabulary import TOOL_RESULT_ATTACKS as TOOL_RESULT_ATTACKS

_F = TypeVar("_F", ToolFault, LlmFault)

UNATTRIBUTED = ""
"""The cell id of an interaction that carried no cell attribution."""
LLM_KEY = "llm"
"""What calls to the LLM are counted and seeded under (:func:`call_rng`)."""


def tool_key(tool: str) -> str:
    """What calls to ``tool`` (its name; else its URL) are counted and seeded under."""
    return f"tool:{tool}"


class Target(str, enum.Enum):
    """What an interaction was addressed to."""

    TOOL = "tool"
    LLM = "llm"
    OTHER = "other"


@dataclass(frozen=True)
class ActiveScenario:
    """What the runner activates: one scenario's faults, the seed, and the default cell.

    ``cell_id`` is the cell that unattributed interactions belong to: the runner sets it when
    it runs the scenario's cells one at a time.
    """

    name: str
    seed: int
    tool_faults: tuple[ToolFault, ...] = ()
    llm_faults: tuple[LlmFault, ...] = ()
    context_attacks: tuple[ContextAttack, ...] = ()
    cell_id: str = UNATTRIBUTED
    replay: Recording | None = None
    """A replayed session's recorded responses, served instead of the real tools (and LLM,
    when it recorded replies) by both delivery paths (SPEC §7)."""


@dataclass(frozen=True)
class Decision:
    """What to do with one interaction."""

    call_index: int
    """0-based index of this call among the cell's calls to the same tool (or to the LLM)."""
    tool_fault: tuple[int, ToolFault] | None = None
    """The tool fault to inject (index in the scenario's ``tool_faults``), if one fires."""
    llm_fault: tuple[int, LlmFault] | None = None
    attacks: tuple[tuple[int, ContextAttack], ...] = ()
    """Context attacks to apply to this interaction's result (tools) or request (LLM)."""
    matched: tuple[str, ...] = ()
    """Labels of every declared fault that matched this call (fired or not) and could act on
    it: delivery proof."""
    replaced: tuple[tuple[str, str], ...] = ()
    """Context attacks that matched this call while the fault that fired on it answers in
    place of the tool or LLM (a tool fault that replaces the result, an LLM fault that stops
    the request), each with that fault's label: nothing to poison (not delivered by this
    call)."""
    unscheduled: tuple[str, ...] = ()
    """Faults that matched this call outside their schedule (not a call they act on, so not
    a delivery)."""

    @property
    def fired(self) -> tuple[str, ...]:
        out = []
        if self.tool_fault is not None:
            out.append(tool_fault_label(*self.tool_fault))
        if self.llm_fault is not None:
            out.append(llm_fault_label(*self.llm_fault))
        out += [attack_label(i, a) for i, a in self.attacks]
        return tuple(out)


def call_rng(seed: int, scenario: str, cell: str, key: str, call_index: int) -> random.Random:
    """An RNG fixed by the run seed and one call's identity: its scenario, its cell, ``key``
    and its index among the cell's calls under that key.

    The one derivation of every random choice flakestorm makes about a call. Payload choices
    (which ``indirect_injection`` payload, which garbage text) use the call's key,
    :func:`tool_key` or :data:`LLM_KEY`, the same through the proxy and through the python
    wrappers; :func:`draw` uses a fault's label.
    """
    # a str seed is hashed with SHA-512 (random's version-2 seeding): stable on every machine
    return random.Random(f"{seed}\x1f{scenario}\x1f{cell}\x1f{key}\x1f{call_index}")


def draw(seed: int, scenario: str, cell: str, label: str, call_index: int) -> float:
    """A uniform number in [0, 1) fixed by the run seed and the call's identity."""
    return call_rng(seed, scenario, cell, label, call_index).random()


def tool_matches(
    fault: ToolFault,
    tool: str | None,
    url: str,
    short: str | None = None,
    method: A2aMethod | None = None,
) -> bool:
    """A tool fault matches a call to its ``tool`` (or to the ``short`` name the tool also
    answers to: an MCP tool's own name), or to a URL matching its ``match_url`` (a glob when
    it has ``*``, else a prefix); a fault scoped to an A2A ``method`` only a call of it."""
    if fault.method is not None and fault.method is not method:
        return False
    if fault.mode is ToolFaultMode.CARD:
        return False  # it acts on an A2A agent's card, which no call fetches

    if fault.match_url:
        pattern = fault.match_url
        return fnmatch.fnmatchcase(url, pattern) if "*" in pattern else url.startswith(pattern)
    if tool is None:
        return False
    return fault.tool in (tool, "*") or (short is not None and fault.tool == short)


def timed(scenario: ActiveScenario) -> bool:
    """Whether a fault of ``scenario`` acts in a time window (``window_ms``): its invocations'
    start times must then be known (:meth:`FaultBook.begin`)."""
    faults: list[Scheduled] = [*scenario.tool_faults, *scenario.llm_faults]
    faults.extend(scenario.context_attacks)
    return any(f.window_ms is not None for f in faults)


def _replaces_result(fault: ToolFault) -> bool:
    return TOOL_MODES[fault.mode].replaces_result


def _replaces_upstream(fault: LlmFault) -> bool:
    return LLM_MODES[fault.mode].answers_instead(fault)


MAX_TRACES = 200_000
"""The most invocations a fault book remembers the start and trace id of (the oldest forgotten
first): bounded memory in a scenario of any size."""
MAX_COUNTS = 200_000
"""The most (invocation, tool or LLM) call counts a fault book keeps (the first counted
forgotten first): bounded memory in a scenario of any size."""


class FaultBook:
    """Decides, for one active scenario, what happens to each interaction. Thread-safe."""

    def __init__(self, scenario: ActiveScenario) -> None:
        self.scenario = scenario
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._started: dict[str, float] = {}
        self._schedules: dict[int, Schedule] = {}
        self._traces = {trace_id(scenario.seed, cell): cell for cell in PRE_MATRIX}
        self.a2a_tasks: dict[tuple[str, str], tuple[str, A2aTaskState]] = {}
        """The tasks of downstream A2A agents a ``task_state`` fault gave a state, by (agent,
        task id): the fault's label and the state every later call about the task gets."""
        if scenario.cell_id:
            self.begin(scenario.cell_id)

    def begin(self, cell: str, at: float | None = None) -> None:
        """``cell`` (an invocation) started now (or at ``at``, :func:`time.monotonic`): the
        origin of its faults' ``window_ms``, and the invocation its trace id names
        (:meth:`traced`)."""
        with self._lock:
            self._started[cell] = time.monotonic() if at is None else at
            self._traces[trace_id(self.scenario.seed, cell)] = cell
            for known in (self._traces, self._started):  # the oldest are long done
                if len(known) > MAX_TRACES:
                    del known[next(iter(known))]

    def traced(self, trace: str) -> str | None:
        """The invocation that started trace ``trace`` (a W3C trace id), if it began under
        this scenario or before a matrix."""
        with self._lock:
            return self._traces.get(trace)

    def _elapsed_ms(self, cell: str) -> float | None:
        started = self._started.get(cell)
        return None if started is None else (time.monotonic() - started) * 1000.0

    def _schedule(self, fault: Scheduled) -> Schedule:
        key = id(fault)
        found = self._schedules.get(key)
        if found is None:
            found = self._schedules[key] = schedule_of(fault)
        return found

    def _in_schedule(self, cell: str, fault: Scheduled, call_index: int) -> bool:
        schedule = self._schedule(fault)
        if not schedule.in_turn(cell):
            return False
        if schedule.every_call:
            return True
        elapsed = self._elapsed_ms(cell) if schedule.timed else None
        return schedule.covers(call_index + 1, elapsed)

    def _next_index(self, cell: str, key: str) -> int:
        with self._lock:
            n = self._counts.get((cell, key), 0)
            self._counts[(cell, key)] = n + 1
            if len(self._counts) > MAX_COUNTS:  # the oldest invocation's are long done
                del self._counts[next(iter(self._counts))]
            return n

    def _fires(self, cell: str, label: str, call_index: int, probability: float) -> bool:
        """Whether a fault whose schedule covers this call fires on it."""
        if probability >= 1.0:
            return True
        s = self.scenario
        return draw(s.seed, s.name, cell, label, call_index) < probability

    def cell_of(self, attributed: str | None) -> str:
        """The cell an interaction belongs to: its own attribution, else the scenario's."""
        return attributed or self.scenario.cell_id

    def tool_call(
        self,
        tool: str | None,
        url: str,
        cell: str,
        short: str | None = None,
        method: A2aMethod | None = None,
    ) -> Decision:
        """Decide a call to ``tool`` (None when only the URL is known) for ``cell``; an MCP
        tool (``quotes.get_quote``) is also matched by its ``short`` name (``get_quote``), a
        call of an A2A agent by its ``method``."""
        s = self.scenario
        faults = [
            (i, fault, tool_fault_label(i, fault))
            for i, fault in enumerate(s.tool_faults)
            if tool_matches(fault, tool, url, short, method)
        ]
        attacks = [
            (i, attack, 1.0 if attack.trigger_probability is None else attack.trigger_probability)
            for i, attack in enumerate(s.context_attacks)
            if attack.type in TOOL_RESULT_ATTACKS and attack.tool in (None, tool, short)
        ]
        chosen, decision = self._decide(
            cell, tool_key(tool or url), faults, attacks, _replaces_result
        )
        return dataclasses.replace(decision, tool_fault=chosen)

    def llm_call(self, cell: str) -> Decision:
        """Decide a call to the LLM for ``cell``."""
        s = self.scenario
        faults = [(i, fault, llm_fault_label(i, fault)) for i, fault in enumerate(s.llm_faults)]
        attacks = [
            (i, attack, 1.0)
            for i, attack in enumerate(s.context_attacks)
            if attack.type in LLM_REQUEST_ATTACKS
        ]
        chosen, decision = self._decide(cell, LLM_KEY, faults, attacks, _replaces_upstream)
        return dataclasses.replace(decision, llm_fault=chosen)

    def _decide(
        self,
        cell: str,
        key: str,
        faults: Sequence[tuple[int, _F, str]],
        attacks: Sequence[tuple[int, ContextAttack, float]],
        replaces: Callable[[_F], bool],
    ) -> tuple[tuple[int, _F] | None, Decision]:
        """The one decision of a call under ``key`` (a tool's or the LLM's): the first matching
        fault that fires on it (one reply, one fault), and the attacks that fire on what it
        carries (each with its probability) unless that fault answers in place of the tool or
        LLM (``replaces``), with the proof: the label of every matching fault and attack whose
        schedule covers the call, of those a replacing fault left nothing to act on, and of
        those whose schedule does not cover it."""
        call_index = self._next_index(cell, key)
        chosen: tuple[int, _F] | None = None
        replacing: str | None = None
        matched: list[str] = []
        unscheduled: list[str] = []
        for i, fault, label in faults:
            if not self._in_schedule(cell, fault, call_index):
                unscheduled.append(label)
                continue
            matched.append(label)
            if chosen is None and self._fires(cell, label, call_index, fault.probability):
                chosen = (i, fault)
                replacing = label if replaces(fault) else None
        fired, replaced = [], []
        for i, attack, probability in attacks:
            label = attack_label(i, attack)
            if not self._in_schedule(cell, attack, call_index):
                unscheduled.append(label)
            elif replacing is not None:  # the fault answers instead: nothing to poison or read
                replaced.append((label, replacing))
            else:
                matched.append(label)  # what it acts on reached flakestorm: delivered
                if self._fires(cell, label, call_index, probability):
                    fired.append((i, attack))
        return chosen, Decision(
            call_index,
            attacks=tuple(fired),
            matched=tuple(matched),
            replaced=tuple(replaced),
            unscheduled=tuple(unscheduled),
        )

    def declared(self) -> tuple[str, ...]:
        """Labels of every fault that must be delivered (proxy- or wrapper-side)."""
        s = self.scenario
        out = [tool_fault_label(i, f) for i, f in enumerate(s.tool_faults)]
        out += [llm_fault_label(i, f) for i, f in enumerate(s.llm_faults)]
        out += [
            attack_label(i, a)
            for i, a in enumerate(s.context_attacks)
            if a.type in TOOL_RESULT_ATTACKS or a.type in LLM_REQUEST_ATTACKS
        ]
        return tuple(out)
