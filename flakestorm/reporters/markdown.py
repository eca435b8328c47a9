"""The GitHub job summary (GitHub-flavoured markdown), and the text pieces other reporters share.

Layout: the verdict and scores first, then the matrix (rows = invariants with their severity,
columns = scenarios) with a legend, then every failed or errored cell in a ``<details>`` block
with its failing prompts, an excerpt of each reply, the reason and the faults that fired.

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

Size
----
GitHub drops a step summary over 1 MiB. :func:`render` keeps the document under
``limit_bytes`` (UTF-8): cell details are dropped from the end first, then matrix rows, and a
note says how many were left out and where the full report is (``report.html``,
``results.json``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from flakestorm.results import CellResult, ContractOutcome, PromptResult, RunResult, Status

SUMMARY_LIMIT_BYTES = 1_048_576
"""GitHub's limit for one step summary; :func:`render` stays strictly below it."""
EXCERPT_CHARS = 500
"""How much of a reply (or prompt) the summary quotes."""
MAX_PROMPTS_PER_CELL = 3
"""Failing invocations quoted per cell; the rest are counted."""
MAX_LIST_ITEMS = 50
"""Warnings or gate reasons listed; the rest are counted."""

LEGEND = (
    "✅ passed · ❌ failed · ⚠️ flaky (repeats disagreed; ❌⚠️ = flaky and failed) · "
    "💥 errored (flakestorm could not carry the cell out) · ➖ skipped (`when` does not apply) · "
    "⏸ not run (the run stopped first)"
)

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


def faults_text(cell: CellResult) -> str:
    return ", ".join(text(f, 120) for f in cell.faults_fired) if cell.faults_fired else "none"


def _listed(items: Sequence[str], limit: int, width: int) -> list[str]:
    lines = [f"- {text(item, width)}" for item in items[:limit]]
    if len(items) > limit:
        lines.append(f"- … and {len(items) - limit} more")
    return lines


def all_warnings(result: RunResult) -> list[str]:
    warnings = list(result.warnings)
    if result.contract is not None:
        warnings.extend(result.contract.warnings)
    return warnings


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


# --------------------------------------------------------------------------- the summary


def _head(result: RunResult) -> list[str]:
    overall = result.overall
    out = [f"## flakestorm: {verdict(result)}", ""]
    scores = [f"**Overall score: {score_text(overall.score)}**"]
    if overall.min_score:
        scores.append(f"min\\_score {overall.min_score:g}")
    contract = result.contract
    if contract is not None:
        state = "passed" if contract.score.passed else "failed"
        scores.append(
            f"contract {text(contract.name, 100)}: {score_text(contract.score.score)} ({state})"
        )
    out.append(" · ".join(scores))
    out.append("")
    if overall.reasons:
        out.append("The gate failed:")
        out.extend(_listed(overall.reasons, MAX_LIST_ITEMS, 600))
        out.append("")
    phases = ", ".join(text(p) for p in overall.phases_ran) or "none"
    facts = [
        f"phases: {phases}",
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


def _matrix(contract: ContractOutcome) -> tuple[list[str], list[str]]:
    """The matrix header lines and its rows (one string per invariant)."""
    state = "passed" if contract.score.passed else "failed"
    head = [
        f"### Contract {text(contract.name, 100)}: {score_text(contract.score.score)} ({state})",
        "",
        _counts(contract),
        "",
    ]
    names = [s.name for s in contract.scenarios]
    head.append("| invariant | severity | " + " | ".join(text(n, 60) for n in names) + " |")
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


def cell_details(cell: CellResult) -> str:
    """One failed or errored cell as a ``<details>`` block."""
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
    out.append("")
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


_NOTE_RESERVE = 1024
_FULL_REPORT = "the full report is `report.html` and `results.json` in the report directory"


def render(result: RunResult, limit_bytes: int = SUMMARY_LIMIT_BYTES) -> str:
    """The job summary, always shorter than ``limit_bytes`` bytes of UTF-8."""
    budget = limit_bytes - _NOTE_RESERVE
    head = "\n".join(_head(result)) + "\n"
    budget -= len(head.encode("utf-8"))
    out = [head]
    contract = result.contract
    if contract is None:
        out.append("No contract ran.\n")
        return "".join(out)

    matrix_head, rows = _matrix(contract)
    matrix_top = "\n".join(matrix_head) + "\n"
    budget -= len(matrix_top.encode("utf-8"))
    kept_rows, used, dropped_rows = _fit(rows, budget)
    budget -= used
    out.append(matrix_top)
    out.append("".join(row + "\n" for row in kept_rows))
    if dropped_rows:
        out.append(
            f"\n_{dropped_rows} of {len(rows)} matrix rows omitted to stay under GitHub's "
            f"1 MiB summary limit: {_FULL_REPORT}._\n"
        )
    out.append(f"\n{LEGEND}\n\n")

    bad = bad_cells(contract)
    if bad:
        out.append(f"### Failed and errored cells ({len(bad)})\n\n")
        details, _, dropped = _fit((cell_details(c) for c in bad), budget)
        out.append("\n".join(details))
        if dropped:
            out.append(
                f"\n_{dropped} of {len(bad)} failed or errored cells omitted to stay under "
                f"GitHub's 1 MiB summary limit: {_FULL_REPORT}._\n"
            )
    return "".join(out)
