"""The matrix (or, for the mutation phase, the per-type table and the failed mutations) and
the verdict as plain text for a terminal or a CI log.

Agent output is untrusted: everything quoted from it goes through
:func:`flakestorm.reporters.escape.log_line` so it cannot break lines, move the cursor, or be
read by a CI runner as a workflow command (``::``, or ``##[`` anywhere in a line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flakestorm.reporters import breaking
from flakestorm.reporters.errored import errored_note, errored_together
from flakestorm.reporters.escape import log_line
from flakestorm.reporters.mutation_view import (
    failed_mutations,
    mutation_input,
    mutation_input_label,
    mutation_reply,
    mutation_types,
)
from flakestorm.reporters.spend_view import cell_spend
from flakestorm.reporters.stream_view import cell_stream
from flakestorm.reporters.transcript import transcript, turn_line
from flakestorm.reporters.view import (
    ACCEPTED_TITLE,
    RunVerdict,
    accepted_lines,
    all_warnings,
    call_status,
    call_target,
    cell_reader,
    judge_lines,
    run_verdict,
    unattributed_heading,
)
from flakestorm.results.model import CallRecord, CellResult, PhaseOutcome, RunResult, Status
from flakestorm.results.tally import CellMark, tally_of

_CELL_TEXT = {
    Status.PASSED: "pass",
    Status.FAILED: "FAIL",
    Status.ERRORED: "ERROR",
    Status.SKIPPED: "-",
    Status.NOT_RUN: "not run",
}


def cell_text(cell: CellResult | CellMark) -> str:
    if cell.flaky:
        return "flaky" if cell.status is Status.PASSED else "flaky FAIL"
    return _CELL_TEXT[cell.status]


def scenario_line(name: str, cells: Sequence[CellResult]) -> str:
    """The progress line of a finished scenario: ``scenario tool-down: 3 passed, 1 failed``,
    in the matrix's words (``2 not run``, as its cells read)."""
    counts: dict[str, int] = {}
    for cell in cells:
        word = cell.status.value.replace("_", " ")
        counts[word] = counts.get(word, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    return f"scenario {log_line(name, 80)}: {summary}"


def render_matrix(outcome: PhaseOutcome, texts: Mapping[tuple[str, str], str] | None = None) -> str:
    """The pass/fail matrix: rows = invariants (with severity), columns = scenarios
    (``texts``: each cell's :func:`cell_text` by invariant and scenario, when read already)."""
    scenarios = [s.name for s in outcome.scenarios]
    by_key = texts if texts is not None else _scan(outcome).texts
    head = [outcome.rows, "severity", *scenarios]
    rows = []
    for inv in outcome.invariants:
        row = [log_line(inv.id, 40), inv.severity]
        row.extend(by_key.get((inv.id, name), "") for name in scenarios)
        rows.append(row)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cols: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()

    out = [line([log_line(h, 40) for h in head]), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def render(result: RunResult) -> str:
    """Each phase's matrix, failing cells with their reasons and score; the verdict."""
    out = []
    for outcome in result.phases.values():
        label = outcome.phase.capitalize()
        out.append(
            f"{label}: {log_line(outcome.name)}" if outcome.name != outcome.phase else f"{label}:"
        )
        scan = _scan(outcome)  # the cells read once, one at a time
        if outcome.cells or not outcome.mutations:
            out.append(render_matrix(outcome, scan.texts))
        for sweep in outcome.sweeps:
            out.append(f"Sweep {log_line(breaking.title(sweep), 200)}:")
            out.extend(
                f"  {log_line(invariant, 60)}: {' '.join(marks)}  {point}"
                for invariant, marks, point in breaking.rows(sweep)
            )
        out.extend(_failing(outcome, scan))
        if outcome.mutations:
            out.extend(render_mutations(outcome))
        score = outcome.score.score
        summary = "" if outcome.score.summary is None else f" ({outcome.score.summary})"
        out.append("")
        out.append(f"{label} score: {'n/a' if score is None else f'{score:.2f}'}{summary}")
        out.append("")
    for warning in all_warnings(result):
        out.append(log_line(warning, 400))
    for line in judge_lines(result):
        out.append(log_line(line, 400))
    if result.overall.score is not None and len(result.overall.phases_ran) > 1:
        out.append(
            f"Overall score: {result.overall.score:.2f} ({', '.join(result.overall.phases_ran)})"
        )
    if not result.complete:
        out.append(f"Run stopped early ({result.stop_reason}): results are partial.")
    out.append(verdict_line(result))
    out.extend(f"  - {log_line(r, 400)}" for r in result.overall.reasons)
    accepted = accepted_lines(result)
    if accepted:
        out.append(ACCEPTED_TITLE.replace("`", ""))
        out.extend(f"  - {log_line(line, 400)}" for line in accepted)
    return "\n".join(out) + "\n"


FAILED_MUTATIONS_SHOWN = 20


def render_mutations(outcome: PhaseOutcome) -> list[str]:
    """The per-type table of a mutation phase, then its failed mutations (at most
    :data:`FAILED_MUTATIONS_SHOWN`; the reports have them all): the original, what was sent
    (or the request changes), an excerpt of the reply and the failed invariants."""
    rows = [
        [log_line(r.type, 40), f"{r.weight:g}", str(r.total), str(r.passed), r.rate]
        for r in mutation_types(outcome)
    ]
    head = ["type", "weight", "total", "passed", "pass rate"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cols: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()

    out = [line(head), line(["-" * w for w in widths]), *(line(r) for r in rows)]
    failed = failed_mutations(outcome)
    together = errored_together(outcome)
    if failed or together:
        out += ["", "Failed mutations:"]
        out += [f"  ERRORED {log_line(errored_note(group), 400)}" for group in together]
        for m in failed[:FAILED_MUTATIONS_SHOWN]:
            out.append(
                f"  {m.status.value.upper()} {log_line(m.id, 60)} ({log_line(m.transform, 40)}): "
                f"{log_line(m.reason, 300)}"
            )
            out.append(f"    original: {log_line(m.original, 160)}")
            out.append(f"    {mutation_input_label(m)}: {log_line(mutation_input(m), 160)}")
            out.append(f"    reply: {log_line(mutation_reply(m), 160)}")
            if m.failed_invariants:
                failed_ids = ", ".join(log_line(i, 60) for i in m.failed_invariants)
                out.append(f"    failed invariants: {failed_ids}")
            out.extend(f"    {_call_line(call)}" for call in m.calls[:CALL_LINES])
        if len(failed) > FAILED_MUTATIONS_SHOWN:
            out.append(f"  … and {len(failed) - FAILED_MUTATIONS_SHOWN} more (see the reports)")
    return out


def verdict_line(result: RunResult, shown: RunVerdict | None = None) -> str:
    """``Verdict: PASS``, ``Verdict: FAIL``, or ``Verdict: ERROR (exit 3: causes)``: the line
    always matches the exit code. ``shown``: the step's verdict
    (:func:`flakestorm.reporters.view.step_verdict`), default the run's own; a rule that
    decided it follows (``Verdict: PASS — fail-on: regression: no new failures vs …``)."""
    shown = shown or run_verdict(result)
    if not shown.error:
        return f"Verdict: {shown.word}{shown.note(lambda s: log_line(s, 200))}"
    causes = "; ".join(log_line(cause, 300) for cause in shown.causes)
    return f"Verdict: {shown.word} (exit {shown.code}: {causes})"


def error_verdict_line(cause: str, message: str) -> str:
    """The verdict line of a run that could not start or finish (an exit-3 error raised before
    there was a result to report): ``Verdict: ERROR (exit 3: cause: message)``."""
    first = (message.splitlines() or [""])[0]
    return f"Verdict: ERROR (exit 3: {log_line(cause, 100)}: {log_line(first, 400)})"


CALL_LINES = 5
"""The calls listed for a failed mutation or a scenario's unattributed calls (the rest in the
other reports)."""


def _call_line(call: CallRecord) -> str:
    """``call llm POST http://…/v1/chat/completions -> 503 (fired: llm_faults[0] …)``."""
    fired = f" (fired: {log_line(', '.join(call.fired), 160)})" if call.fired else ""
    return (
        f"call {log_line(call_target(call), 60)} {log_line(call.method, 10)} "
        f"{log_line(call.url, 120)} -> {call_status(call)}{fired}"
    )


def _failing(outcome: PhaseOutcome, scan: _Scan) -> list[str]:
    """Failed and errored cells with their reasons and notes, undelivered faults, and the
    notes of the other cells (a passing replayed session that diverged)."""
    out = []
    for info in outcome.scenarios:
        if info.undelivered:
            out.append(
                f"FAULT NOT DELIVERED in scenario {log_line(info.name, 80)}: "
                + "; ".join(log_line(label, 120) for label in info.undelivered)
            )
        if info.unattributed:
            out.append(log_line(unattributed_heading(outcome, info), 300))
            out.extend(f"  {_call_line(call)}" for call in info.unattributed_calls[:CALL_LINES])
    if scan.failing:
        out.extend(["", "Failing cells:", *scan.failing])
    if scan.noted:
        out.extend(["", "Notes:", *scan.noted])
    return out


@dataclass(frozen=True)
class _Scan:
    """What the terminal shows of a phase's cells, read in one pass: each cell's text in the
    matrix, and the lines of the failing cells and of the other cells' notes."""

    texts: dict[tuple[str, str], str]
    failing: list[str]
    noted: list[str]


def _scan(outcome: PhaseOutcome) -> _Scan:
    """The matrix from the phase's tally (:func:`cell_marks`); the failing cells and the others
    with notes read one at a time (a spooled phase's by index), once."""
    tally = tally_of(outcome.cells)
    texts = {(m.invariant_id, m.scenario): cell_text(m) for m in tally.cells.values()}
    failing: list[str] = []  # the lines only
    noted: list[str] = []
    shown = sorted({*tally.missed, *(key for key, m in tally.cells.items() if m.noted)})
    read = cell_reader(outcome.cells)
    # errored cells sharing one cause (a dead agent, a run that could not start) are one line,
    # with how many cells it touched, not one line each
    shared: dict[str, list[tuple[str, str]]] = {}
    at: dict[str, int] = {}
    for cell in map(read, shown):
        if cell.status is Status.ERRORED and not cell.notes and not cell.faults_fired:
            ids = shared.setdefault(cell.reason, [])
            if not ids:
                at[cell.reason] = len(failing)
                failing.append("")
            ids.append((cell.id, cell.severity))
            continue
        if cell.status in (Status.FAILED, Status.ERRORED):
            fired = ", ".join(cell.faults_fired)
            fired = f" (faults fired: {log_line(fired)})" if fired else ""
            failing.append(
                f"  {cell.status.value.upper()} {log_line(cell.id, 80)} [{cell.severity}]: "
                f"{log_line(cell.reason, 400)}{fired}"
            )
            failing.extend(f"    {log_line(note, 400)}" for note in cell.notes)
            spent, streamed = cell_spend(cell.spend), cell_stream(cell)
            failing.extend([f"    spent: {log_line(spent, 300)}"] if spent else [])
            failing.extend([f"    stream: {log_line(streamed, 300)}"] if streamed else [])
            for conversation in transcript(cell):
                failing.append(f"    {log_line(conversation.title, 200)}")
                failing.extend(
                    f"      {log_line(turn_line(t, 120), 600)}" for t in conversation.turns
                )
        elif cell.notes:
            noted.append(f"  {cell.status.value.upper()} {log_line(cell.id, 80)}:")
            noted.extend(f"    {log_line(note, 400)}" for note in cell.notes)
    for reason, ids in shared.items():
        if len(ids) == 1:
            ((ident, severity),) = ids
            line = f"  ERRORED {log_line(ident, 80)} [{severity}]: {log_line(reason, 400)}"
        else:
            named = ", ".join(log_line(ident, 80) for ident, _ in ids[:3])
            more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
            line = f"  ERRORED {len(ids)} cells ({named}{more}): {log_line(reason, 400)}"
        failing[at[reason]] = line
    return _Scan(texts, failing, noted)
