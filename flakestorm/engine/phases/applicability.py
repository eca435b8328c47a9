"""``when`` judged per invocation, for faults that may leave an invocation untouched (SPEC §5,
"``when`` and faults that may not fire").

A scenario whose faults can spare an invocation — ``probability`` below 1, a schedule (``calls``,
``every``, ``window_ms``, ``after_calls``), an attack's ``trigger_probability`` below 1 — does not
make every invocation of its cells one "with tool faults active": a fault with ``calls: "1-2"``
that an agent's third try gets past leaves the invocation with a real answer. An invariant
whose ``when`` is ``tool_faults_active``, ``llm_faults_active`` or ``any_chaos_active`` then
applies to an invocation only if a fault of that kind fired during it, as the delivery proof
recorded (each call names its invocation, ``RUN.PROMPT``). The cell is judged again on those
invocations alone (:func:`rejudge`): ``skipped`` when there is none, and its notes say how many
it was judged on.

A fault's ``turns`` alone does not make ``when`` per invocation (SPEC §12: "``when`` still reads
the scenario"): a conversation is one unit, and a fault on turn 2 is what the later turns are
checked under (the tool failed on turn 2: does the agent still claim a comparison on turn 3?).
An invariant with ``when: tool_faults_active`` then checks the turns its ``turn`` selects in
every conversation of a scenario with tool faults, as for a fault on every turn.
"""

from __future__ import annotations

import dataclasses

from flakestorm.chaos.faults.decisions import LLM_REQUEST_ATTACKS, TOOL_RESULT_ATTACKS
from flakestorm.chaos.faults.labels import schedule_of
from flakestorm.config import Scenario, When
from flakestorm.results.model import CellResult, PromptResult, Status

_KINDS = {
    When.TOOL_FAULTS_ACTIVE: ("tool_faults[",),
    When.LLM_FAULTS_ACTIVE: ("llm_faults[",),
    When.ANY_CHAOS_ACTIVE: ("tool_faults[", "llm_faults[", "context_attacks["),
}
_WORDS = {
    When.TOOL_FAULTS_ACTIVE: "a tool fault",
    When.LLM_FAULTS_ACTIVE: "an LLM fault",
    When.ANY_CHAOS_ACTIVE: "a fault or context attack",
}


def may_spare(scenario: Scenario) -> bool:
    """Whether a fault of ``scenario`` can leave an invocation untouched by chance or by its
    schedule (``turns`` does not count: ``when`` reads the scenario for those)."""
    for fault in (*scenario.tool_faults, *scenario.llm_faults):
        if fault.probability < 1 or not schedule_of(fault).every_call:
            return True
    for attack in scenario.context_attacks:
        if attack.type not in TOOL_RESULT_ATTACKS | LLM_REQUEST_ATTACKS:
            continue  # memory_poisoning: every invocation's prompt
        probability = attack.trigger_probability
        if (probability is not None and probability < 1) or not schedule_of(attack).every_call:
            return True
    return False


def rejudge(
    cell: CellResult, when: When, scenario: Scenario, prompts: int, repeat: int, min_pass: int
) -> CellResult:
    """``cell`` judged on the invocations ``when`` applies to (unchanged when that is all of
    them, or ``when`` does not depend on what fired)."""
    kinds = _KINDS.get(when)
    if kinds is None or cell.status not in (Status.PASSED, Status.FAILED):
        return cell
    if not may_spare(scenario):
        return cell
    if len(cell.prompts) != prompts * repeat:
        return cell
    poisoned = when is When.ANY_CHAOS_ACTIVE and any(
        a.type not in TOOL_RESULT_ATTACKS | LLM_REQUEST_ATTACKS for a in scenario.context_attacks
    )
    fired: set[str] = set()
    for call in cell.calls:
        if any(label.startswith(kinds) for label in call.fired):
            fired.add(".".join(call.invocation.split(".")[:2]))  # RUN.PROMPT(.TURN)
    applies = [
        poisoned or f"{index // prompts}.{index % prompts}" in fired
        for index in range(len(cell.prompts))
    ]
    total = len(applies)
    judged = sum(applies)
    if judged == total:
        return cell
    words = _WORDS[when]
    if judged == 0:
        return dataclasses.replace(
            cell,
            status=Status.SKIPPED,
            reason=(
                f"when: {when.value}: {words} fired in none of its {total} invocation(s) "
                "(the scenario's faults may spare an invocation)"
            ),
            flaky=False,
            runs_passed=0,
            runs_total=0,
        )
    runs: list[list[tuple[int, PromptResult]]] = []
    for run in range(repeat):
        own = [
            (i, cell.prompts[run * prompts + i])
            for i in range(prompts)
            if applies[run * prompts + i]
        ]
        if own:
            runs.append(own)
    passed = sum(all(p.passed for _, p in run) for run in runs)
    status = Status.PASSED if passed >= min(min_pass, len(runs)) else Status.FAILED
    failing = next(((i, p) for run in runs for i, p in run if not p.passed), None)
    if failing is None:
        reason = f"held in the {judged} invocation(s) {words} fired in"
    elif failing[1].turn is not None:
        reason = f"golden prompt {(failing[1].conversation or 0) + 1}, turn {failing[1].turn}: "
        reason += failing[1].reason
    else:
        reason = f"prompt {failing[0] + 1}/{prompts}: {failing[1].reason}"
    note = f"judged on {judged} of {total} invocations: those {words} fired in (when: {when.value})"
    # the invocations it was not judged on are shown so (their verdicts did not count)
    shown = tuple(
        p if applied else dataclasses.replace(p, checked=False)
        for p, applied in zip(cell.prompts, applies, strict=True)
    )
    return dataclasses.replace(
        cell,
        status=status,
        reason=reason,
        prompts=shown,
        flaky=0 < passed < len(runs),
        runs_passed=passed,
        runs_total=len(runs),
        notes=(*cell.notes, note),
    )
