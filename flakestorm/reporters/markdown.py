"""The GitHub job summary (GitHub-flavoured markdown), and the text pieces other reporters share.

Layout: the verdict and the scores of every phase first, then — prominently — the faults that
were not delivered (SPEC §4), then one section per phase that ran (the contract, then the
chaos-only phase): its matrix (rows = invariants with their severity, columns = scenarios, a 🚫
on a scenario whose faults were not delivered) with a legend, a collapsed table of the
scenarios with their declared faults, and every failed or errored cell in a ``<details>``
block with its failing prompts, an excerpt of each reply, the reason, the faults that fired and
the first tool and LLM calls the agent made. A phase whose unit is the mutation (it has
mutations and no cells) shows a per-type table (total, passed, pass rate) instead of the
matrix, and a ``<details>`` block per failed or errored mutation: the original, the mutated
prompt or the request changes, an excerpt of the reply, the failed invariants and its first
calls. The calls of a scenario (or of the mutation phase) that could not be attributed to a
cell — an agent forwarding no attribution, its cells run side by side — follow the legend,
per scenario.

Untrusted text goes through :mod:`flakestorm.reporters.escape`; the pieces every report shares
are in :mod:`flakestorm.reporters.view`. The summary is world-readable on a public repository,
so by default it quotes the agent's replies public-safe (:mod:`flakestorm.reporters.public`:
replies cut where a leak invariant matched, PII masked) and says so; ``redact=False`` quotes
them in full.

Size
----
GitHub drops a step summary over 1 MiB. :func:`render` keeps the document under
``limit_bytes`` (UTF-8): cell (or mutation) details are dropped from the end first, then
scenario table rows, then matrix (or type table) rows, and a note says how many were left
out and where the full report is (``report.html``, ``results.json``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.reporters import breaking
from flakestorm.reporters import delta as delta_report
from flakestorm.reporters.escape import EXCERPT_CHARS, code_block, html_text, text, url_span
from flakestorm.reporters.mutation_view import (
    failed_mutations,
    mutation_legend,
    mutation_mark,
    mutation_types,
)
from flakestorm.reporters.public import NOTE as PUBLIC_NOTE
from flakestorm.reporters.public import public
from flakestorm.reporters.spend_view import cell_spend, markdown_lines
from flakestorm.reporters.stream_view import cell_stream, failed_stream, markdown_timeline
from flakestorm.reporters.transcript import rows
from flakestorm.reporters.view import (
    ACCEPTED_TITLE,
    LEGEND,
    UNDELIVERED_LEGEND,
    UNDELIVERED_TITLE,
    RunVerdict,
    accepted_lines,
    all_warnings,
    bad_cells,
    call_status,
    call_target,
    cell_mark,
    cell_marks,
    error_line,
    faults_text,
    judge_lines,
    label_text,
    no_calls,
    phase_state,
    phases,
    run_verdict,
    scenario_notes,
    score_text,
    unattributed,
    unattributed_heading,
    undelivered_items,
)
from flakestorm.results.model import (
    CallRecord,
    CellResult,
    MutationResult,
    PhaseOutcome,
    PromptResult,
    RunResult,
    ScenarioInfo,
    Status,
)
from flakestorm.results.spool import Mapped

SUMMARY_LIMIT_BYTES = 1_048_576
"""GitHub's limit for one step summary; :func:`render` stays strictly below it."""
MAX_PROMPTS_PER_CELL = 3
"""Failing invocations quoted per cell; the rest are counted."""
MAX_LIST_ITEMS = 50
"""Warnings, gate reasons or undelivered faults listed; the rest are counted."""
MAX_CALLS_PER_CELL = 10
"""Calls listed in a cell's details; the rest are counted (the HTML report has them all)."""
MAX_FAULTS_PER_SCENARIO = 10
"""Declared faults listed per scenario in the scenarios table."""


def _listed(items: Sequence[str], limit: int, width: int) -> list[str]:
    lines = [f"- {text(item, width)}" for item in items[:limit]]
    if len(items) > limit:
        lines.append(f"- … and {len(items) - limit} more")
    return lines


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def _undelivered_block(result: RunResult) -> list[str]:
    items = undelivered_items(result, MAX_LIST_ITEMS)
    if not items:
        return []
    return ["> [!WARNING]", f"> {UNDELIVERED_TITLE}", *(f"> {item}" for item in items), ""]


def _head(result: RunResult, shown: RunVerdict, withheld: bool = False) -> list[str]:
    overall = result.overall
    out = [f"## flakestorm: {shown.heading(lambda s: text(s, 200))}", ""]
    error = error_line(result, 600)
    if error is not None:
        out += [error, ""]
    scores = [f"**Overall score: {score_text(overall.score)}**"]
    if overall.min_score:
        scores.append(f"min\\_score {overall.min_score:g}")
    for outcome in phases(result):
        scores.append(
            f"{label_text(outcome, 100)}: {score_text(outcome.score.score)} "
            f"({phase_state(outcome)})"
        )
    out.append(" · ".join(scores))
    out.append("")
    if overall.reasons:
        # under fail-on: regression the step's verdict may differ from the run's own gate
        out.append("The gate failed:" if shown.rule is None else "The run's own gate failed:")
        out.extend(_listed(overall.reasons, MAX_LIST_ITEMS, 600))
        out.append("")
    accepted = accepted_lines(result)
    if accepted:
        out.append(ACCEPTED_TITLE)
        out.extend(_listed(accepted, MAX_LIST_ITEMS, 600))
        out.append("")
    out.extend(_undelivered_block(result))
    phases_ran = ", ".join(text(p) for p in overall.phases_ran) or "none"
    facts = [
        f"phases: {phases_ran}",
        f"{result.invocations:,} invocations",
        _duration(result.duration_s),
        f"seed {result.seed}",
        f"config {text(result.config_path, 200)} (sha256 {text(result.config_digest[:12])})",
        f"flakestorm {text(result.flakestorm_version, 40)}",
    ]
    out.append(" · ".join(facts))
    out.append("")
    out.extend(f"{text(line, 400)}  " for line in judge_lines(result))
    if result.judges:
        out.append("")
    notes = []
    if not result.complete:
        why = result.stop_reason or "unknown reason"
        notes.append(f"The run stopped early ({why}): the results are partial.")
    notes.extend(all_warnings(result))
    if notes:
        out.append("> [!WARNING]")
        out.extend(f"> {line}" for line in _listed(notes, MAX_LIST_ITEMS, 600))
        out.append("")
    if withheld:
        out += ["> [!NOTE]", f"> {PUBLIC_NOTE}", ""]
    return out


def _counts(contract: PhaseOutcome) -> str:
    counts = contract.score.counts
    parts = [f"{counts.get(s.value, 0)} {s.value.replace('_', ' ')}" for s in Status]
    parts.append(f"{counts.get('flaky', 0)} flaky")
    return ", ".join(parts)


def _scenario_name(info: ScenarioInfo, limit: int = 60) -> str:
    return text(info.name, limit) + (" 🚫" if info.undelivered else "")


def _matrix(contract: PhaseOutcome) -> tuple[list[str], list[str]]:
    """The matrix header lines and its rows (one string per invariant)."""
    head = [
        f"### {label_text(contract, 100, title=True)}: "
        f"{score_text(contract.score.score)} ({phase_state(contract)})",
        "",
        _counts(contract),
        "",
    ]
    names = [s.name for s in contract.scenarios]
    head.append(
        f"| {text(contract.rows, 40)} | severity | "
        + " | ".join(_scenario_name(s) for s in contract.scenarios)
        + " |"
    )
    head.append("|---|---|" + ":-:|" * len(names))
    # each cell's mark, from the phase's tally: the cells are not read for it
    by_key = {(c.invariant_id, c.scenario): cell_mark(c) for c in cell_marks(contract)}
    rows = []
    for invariant in contract.invariants:
        marks = [by_key.get((invariant.id, name), " ") for name in names]
        rows.append(
            f"| {text(invariant.id, 100)} | {text(invariant.severity)} | "
            + " | ".join(marks)
            + " |"
        )
    return head, rows


def _legend(contract: PhaseOutcome) -> str:
    if any(s.undelivered for s in contract.scenarios):
        return f"{LEGEND} · {UNDELIVERED_LEGEND}"
    return LEGEND


def _scenarios(contract: PhaseOutcome) -> tuple[str, list[str], str]:
    """The scenarios table: its opening, one row per scenario, its closing.

    The notes column (faults not delivered, cells run one at a time) is there only when some
    scenario has a note.
    """
    notes = {
        info.name: [text(note, 600) for note in scenario_notes(info)] for info in contract.scenarios
    }
    with_notes = any(notes.values())
    n = len(contract.scenarios)
    columns = (
        "| scenario | faults declared | notes |\n|---|---|---|\n"
        if with_notes
        else ("| scenario | faults declared |\n|---|---|\n")
    )
    top = f"<details>\n<summary>Scenarios ({n}) and their declared faults</summary>\n\n{columns}"
    rows = []
    for info in contract.scenarios:
        faults = [text(f, 120) for f in info.faults[:MAX_FAULTS_PER_SCENARIO]]
        if len(info.faults) > MAX_FAULTS_PER_SCENARIO:
            faults.append(f"… and {len(info.faults) - MAX_FAULTS_PER_SCENARIO} more")
        row = f"| {_scenario_name(info, 100)} | {'<br>'.join(faults) or 'none'} |"
        if with_notes:
            mark = "🚫 " if info.undelivered else ""
            row += f" {mark}{'<br>'.join(notes[info.name])} |"
        rows.append(row)
    return top, rows, "\n</details>\n\n"


def _invocation(prompt: PromptResult, number: int) -> list[str]:
    out = [f"**Prompt {number}** (run {prompt.run + 1}): {text(prompt.reason, 300)}", ""]
    out.append(code_block(prompt.prompt))
    if prompt.sent != prompt.prompt:
        out += ["", "Sent to the agent (after context attacks):", "", code_block(prompt.sent)]
    out.append("")
    if prompt.output is None:
        error = prompt.error or "error"
        out.append(f"No reply: {text(error)}: {text(prompt.error_message, 300)}")
    else:
        size = len(prompt.output)
        shown = f"first {EXCERPT_CHARS:,} of {size:,} characters" if size > EXCERPT_CHARS else ""
        out.append(f"Reply{f' ({shown})' if shown else ''}:")
        out.append("")
        out.append(code_block(prompt.output))
    if prompt.console:
        out += ["", "What the agent printed and logged (its last lines; all in agent.log):", ""]
        out.append(code_block(prompt.console))
    out.append("")
    return out


def _transcript(cell: CellResult) -> list[str]:
    """A failed cell's conversations turn by turn: a table per conversation, a row per turn."""
    out: list[str] = []
    head = "| turn | verdict | sent | reply | calls | faults fired |\n|---|---|---|---|---|---|"
    for title, turns in itertools.groupby(rows(cell, text), key=lambda row: row.conversation):
        out += [f"- **{title}**", "", head]
        out += [
            f"| {r.turn} | {r.verdict} | {r.sent} | {r.reply} | {r.calls} | {r.fired} |"
            for r in turns
        ]
        out.append("")
    return out


def _calls(cell: CellResult, scenario: ScenarioInfo | None) -> list[str]:
    """The calls the agent made in ``cell``: a compact table of the first few."""
    if not cell.calls:
        return ["- **Calls through flakestorm:** none", ""] if no_calls(cell, scenario) else [""]
    return _call_table(cell.calls, "- **Calls through flakestorm:**")


def _call_table(calls: Sequence[CallRecord], heading: str) -> list[str]:
    """``heading`` with how many ``calls`` there are, and a table of the first few."""
    n = len(calls)
    shown = f"{n}, the first {MAX_CALLS_PER_CELL} below" if n > MAX_CALLS_PER_CELL else str(n)
    out = [
        f"{heading} {shown}",
        "",
        "| # | call | status | faults fired | ms |",
        "|--:|---|---|---|--:|",
    ]
    for number, call in enumerate(calls[:MAX_CALLS_PER_CELL], 1):
        status = call_status(call)
        if call.upstream_error:
            status += f" · upstream error: {text(call.upstream_error, 200)}"
        fired = ", ".join(text(f, 120) for f in call.fired) or "–"
        out.append(
            f"| {number} | {text(call_target(call), 80)} {text(call.method, 16)} "
            f"{url_span(call.url)} | {status} | {fired} | {call.latency_ms:.0f} |"
        )
    out.append("")
    return out


def _unattributed(outcome: PhaseOutcome) -> str:
    """A ``<details>`` block per scenario with calls not attributed to a cell: the first."""
    out = []
    for info in unattributed(outcome):
        title = html_text(unattributed_heading(outcome, info), 300)
        out += ["<details>", f"<summary>{title}</summary>", ""]
        out += _call_table(info.unattributed_calls, "- **Calls kept:**")
        out += ["</details>", ""]
    return "\n".join(out) + ("\n" if out else "")


def cell_details(cell: CellResult, scenario: ScenarioInfo | None = None) -> str:
    """One failed or errored cell as a ``<details>`` block (``scenario``: the cell's)."""
    summary = (
        f"{cell_mark(cell)} {html_text(cell.id, 200)} · {html_text(cell.severity)} · "
        f"{html_text(cell.reason, 300)}"
    )
    out = ["<details>", f"<summary>{summary}</summary>", ""]
    out.append(f"- **Status:** {cell.status.value}")
    if cell.runs_total > 1:
        out.append(f"- **Runs passed:** {cell.runs_passed} of {cell.runs_total}")
    out.append(f"- **Reason:** {text(cell.reason, 1000)}")
    out.append(f"- **Faults fired:** {faults_text(cell, scenario)}")
    out.extend(f"- {text(note, 600)}" for note in cell.notes)
    spent, streamed, failed = cell_spend(cell.spend), cell_stream(cell), failed_stream(cell)
    out.extend([f"- **Spent:** {text(spent)}"] if spent else [])
    out.extend([f"- **Stream:** {text(streamed)}"] if streamed else [])
    out.extend(markdown_timeline(failed) if failed else [])
    out.extend(_calls(cell, scenario))
    out.extend(_transcript(cell))
    failing = [p for p in cell.prompts if not p.passed]
    for number, prompt in enumerate(failing[:MAX_PROMPTS_PER_CELL], 1):
        out.extend(_invocation(prompt, number))
    if len(failing) > MAX_PROMPTS_PER_CELL:
        rest = len(failing) - MAX_PROMPTS_PER_CELL
        out.append(f"… and {rest} more failing invocation{'s' if rest != 1 else ''}.")
        out.append("")
    out.append("</details>")
    return "\n".join(out) + "\n"


def _fit(parts: Sequence[str], budget: int) -> tuple[list[str], int, int]:
    """The leading ``parts`` that fit in ``budget`` bytes: (kept, bytes used, dropped). Only
    those are made, when ``parts`` are made as they are used."""
    kept: list[str] = []
    used = 0
    for part in parts:
        size = len(part.encode("utf-8")) + 1
        if used + size > budget:
            break
        kept.append(part)
        used += size
    return kept, used, len(parts) - len(kept)


def _size(value: str) -> int:
    return len(value.encode("utf-8"))


_NOTE_RESERVE = 2048
_FULL_REPORT = "the full report is `report.html` and `results.json` in the report directory"


def _omitted(dropped: int, total: int, what: str) -> str:
    return (
        f"\n_{dropped} of {total} {what} omitted to stay under GitHub's 1 MiB summary limit: "
        f"{_FULL_REPORT}._\n"
    )


@dataclass
class _Section:
    """One phase's part of the summary, cut to the budget piece by piece."""

    outcome: PhaseOutcome
    top: str
    rows: list[str]
    legend: str
    scenarios_top: str
    scenarios: list[str]
    scenarios_end: str
    bad: Sequence[str]
    """A ``<details>`` block per failed or errored unit (cell or mutation), a mutation's made
    as it is used."""
    what: str = "cells"
    kept_rows: int = 0
    kept_scenarios: int = 0
    details: tuple[str, ...] = ()

    def fixed_size(self) -> int:
        return _size(self.top) + _size(self.legend)

    def render(self) -> str:
        out = [self.top, "".join(row + "\n" for row in self.rows[: self.kept_rows])]
        if self.kept_rows < len(self.rows):
            out.append(_omitted(len(self.rows) - self.kept_rows, len(self.rows), "matrix rows"))
        out.append(self.legend)
        if self.kept_scenarios:
            out.append(self.scenarios_top)
            out.append("".join(row + "\n" for row in self.scenarios[: self.kept_scenarios]))
            if self.kept_scenarios < len(self.scenarios):
                rest = len(self.scenarios) - self.kept_scenarios
                out.append(f"\n_… and {rest} more scenarios: {_FULL_REPORT}._\n")
            out.append(self.scenarios_end)
        if self.bad:
            out.append(f"#### Failed and errored {self.what} ({len(self.bad)})\n\n")
            out.append("\n".join(self.details))
            if len(self.details) < len(self.bad):
                dropped = len(self.bad) - len(self.details)
                out.append(_omitted(dropped, len(self.bad), f"failed or errored {self.what}"))
        return "".join(out)


def _section(outcome: PhaseOutcome) -> _Section:
    if outcome.mutations and not outcome.cells:
        return _mutation_section(outcome)
    head, rows = _matrix(outcome)
    scenarios_top, scenarios, scenarios_end = _scenarios(outcome)
    by_name = {s.name: s for s in outcome.scenarios}
    spending = "".join(line + "\n" for line in markdown_lines(outcome, text))
    return _Section(
        outcome=outcome,
        top="\n".join(head) + "\n",
        rows=rows,
        legend=f"\n{_legend(outcome)}\n\n{spending}{_sweeps(outcome)}{_unattributed(outcome)}",
        scenarios_top=scenarios_top,
        scenarios=scenarios,
        scenarios_end=scenarios_end,
        bad=Mapped(bad_cells(outcome), lambda c: cell_details(c, by_name.get(c.scenario))),
    )


SWEEP_ROWS = 30
"""The most invariants a sweep's table lists (broken ones first)."""


def _sweeps(outcome: PhaseOutcome) -> str:
    """Each sweep: the verdict of every invariant at each value, and its breaking point."""
    out = []
    for sweep in outcome.sweeps:
        values = [text(v, 20) for v in sweep.values]
        out.append(f"#### Sweep {text(breaking.title(sweep), 200)}\n")
        out.append("| invariant | " + " | ".join(values) + " | breaking point |")
        out.append("|---|" + ":-:|" * len(values) + "---|")
        listed = sorted(breaking.rows(sweep), key=lambda r: r[2].startswith(("holds", "no ")))
        for invariant, marks, point in listed[:SWEEP_ROWS]:
            out.append(f"| {text(invariant, 80)} | " + " | ".join(marks) + f" | {text(point)} |")
        if len(listed) > SWEEP_ROWS:
            out.append(f"\n_… and {len(listed) - SWEEP_ROWS} more invariants: {_FULL_REPORT}._")
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def _mutation_section(outcome: PhaseOutcome) -> _Section:
    """A mutation phase: the per-type table (its rows are cut like matrix rows) and a
    ``<details>`` block per failed or errored mutation."""
    head = [
        f"### {label_text(outcome, 100, title=True)}: "
        f"{score_text(outcome.score.score)} ({phase_state(outcome)})",
        "",
        "| type | weight | total | passed | pass rate |",
        "|---|--:|--:|--:|--:|",
    ]
    rows = [
        f"| {text(r.type, 60)} | {r.weight:g} | {r.total} | {r.passed} | {r.rate} |"
        for r in mutation_types(outcome)
    ]
    return _Section(
        outcome=outcome,
        top="\n".join(head) + "\n",
        rows=rows,
        legend=f"\n{mutation_legend(outcome)}\n\n{_unattributed(outcome)}",
        scenarios_top="",
        scenarios=[],
        scenarios_end="",
        bad=Mapped(failed_mutations(outcome), mutation_details),
        what="mutations",
    )


def mutation_details(mutation: MutationResult) -> str:
    """One failed or errored mutation as a ``<details>`` block."""
    summary = (
        f"{mutation_mark(mutation)} {html_text(mutation.id, 120)} · "
        f"{html_text(mutation.transform, 60)} · {html_text(mutation.reason, 300)}"
    )
    out = ["<details>", f"<summary>{summary}</summary>", ""]
    out.append(f"- **Status:** {mutation.status.value}")
    out.append(
        f"- **Type:** {text(mutation.type)} (weight {mutation.weight:g}), transform "
        f"{text(mutation.transform, 80)} ({text(mutation.generator)})"
    )
    failed = ", ".join(text(i, 100) for i in mutation.failed_invariants) or "none"
    out.append(f"- **Failed invariants:** {failed}")
    if mutation.runs_total > 1:
        out.append(f"- **Runs passed:** {mutation.runs_passed} of {mutation.runs_total}")
    out.append(f"- **Reason:** {text(mutation.reason, 1000)}")
    out += ["", "Original:", "", code_block(mutation.original), ""]
    if mutation.changes:
        out.append("Request changes:")
        out.append("")
        out.extend(f"- {text(change, 300)}" for change in mutation.changes)
    else:
        out += ["Sent to the agent:", "", code_block(mutation.sent)]
    out.append("")
    if mutation.output is None:
        status = f" (HTTP {mutation.http_status})" if mutation.http_status is not None else ""
        out.append(f"No reply{status}: {text(mutation.error or 'error')}")
    else:
        out += ["Reply:", "", code_block(mutation.output)]
    out.append("")
    if mutation.calls:
        out += _call_table(mutation.calls, "- **Calls through flakestorm:**")
    out.append("</details>")
    return "\n".join(out) + "\n"


def render_error(cause: str, message: str) -> str:
    """The job summary of a run that raised an exit-3 error before it had a result (the agent
    never became ready, the proxy is unreachable): the ERROR verdict and what went wrong."""
    return (
        "## flakestorm: 💥 ERROR\n\n"
        f"**Exit 3: {text(cause, 200)}.** The run stopped before it had a result to report.\n\n"
        f"{code_block(message, 4000)}\n"
    )


def render(
    result: RunResult,
    limit_bytes: int = SUMMARY_LIMIT_BYTES,
    *,
    redact: bool = True,
    shown: RunVerdict | None = None,
) -> str:
    """The job summary, always shorter than ``limit_bytes`` bytes of UTF-8.

    ``redact`` (the default; off for a private repository): quote the agent's replies
    public-safe (:mod:`flakestorm.reporters.public`: leaks cut, PII masked), and say so.
    ``shown``: the step's verdict (:func:`flakestorm.reporters.view.step_verdict`, under
    ``fail-on: regression``), default the one ``result`` carries (:attr:`RunResult.step`,
    the action's) or the run's own. A result the step compared with a baseline leads with the
    delta (:func:`flakestorm.reporters.delta.lead`).

    The budget goes, in this order, to the head and every phase's heading and legend, to the
    matrix rows, to the scenarios tables, then to the cell details.
    """
    withheld = False
    lead = delta_report.lead(result)
    if redact:
        safe = public(result)
        result, withheld = safe.result, safe.changed
    budget = limit_bytes - _NOTE_RESERVE
    head = "\n".join(_head(result, shown or run_verdict(result), withheld)) + "\n"
    if lead:
        head = f"{lead}\n{head}"
    budget -= _size(head)
    sections = [_section(outcome) for outcome in phases(result)]
    if not sections:
        return head + "No phase ran.\n"
    for section in sections:
        budget -= section.fixed_size()
    for section in sections:
        kept, used, _ = _fit(section.rows, budget)
        section.kept_rows = len(kept)
        budget -= used
    for section in sections:
        fixed = _size(section.scenarios_top) + _size(section.scenarios_end)
        if fixed > budget:
            continue
        kept, used, _ = _fit(section.scenarios, budget - fixed)
        if kept:
            section.kept_scenarios = len(kept)
            budget -= used + fixed
    for section in sections:
        if section.bad:
            budget -= 64  # the heading
        kept, used, _ = _fit(section.bad, budget)
        section.details = tuple(kept)
        budget -= used
    return head + "\n".join(section.render() for section in sections)
