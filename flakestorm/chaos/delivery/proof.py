"""The proof that a scenario's faults reached the agent.

A channel (:mod:`flakestorm.chaos.channels.channel`) is where faults reach the agent's dependencies.
The matrix activates a scenario on it, then reads the scenario's interactions back:
:func:`prove` turns them into per-cell proof (the faults that fired in each cell and the calls
the agent made) and the scenario's delivery proof (the declared faults and those some call
matched), and :func:`judge` decides from that proof alone which declared faults no matching
call ever reached (SPEC §4: those make the scenario's cells ERRORED with a message that says
what is probably mis-wired). The proof is kept in ``results.json``, so delivery can be judged
again from files.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from flakestorm.chaos.delivery.interactions import Interaction
from flakestorm.chaos.faults.decisions import (
    LLM_REQUEST_ATTACKS,
    TOOL_RESULT_ATTACKS,
    UNATTRIBUTED,
    ActiveScenario,
    FaultBook,
    Target,
)
from flakestorm.chaos.faults.labels import (
    attack_label,
    llm_fault_label,
    schedule_of,
    tool_fault_label,
)
from flakestorm.config import Scenario, Scheduled
from flakestorm.results.model import CallRecord, CellResult, ScenarioInfo, Status
from flakestorm.results.scenarios import MAX_UNATTRIBUTED_CALLS, declaration_order

if TYPE_CHECKING:
    from flakestorm.chaos.channels.channel import Channel

CALM = "flakestorm:no-chaos"
"""The name of the pass-through scenario active outside chaos scenarios (baselines, checks)."""


def active_scenario(scenario: Scenario, seed: int, cell_id: str = "") -> ActiveScenario:
    return ActiveScenario(
        name=scenario.name,
        seed=seed,
        tool_faults=tuple(scenario.tool_faults),
        llm_faults=tuple(scenario.llm_faults),
        context_attacks=tuple(
            a
            for a in scenario.context_attacks
            if a.type in TOOL_RESULT_ATTACKS or a.type in LLM_REQUEST_ATTACKS
        ),
        cell_id=cell_id,
    )


def prove(
    cells: Sequence[CellResult],
    interactions: Sequence[Interaction],
    book: FaultBook,
    channel: Channel,
    info: ScenarioInfo,
) -> tuple[list[CellResult], ScenarioInfo]:
    """The delivery proof of one scenario that ran on ``channel``.

    Returns the cells with ``faults_fired`` and ``calls`` filled in from their interactions,
    and ``info`` with the labels of the faults that must be delivered (``declared``), those
    some call matched and could act on (``matched``), those that matched a call but could not
    be applied to it (``unapplied``, with why), the context attacks' calls a fault answered in
    place of the tool or LLM (``replaced``, counted per fault) and a wiring hint per declared
    label. Whether a fault was delivered is decided from these alone by :func:`judge`.
    """
    by_cell: dict[str, list[Interaction]] = {}
    matched: dict[str, None] = {}
    unapplied: dict[str, str] = {}
    replaced: dict[str, dict[str, int]] = {}
    outside: dict[str, int] = {}
    for interaction in interactions:
        by_cell.setdefault(cell_of(interaction.cell_id), []).append(interaction)
        matched.update(dict.fromkeys(interaction.matched))
        for label in interaction.unscheduled:
            outside[label] = max(outside.get(label, 0), interaction.call_index + 1)
        for label, why in interaction.unapplied:
            unapplied.setdefault(label, why)
        for label, by in interaction.replaced:
            counts = replaced.setdefault(label, {})
            counts[by] = counts.get(by, 0) + 1
    declared = book.declared()
    tools = {f"tool_faults[{i}]": f.tool for i, f in enumerate(book.scenario.tool_faults)}
    # a wiring hint only where no call matched the fault (results.json states what happened)
    hints = {
        label: channel.wiring_hint(label, tools.get(label.split(" ", 1)[0]), book.scenario.name)
        for label in declared
        if label not in matched
    }
    out = []
    for cell in cells:
        own = by_cell.get(cell.id, [])
        # in the order the scenario declares them, not the order the calls arrived in
        fired = declaration_order([*cell.faults_fired, *(f for i in own for f in i.fired)])
        calls = tuple(call_record(i) for i in own)
        out.append(dataclasses.replace(cell, faults_fired=fired, calls=calls))
    proof = dataclasses.replace(
        info,
        declared=declared,
        matched=tuple(label for label in matched if label in declared),
        hints=hints,
        unapplied={label: why for label, why in unapplied.items() if label in declared},
        replaced={label: by for label, by in replaced.items() if label in declared},
        unscheduled={
            label: _outside_schedule(book, label, calls)
            for label, calls in outside.items()
            if label in declared and label not in matched
        },
        seen=seen_counts(interactions),
        unattributed=len(by_cell.get(UNATTRIBUTED, ())),
        unattributed_calls=tuple(
            call_record(i) for i in by_cell.get(UNATTRIBUTED, ())[:MAX_UNATTRIBUTED_CALLS]
        ),
    )
    return out, proof


def call_record(interaction: Interaction) -> CallRecord:
    """``interaction`` as its cell (or mutation) keeps it in the results."""
    return CallRecord(
        target=interaction.target.value,
        tool=interaction.tool,
        method=interaction.method,
        url=interaction.url,
        status=interaction.status,
        fired=declaration_order(interaction.fired),
        upstream_error=interaction.upstream_error,
        latency_ms=round(interaction.latency_ms, 3),
        invocation=invocation_of(interaction.cell_id),
        request=interaction.request,
        response=interaction.response,
        started_ms=round(interaction.started_ms, 3),
        retry_after_s=interaction.retry_after_s,
        idempotency_key=interaction.idempotency_key,
        fingerprint=interaction.fingerprint,
        usage=interaction.usage,
        detail=interaction.detail,
    )


def seen_counts(interactions: Sequence[Interaction]) -> dict[str, int]:
    """What a scenario's calls were, counted by kind (:attr:`ScenarioInfo.seen`): ``tool
    NAME``, ``llm``, ``forward ORIGIN`` (a forward-proxy or ``CONNECT`` call no tool route
    matched), ``other``."""
    seen: dict[str, int] = {}
    for interaction in interactions:
        if interaction.target is Target.TOOL:
            kind = f"tool {interaction.tool}"
        elif interaction.target is Target.LLM:
            kind = "llm"
        else:
            parts = urlsplit(interaction.url)
            if parts.scheme in ("http", "https") and parts.netloc:
                kind = f"forward {parts.scheme}://{parts.netloc}"
            elif interaction.method == "CONNECT":
                kind = f"forward https://{interaction.url}"
            else:
                kind = "other"
        seen[kind] = seen.get(kind, 0) + 1
    return seen


NOT_DELIVERED = "fault not delivered: "
"""How the reason of a cell in an undelivered scenario starts."""


def judge(info: ScenarioInfo, cells: Sequence[CellResult]) -> tuple[ScenarioInfo, list[CellResult]]:
    """Delivery judged from a scenario's proof alone (SPEC §4, §10): a declared fault that no
    call matched (a context attack whose every matching call a fault answered in place of the
    tool or LLM included), or that matched a call but could not be applied to it, is not
    delivered, and then every scored cell of the scenario is ERRORED with the reason (the
    invariant's own verdict kept in ``checked``). Judging again — e.g. with the calls of every
    shard — first gives the cells their own verdicts back."""
    own = [
        cell
        if cell.checked is None
        else dataclasses.replace(
            cell,
            status=cell.checked,
            reason=cell.checked_reason or "",
            checked=None,
            checked_reason=None,
        )
        for cell in cells
    ]
    # a stopped run (Ctrl-C, max_invocations) leaves cells not run: the calls that would have
    # delivered a fault may be in them, so only a scenario that ran to the end is judged; and
    # a scenario whose cells never invoked the agent (all skipped, not run, or errored before
    # their first invocation, e.g. by a failed reset) proves nothing
    ran = any(cell.status.scored and cell.prompts for cell in own) and not any(
        cell.status is Status.NOT_RUN for cell in own
    )
    matched = set(info.matched)
    undelivered = tuple(
        label
        for label in info.declared
        if ran and (label not in matched or label in info.unapplied)
    )
    judged = dataclasses.replace(info, undelivered=undelivered)
    if not undelivered:
        return judged, [unreachable(cell) for cell in own]
    reason = "; ".join(f"{NOT_DELIVERED}{label}: {info.why(label)}" for label in undelivered)
    out = [
        dataclasses.replace(
            cell,
            status=Status.ERRORED,
            reason=reason,
            checked=cell.status,
            checked_reason=cell.reason,
        )
        if cell.status.scored
        else cell
        for cell in own
    ]
    return judged, out


UNREACHABLE = "upstream_unreachable: "
"""How a call's ``upstream_error`` starts when the proxy could not reach its upstream."""


def unreachable(cell: CellResult) -> CellResult:
    """``cell`` ERRORED when a call no fault answered could not reach its upstream (SPEC
    §2.5): the agent met flakestorm's failure, not its own ("upstream unreachable: NAME
    (URL)"); its own verdict is kept in ``checked``, as for an undelivered fault."""
    if not cell.status.scored or cell.status is Status.ERRORED:
        return cell
    for call in cell.calls:
        error = call.upstream_error or ""
        if error.startswith(UNREACHABLE):  # it went upstream: no fault answered in its place
            name = call.tool or call.target
            return dataclasses.replace(
                cell,
                status=Status.ERRORED,
                reason=f"upstream unreachable: {name} ({error.removeprefix(UNREACHABLE)})",
                checked=cell.status,
                checked_reason=cell.reason,
            )
    return cell


_INVOCATION_SUFFIX = re.compile(r"#\d+\.\d+(?:\.\d+)?$")
"""``#RUN.PROMPT``, or ``#RUN.PROMPT.TURN`` for a conversation's turn."""


def invocation_of(attribution: str) -> str:
    """``RUN.PROMPT`` of an interaction's attribution (``cell#0.2`` → ``0.2``; a turn's
    ``cell#0.2.3`` → ``0.2.3``), else ""."""
    found = _INVOCATION_SUFFIX.search(attribution)
    return found.group(0)[1:] if found else ""


def _outside_schedule(book: FaultBook, label: str, calls: int) -> str:
    """Why a fault whose matching calls all came outside its schedule is not delivered."""
    s = book.scenario
    faults: dict[str, Scheduled] = {tool_fault_label(i, f): f for i, f in enumerate(s.tool_faults)}
    faults.update((llm_fault_label(i, f), f) for i, f in enumerate(s.llm_faults))
    faults.update((attack_label(i, a), a) for i, a in enumerate(s.context_attacks))
    fault = faults.get(label)
    acts = schedule_of(fault).describe() if fault is not None else "its schedule"
    made = f"{calls} matching call{'s' if calls != 1 else ''}"
    return f"the agent made at most {made} per invocation; the fault acts on {acts}"


def cell_of(attribution: str) -> str:
    """The cell id of an interaction's attribution (``cell#run.prompt`` → ``cell``; the cell
    id itself may hold a ``#``, e.g. a scenario named ``outage #2``)."""
    return _INVOCATION_SUFFIX.sub("", attribution)
