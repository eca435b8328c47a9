"""The GitHub job summary (GitHub-flavoured markdown), and the text pieces other reporters share.

Layout: the verdict and the scores of every phase first, then — prominently — the faults that
were not delivered (SPEC §4), then one section per phase that ran (the contract, then the
chaos-only phase): its matrix (rows = invariants with their severity, columns = scenarios, a 🚫
on a scenario whose faults were not delivered) with a legend, a collapsed table of the
scenarios with their declared faults, and every failed or errored cell in a ``<details>``
block with its failing prompts, an excerpt of each reply, the reason, the faults that fired and
the first tool and LLM calls the agent made.

Untrusted text
--------------
Agent output is untrusted, and so is every string the config supplies (ids, scenario names,
prompts, and the reasons and warnings that quote them). GitHub renders a summary as markdown
*and* HTML, then turns ``@name`` into mentions and ``#123`` into issue links in the rendered
text. So no such string is ever emitted as it is; each goes through exactly one of:

- :func:`clean` — the text itself, for every format: ``\\r\\n``/``\\r`` become ``\\n``; control
  characters (C0 but tab and newline, DEL, C1), lone surrogates and U+FFFE/U+FFFF become U+FFFD
  (so the result is valid XML 1.0 and encodable as UTF-8); bidirectional controls (RTL override
  and friends) become a visible ``⟨U+202E⟩`` so they cannot reorder what a reader sees; ``::`` gets
  a zero-width space between the colons so no line of it can be read as a workflow command.
- :func:`text` — one line of inline markdown: :func:`clean`, newlines to spaces, ``& < > "``
  as HTML entities, markdown punctuation (`` \\ ` * _ [ ] | ~ $ ``) backslash-escaped, and a
  zero-width joiner after ``@`` and ``#`` when a word or digit follows, which breaks mentions and
  issue references. Safe in paragraphs, list items and table cells.
- :func:`html_text` — one line inside raw HTML (``<summary>``): :func:`clean`, newlines to
  spaces, HTML entities, the same mention/reference breaking (markdown is not parsed there).
- :func:`code_block` — a fenced code block longer than any run of backticks in the text, so
  nothing inside can close it; markdown and HTML are inert inside.
- :func:`url_span` — a URL the agent called, as an inline code span (not a clickable autolink):
  :func:`clean`, then whitespace and ``" < > \\ ^ ` { | }`` percent-encoded, so neither the span
  nor a table cell can be closed from inside.

Size
----
GitHub drops a step summary over 1 MiB. :func:`render` keeps the document under
``limit_bytes`` (UTF-8): cell details are dropped from the end first, then scenario table
rows, then matrix rows, and a note says how many were left out and where the full report is
(``report.html``, ``results.json``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from flakestorm.results import (
    CallRecord,
    CellResult,
    ContractOutcome,
    PromptResult,
    RunResult,
    ScenarioInfo,
    Status,
)

SUMMARY_LIMIT_BYTES = 1_048_576
"""GitHub's limit for one step summary; :func:`render` stays strictly below it."""
EXCERPT_CHARS = 500
"""How much of a reply (or prompt) the summary quotes."""
MAX_PROMPTS_PER_CELL = 3
"""Failing invocations quoted per cell; the rest are counted."""
MAX_LIST_ITEMS = 50
"""Warnings, gate reasons or undelivered faults listed; the rest are counted."""
MAX_CALLS_PER_CELL = 10
"""Calls listed in a cell's details; the rest are counted (the HTML report has them all)."""
MAX_FAULTS_PER_SCENARIO = 10
"""Declared faults listed per scenario in the scenarios table."""

LEGEND = (
    "✅ passed · ❌ failed · ⚠️ flaky (repeats disagreed; ❌⚠️ = flaky and failed) · "
    "💥 errored (flakestorm could not carry the cell out) · ➖ skipped (`when` does not apply) · "
    "⏸ not run (the run stopped first)"
)
UNDELIVERED_LEGEND = (
    "🚫 next to a scenario: a declared fault was not delivered (no matching call reached "
    "flakestorm), so its cells are errored"
)
"""Added to the legend of a matrix with an undelivered scenario."""
NOT_DELIVERED = "fault not delivered: "
"""How the reason of a cell in an undelivered scenario starts (``flakestorm.chaos.delivery``)."""

# --------------------------------------------------------------------------- untrusted text

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff" + _BIDI + "]")
_NEWLINES = re.compile(r"\r\n?")
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]|~$])")
_REFERENCE = re.compile(r"([@#])(?=\w)")
_ZWJ = "\u200d"


def _replace_unsafe(match: re.Match[str]) -> str:
    char = match.group()
    return f"⟨U+{ord(char):04X}⟩" if char in _BIDI else "\ufffd"


def clean(value: str) -> str:
    """``value`` made safe to show in any report format (see the module docstring)."""
    value = _NEWLINES.sub("\n", value)
    value = _UNSAFE.sub(_replace_unsafe, value)
    return value.replace("::", ":\u200b:") if "::" in value else value


def excerpt(value: str, limit: int) -> str:
    """:func:`clean` ``value``, cut to ``limit`` characters with a note of how much was cut."""
    if len(value) > limit:
        return f"{clean(value[:limit])}… ({len(value) - limit:,} more characters)"
    return clean(value)


def _html_escape(value: str) -> str:
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace('"', "&quot;")


def _one_line(value: str) -> str:
    return clean(value).replace("\n", " ").replace("\t", " ")


def text(value: str, limit: int | None = None) -> str:
    """``value`` as one line of inline markdown that renders as exactly that text."""
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    value = _html_escape(_one_line(value))
    value = _MD_PUNCTUATION.sub(r"\\\1", value)
    return _REFERENCE.sub(r"\1" + _ZWJ, value)


def html_text(value: str, limit: int | None = None) -> str:
    """``value`` as one line of text inside raw HTML in a markdown document."""
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    return _REFERENCE.sub(r"\1" + _ZWJ, _html_escape(_one_line(value)))


def code_block(value: str, limit: int = EXCERPT_CHARS) -> str:
    """An excerpt of ``value`` in a fenced code block that nothing inside can close."""
    body = excerpt(value, limit)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


_URL_UNSAFE = re.compile(r'[\s"<>\\^`{|}]')


def url_span(value: str, limit: int = 200) -> str:
    """``value`` (a URL) as an inline code span, safe in a table cell.

    Whitespace and the characters a URL may not contain unencoded (``" < > \\ ^ ` { | }``) are
    percent-encoded, as a browser's address bar shows them: nothing can end the span or the
    table cell, and no markup appears even in the markdown source.
    """
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    value = _URL_UNSAFE.sub(lambda m: quote(m.group(), safe=""), clean(value))
    return f"`{value}`" if value else "(none)"


# --------------------------------------------------------------------------- shared pieces


def score_text(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def verdict(result: RunResult) -> str:
    """``✅ PASS`` or ``❌ FAIL``."""
    return "✅ PASS" if result.overall.passed else "❌ FAIL"


def cell_mark(cell: CellResult) -> str:
    """The matrix symbol of a cell (a flaky failure shows both marks)."""
    if cell.flaky and cell.status is not Status.PASSED:
        return cell.status.symbol + cell.symbol
    return cell.symbol


def bad_cells(contract: ContractOutcome | None) -> list[CellResult]:
    """Failed and errored cells, critical first, then in matrix order."""
    if contract is None:
        return []
    bad = [c for c in contract.cells if c.status in (Status.FAILED, Status.ERRORED)]
    return sorted(bad, key=lambda c: (c.severity != "critical", c.index))


def phases(result: RunResult) -> list[tuple[str, ContractOutcome]]:
    """``(phase, outcome)`` of every contract-shaped phase that ran, in report order."""
    out = []
    if result.contract is not None:
        out.append(("contract", result.contract))
    if result.chaos is not None:
        out.append(("chaos", result.chaos))
    return out


def all_bad_cells(result: RunResult) -> list[tuple[str, CellResult]]:
    """``(phase, cell)`` of every failed or errored cell: critical first, then phase order."""
    bad = [(phase, c) for phase, outcome in phases(result) for c in bad_cells(outcome)]
    return sorted(bad, key=lambda pc: pc[1].severity != "critical")


def phase_state(phase: str, outcome: ContractOutcome) -> str:
    """What a phase's score means: ``passed``/``failed``, or the chaos phase's prompt count."""
    if phase != "chaos":
        return "passed" if outcome.score.passed else "failed"
    counts = outcome.score.counts
    state = f"{counts.get('prompts_passed', 0)} of {counts.get('prompts', 0)} prompts passed"
    return state if outcome.score.passed else f"{state}; a critical cell failed"


@dataclass(frozen=True)
class Undelivered:
    """One declared fault no matching call reached (SPEC §4), with the wiring hint."""

    phase: str
    phase_name: str
    """The contract's name, or ``chaos``."""
    scenario: str
    fault: str
    hint: str
    """What is probably mis-wired (from the cell reason), or empty."""


def _hint(reason: str, fault: str) -> str:
    marker = f"{NOT_DELIVERED}{fault}: "
    start = reason.find(marker)
    if start < 0:
        return ""
    start += len(marker)
    end = reason.find(f"; {NOT_DELIVERED}", start)
    return reason[start:] if end < 0 else reason[start:end]


def undelivered(result: RunResult) -> list[Undelivered]:
    """Every fault that was not delivered, phase by phase, scenario by scenario."""
    out = []
    for phase, outcome in phases(result):
        for info in outcome.scenarios:
            if not info.undelivered:
                continue
            reasons = [
                c.reason
                for c in outcome.cells
                if c.scenario == info.name and c.reason.startswith(NOT_DELIVERED)
            ]
            for fault in info.undelivered:
                hint = next((h for h in (_hint(r, fault) for r in reasons) if h), "")
                out.append(Undelivered(phase, outcome.name, info.name, fault, hint))
    return out


def no_calls(cell: CellResult, scenario: ScenarioInfo | None) -> bool:
    """Whether to say that no call reached flakestorm: the agent was invoked under declared
    faults, and no call and no fault was recorded."""
    return bool(
        scenario is not None
        and scenario.faults
        and cell.prompts
        and not cell.calls
        and not cell.faults_fired
    )


def call_target(call: CallRecord) -> str:
    """``tool orders_api``, ``llm``: what a call was to (untrusted: escape it)."""
    return call.target if call.tool is None else f"{call.target} {call.tool}"


def call_status(call: CallRecord) -> str:
    """What the agent received: an HTTP status, or ``no reply`` (trusted text)."""
    return "no reply" if call.status is None else str(call.status)


def scenario_notes(info: ScenarioInfo) -> list[str]:
    """Notes on how a scenario ran (they quote fault labels: escape each note)."""
    notes = []
    if info.undelivered:
        notes.append("not delivered: " + "; ".join(info.undelivered))
    if info.serial:
        notes.append(
            "cells ran one at a time (the agent does not forward the X-Flakestorm-Cell header)"
        )
    return notes


def faults_text(cell: CellResult) -> str:
    return ", ".join(text(f, 120) for f in cell.faults_fired) if cell.faults_fired else "none"


def _listed(items: Sequence[str], limit: int, width: int) -> list[str]:
    lines = [f"- {text(item, width)}" for item in items[:limit]]
    if len(items) > limit:
        lines.append(f"- … and {len(items) - limit} more")
    return lines


def all_warnings(result: RunResult) -> list[str]:
    """Config warnings, then each phase's run warnings (each once)."""
    warnings = list(result.warnings)
    for _, outcome in phases(result):
        warnings.extend(outcome.warnings)
    return list(dict.fromkeys(warnings))


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


# --------------------------------------------------------------------------- the summary


def _phase_title(phase: str, name: str) -> str:
    return f"contract {text(name, 100)}" if phase == "contract" else "chaos"


UNDELIVERED_TITLE = (
    "**🚫 Faults not delivered:** no matching call reached flakestorm, so these scenarios' "
    "cells are errored, not passed."
)


def undelivered_items(result: RunResult, limit: int, hint_chars: int = 400) -> list[str]:
    """The undelivered faults as markdown list items (``- where: fault — hint``), at most
    ``limit`` of them and a count of the rest."""
    faults = undelivered(result)
    out = []
    for fault in faults[:limit]:
        where = (
            f"contract {text(fault.phase_name, 100)}, scenario **{text(fault.scenario, 100)}**"
            if fault.phase == "contract"
            else "the chaos phase"
        )
        line = f"- {where}: {text(fault.fault, 200)}"
        out.append(line + (f" — {text(fault.hint, hint_chars)}" if fault.hint else ""))
    if len(faults) > limit:
        out.append(f"- … and {len(faults) - limit} more")
    return out


def _undelivered_block(result: RunResult) -> list[str]:
    items = undelivered_items(result, MAX_LIST_ITEMS)
    if not items:
        return []
    return ["> [!WARNING]", f"> {UNDELIVERED_TITLE}", *(f"> {item}" for item in items), ""]


def _head(result: RunResult) -> list[str]:
    overall = result.overall
    out = [f"## flakestorm: {verdict(result)}", ""]
    scores = [f"**Overall score: {score_text(overall.score)}**"]
    if overall.min_score:
        scores.append(f"min\\_score {overall.min_score:g}")
    for phase, outcome in phases(result):
        scores.append(
            f"{_phase_title(phase, outcome.name)}: {score_text(outcome.score.score)} "
            f"({phase_state(phase, outcome)})"
        )
    out.append(" · ".join(scores))
    out.append("")
    if overall.reasons:
        out.append("The gate failed:")
        out.extend(_listed(overall.reasons, MAX_LIST_ITEMS, 600))
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
    notes = []
    if not result.complete:
        why = result.stop_reason or "unknown reason"
        notes.append(f"The run stopped early ({why}): the results are partial.")
    notes.extend(all_warnings(result))
    if notes:
        out.append("> [!WARNING]")
        out.extend(f"> {line}" for line in _listed(notes, MAX_LIST_ITEMS, 600))
        out.append("")
    return out


def _counts(contract: ContractOutcome) -> str:
    counts = contract.score.counts
    parts = [f"{counts.get(s.value, 0)} {s.value.replace('_', ' ')}" for s in Status]
    parts.append(f"{counts.get('flaky', 0)} flaky")
    return ", ".join(parts)


def _scenario_name(info: ScenarioInfo, limit: int = 60) -> str:
    return text(info.name, limit) + (" 🚫" if info.undelivered else "")


def _matrix(phase: str, contract: ContractOutcome) -> tuple[list[str], list[str]]:
    """The matrix header lines and its rows (one string per invariant)."""
    head = [
        f"### {'Contract ' + text(contract.name, 100) if phase == 'contract' else 'Chaos'}: "
        f"{score_text(contract.score.score)} ({phase_state(phase, contract)})",
        "",
        _counts(contract),
        "",
    ]
    names = [s.name for s in contract.scenarios]
    head.append(
        "| invariant | severity | "
        + " | ".join(_scenario_name(s) for s in contract.scenarios)
        + " |"
    )
    head.append("|---|---|" + ":-:|" * len(names))
    by_key = {(c.invariant_id, c.scenario): c for c in contract.cells}
    rows = []
    for invariant in contract.invariants:
        marks = []
        for name in names:
            cell = by_key.get((invariant.id, name))
            marks.append(cell_mark(cell) if cell is not None else " ")
        rows.append(
            f"| {text(invariant.id, 100)} | {text(invariant.severity)} | "
            + " | ".join(marks)
            + " |"
        )
    return head, rows


def _legend(contract: ContractOutcome) -> str:
    if any(s.undelivered for s in contract.scenarios):
        return f"{LEGEND} · {UNDELIVERED_LEGEND}"
    return LEGEND


def _scenarios(contract: ContractOutcome) -> tuple[str, list[str], str]:
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
    out.append("")
    return out


def _calls(cell: CellResult, scenario: ScenarioInfo | None) -> list[str]:
    """The calls the agent made in ``cell``: a compact table of the first few."""
    if not cell.calls:
        return ["- **Calls through flakestorm:** none", ""] if no_calls(cell, scenario) else [""]
    n = len(cell.calls)
    shown = f"{n}, the first {MAX_CALLS_PER_CELL} below" if n > MAX_CALLS_PER_CELL else str(n)
    out = [
        f"- **Calls through flakestorm:** {shown}",
        "",
        "| # | call | status | faults fired | ms |",
        "|--:|---|---|---|--:|",
    ]
    for number, call in enumerate(cell.calls[:MAX_CALLS_PER_CELL], 1):
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
    out.append(f"- **Faults fired:** {faults_text(cell)}")
    out.extend(_calls(cell, scenario))
    failing = [p for p in cell.prompts if not p.passed]
    for number, prompt in enumerate(failing[:MAX_PROMPTS_PER_CELL], 1):
        out.extend(_invocation(prompt, number))
    if len(failing) > MAX_PROMPTS_PER_CELL:
        rest = len(failing) - MAX_PROMPTS_PER_CELL
        out.append(f"… and {rest} more failing invocation{'s' if rest != 1 else ''}.")
        out.append("")
    out.append("</details>")
    return "\n".join(out) + "\n"


def _fit(parts: Iterable[str], budget: int) -> tuple[list[str], int, int]:
    """The leading ``parts`` that fit in ``budget`` bytes: (kept, bytes used, dropped)."""
    kept: list[str] = []
    used = 0
    items = list(parts)
    for part in items:
        size = len(part.encode("utf-8")) + 1
        if used + size > budget:
            break
        kept.append(part)
        used += size
    return kept, used, len(items) - len(kept)


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

    phase: str
    outcome: ContractOutcome
    top: str
    rows: list[str]
    legend: str
    scenarios_top: str
    scenarios: list[str]
    scenarios_end: str
    bad: list[CellResult]
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
            out.append(f"#### Failed and errored cells ({len(self.bad)})\n\n")
            out.append("\n".join(self.details))
            if len(self.details) < len(self.bad):
                dropped = len(self.bad) - len(self.details)
                out.append(_omitted(dropped, len(self.bad), "failed or errored cells"))
        return "".join(out)


def _section(phase: str, outcome: ContractOutcome) -> _Section:
    head, rows = _matrix(phase, outcome)
    scenarios_top, scenarios, scenarios_end = _scenarios(outcome)
    return _Section(
        phase=phase,
        outcome=outcome,
        top="\n".join(head) + "\n",
        rows=rows,
        legend=f"\n{_legend(outcome)}\n\n",
        scenarios_top=scenarios_top,
        scenarios=scenarios,
        scenarios_end=scenarios_end,
        bad=bad_cells(outcome),
    )


def render(result: RunResult, limit_bytes: int = SUMMARY_LIMIT_BYTES) -> str:
    """The job summary, always shorter than ``limit_bytes`` bytes of UTF-8.

    The budget goes, in this order, to the head and every phase's heading and legend, to the
    matrix rows, to the scenarios tables, then to the cell details.
    """
    budget = limit_bytes - _NOTE_RESERVE
    head = "\n".join(_head(result)) + "\n"
    budget -= _size(head)
    sections = [_section(phase, outcome) for phase, outcome in phases(result)]
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
        by_name = {s.name: s for s in section.outcome.scenarios}
        details = (cell_details(c, by_name.get(c.scenario)) for c in section.bad)
        kept, used, _ = _fit(details, budget)
        section.details = tuple(kept)
        budget -= used
    return head + "\n".join(section.render() for section in sections)
