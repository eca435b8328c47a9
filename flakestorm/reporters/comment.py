"""The sticky pull-request comment: score, delta against the previous run, verdict, failing cells.

Below the score line: each phase's score, why the gate failed, the faults that were not
delivered (SPEC §4: flagged, with the wiring hint), a mutation phase's per-type table (total,
passed, pass rate), then one table of the failing cells of every phase, critical first, and one
of the failed mutations (id, transform, original, what was sent or the request changes, a reply
excerpt, failed invariants, reason; all escaped).

One comment per pull request and config. Its body starts with two hidden lines::

    <!-- flakestorm:comment key=<marker_key> -->
    <!-- flakestorm:state {"score": 83.33, "run": "..."} -->

The first finds the comment again (``marker_key`` is :func:`marker_key` of the config path, so
two configs in one repository keep two comments); the second carries the score and run id the
next run compares against. :func:`parse_state` reads the state only from the second line of a
body that starts with the marker, and every other line of the body is escaped text (see
:mod:`flakestorm.reporters.markdown`), so agent output cannot forge either line.

A body is at most :data:`COMMENT_LIMIT_CHARS` characters (GitHub rejects longer ones): type
rows, failing cells, then failed mutations, are dropped from the end, with a note, to fit.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.reporters import breaking
from flakestorm.reporters import delta as delta_report
from flakestorm.reporters.escape import text
from flakestorm.reporters.mutation_view import (
    failed_mutations,
    mutation_input,
    mutation_mark,
    mutation_reply,
    mutation_types,
)
from flakestorm.reporters.public import NOTE as PUBLIC_NOTE
from flakestorm.reporters.public import public
from flakestorm.reporters.spend_view import COMMENT_SCENARIO_LINES, markdown_lines
from flakestorm.reporters.stream_view import cell_stream
from flakestorm.reporters.transcript import compact, transcript
from flakestorm.reporters.view import (
    ACCEPTED_TITLE,
    UNDELIVERED_TITLE,
    RunVerdict,
    accepted_lines,
    all_bad_cells,
    cell_mark,
    error_line,
    faults_text,
    judge_lines,
    label_text,
    phase_state,
    phases,
    run_verdict,
    scenarios_per_scenario,
    score_text,
    undelivered_items,
)
from flakestorm.results.model import CellResult, MutationResult, RunResult, ScenarioInfo
from flakestorm.results.spool import Joined, Mapped

COMMENT_LIMIT_CHARS = 65_536
"""GitHub's limit for an issue or pull-request comment body."""

_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_HEAD = re.compile(
    r"\A<!-- flakestorm:comment key=(?P<key>[A-Za-z0-9_.-]{1,64}) -->\r?\n"
    r"<!-- flakestorm:state (?P<state>\{[^\r\n]{0,1000}\}) -->\r?\n"
)
_NOTE_RESERVE = 600
MAX_UNDELIVERED = 10
"""Undelivered faults listed; the rest are counted."""


@dataclass(frozen=True)
class CommentState:
    """What a comment remembers of its run."""

    score: float | None
    run: str


MAX_SWEEPS = 10
"""Sweeps the comment names (each in one line)."""


def marker_key(config_path: str) -> str:
    """The comment key of a config: a short hash of its path (``./a.yaml`` == ``a.yaml``)."""
    path = config_path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return hashlib.sha256(path.encode("utf-8")).hexdigest()[:16]


def marker(key: str) -> str:
    """The first line of every comment for ``key``: how the sticky comment is found."""
    if not _KEY.fullmatch(key):
        raise ValueError(f"invalid comment marker key {key!r} (expected [A-Za-z0-9_.-]{{1,64}})")
    return f"<!-- flakestorm:comment key={key} -->"


def _json_string(value: str) -> str:
    # \u escapes keep "<", ">" and "&" (so "-->") out of the HTML comment.
    encoded = json.dumps(value, ensure_ascii=True)
    return encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def state_line(state: CommentState) -> str:
    score = "null" if state.score is None else json.dumps(round(float(state.score), 2))
    return f'<!-- flakestorm:state {{"score": {score}, "run": {_json_string(state.run)}}} -->'


def parse_state(body: str) -> CommentState | None:
    """The state stored in a comment body, or None when it is not a well-formed flakestorm one."""
    match = _HEAD.match(body)
    if match is None:
        return None
    try:
        data = json.loads(match.group("state"))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    score, run = data.get("score"), data.get("run")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
    ):
        return None
    if not isinstance(run, str):
        return None
    return CommentState(score=None if score is None else float(score), run=run)


def _delta(score: float | None, previous: CommentState | None) -> str:
    if previous is None:
        return "first run on this pull request"
    if score is None or previous.score is None:
        return f"previous run: {score_text(previous.score)}"
    change = round(score - previous.score, 2)
    if change == 0:
        return f"unchanged since the previous run ({score_text(previous.score)})"
    arrow = "▲" if change > 0 else "▼"
    return f"{arrow} {abs(change):.2f} from {score_text(previous.score)} in the previous run"


def _failing_row(cell: CellResult, scenario: ScenarioInfo | None = None) -> str:
    notes = "".join(f"<br>{text(note, 160)}" for note in cell.notes[:2])
    notes += "".join(f"<br>{text(compact(c), 240)}" for c in transcript(cell, 1))
    streamed = cell_stream(cell)
    notes += f"<br>stream: {text(streamed, 240)}" if streamed else ""
    return (
        f"| {cell_mark(cell)} | {text(cell.id, 120)} | {text(cell.severity)} | "
        f"{text(cell.reason, 200)}{notes} | {faults_text(cell, scenario)} |"
    )


def _mutation_row(mutation: MutationResult) -> str:
    failed = ", ".join(text(i, 60) for i in mutation.failed_invariants) or "–"
    return (
        f"| {mutation_mark(mutation)} | {text(mutation.id, 80)} | "
        f"{text(mutation.transform, 60)} | {text(mutation.original, 120)} | "
        f"{text(mutation_input(mutation), 200)} | {text(mutation_reply(mutation), 200)} | "
        f"{failed} | {text(mutation.reason, 200)} |"
    )


def _type_tables(result: RunResult, budget: int) -> tuple[str, int]:
    """The per-type table (total, passed, pass rate) of every mutation phase."""
    body = ""
    for outcome in phases(result):
        if not outcome.mutations:
            continue
        where = "" if outcome.name == outcome.phase else f" ({label_text(outcome, 100)})"
        head = [
            f"**Mutations by type{where}**",
            "",
            "| type | total | passed | pass rate |",
            "|---|--:|--:|--:|",
        ]
        rows = [
            f"| {text(r.type, 60)} | {r.total} | {r.passed} | {r.rate} |"
            for r in mutation_types(outcome)
        ]
        part, budget = _table(head, rows, budget, "mutation types")
        body += ("\n" if body else "") + part
    return body, budget


def _table(head: list[str], rows: Sequence[str], budget: int, what: str) -> tuple[str, int]:
    """``head`` and the leading ``rows`` that fit in ``budget`` characters, with a note of
    how many were left out; and the budget left. Only those are made, when ``rows`` are made
    as they are used."""
    budget -= sum(len(line) + 1 for line in head)
    kept: list[str] = []
    for row in rows:
        if len(row) + 1 > budget:
            break
        kept.append(row)
        budget -= len(row) + 1
    body = "\n".join(head + kept) + "\n"
    if len(kept) < len(rows):
        body += (
            f"\n… and {len(rows) - len(kept)} more {what}: see the full report "
            "(job summary, `report.html`, `results.json`).\n"
        )
        budget -= 200
    return body, budget


def render_first(result: RunResult) -> str:
    """The comment body for ``result`` as a first comment (no previous score to compare)."""
    return render(result, None, marker_key(result.config_path))


def render(
    result: RunResult,
    previous: CommentState | None,
    marker_key: str,
    *,
    run_id: str | None = None,
    summary_url: str | None = None,
    limit_chars: int = COMMENT_LIMIT_CHARS,
    redact: bool = True,
    shown: RunVerdict | None = None,
) -> str:
    """The comment body for ``result``; ``previous`` is the state parsed from the old body.

    ``run_id`` is stored in the state (default: the run's start time); ``summary_url``, when
    given (an ``https://`` URL), links the full job summary. The baseline delta the step
    compared ``result`` with (:func:`flakestorm.reporters.delta.lead`) comes first. ``redact`` (the
    default; off for a private repository): quote the agent's output public-safe
    (:mod:`flakestorm.reporters.public`: leaks cut, PII masked), and say so. ``shown``: the
    step's verdict (:func:`flakestorm.reporters.view.step_verdict`, under ``fail-on:
    regression``), default the one ``result`` carries (:attr:`RunResult.step`) or the run's
    own.
    """
    withheld = False
    lead = delta_report.lead(result, trend_rows=COMMENT_TREND_ROWS)
    if redact:
        safe = public(result)
        result, withheld = safe.result, safe.changed
    score = result.overall.score
    state = CommentState(score=score, run=run_id if run_id is not None else result.started_at)
    out = [marker(marker_key), state_line(state), ""]
    if lead:
        out += [lead.rstrip("\n"), ""]
    heading = (shown or run_verdict(result)).heading(lambda s: text(s, 200))
    out.append(f"### flakestorm: {heading} · score {score_text(score)} ({_delta(score, previous)})")
    out.append("")
    out += _facts(result)
    if withheld:
        out += [f"_{PUBLIC_NOTE}_", ""]

    link = ""
    if summary_url is not None and summary_url.startswith("https://"):
        safe_url = summary_url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        safe_url = safe_url.replace("<", "%3C").replace(">", "%3E").replace('"', "%22")
        link = f"[Full report (job summary)]({safe_url})"

    head = "\n".join(out) + "\n"
    budget = limit_chars - len(head) - len(link) - _NOTE_RESERVE
    body = head + _tables(result, budget)
    if link:
        body += f"\n{link}\n"
    return body


COMMENT_TREND_ROWS = 5
"""The trend's table in the comment: its last runs (the job summary has them all)."""


def _facts(result: RunResult) -> list[str]:
    """What the comment says under its heading: an exit-3 cause, the phases' scores, the
    gate's reasons, the undelivered faults and the sweeps."""
    out = []
    error = error_line(result)
    if error is not None:
        out += [error, ""]
    facts = []
    for outcome in phases(result):
        score_line = score_text(outcome.score.score)
        if outcome.score.summary is not None:
            score_line += f" ({phase_state(outcome)})"
        facts.append(f"{label_text(outcome, 100)}: {score_line}")
    facts.append("phases: " + (", ".join(text(p) for p in result.overall.phases_ran) or "none"))
    if not result.complete:
        facts.append(f"⚠️ stopped early ({text(result.stop_reason or 'unknown reason', 60)})")
    out.append(" · ".join(facts))
    out.append("")
    out += [f"{text(line, 300)}  " for line in judge_lines(result)]
    if result.judges:
        out.append("")
    for reason in result.overall.reasons[:10]:
        out.append(f"- {text(reason, 400)}")
    if result.overall.reasons:
        out.append("")
    accepted = accepted_lines(result)
    if accepted:
        out += [ACCEPTED_TITLE, "", *(f"- {text(line, 400)}" for line in accepted[:10]), ""]
    undelivered = undelivered_items(result, MAX_UNDELIVERED, hint_chars=300)
    if undelivered:
        out += [UNDELIVERED_TITLE, "", *undelivered, ""]
    swept = [sweep for outcome in phases(result) for sweep in outcome.sweeps]
    for sweep in swept[:MAX_SWEEPS]:
        out.append(
            f"- **Sweep {text(breaking.title(sweep), 160)}**: {text(breaking.compact(sweep), 600)}"
        )
    if swept:
        out.append("")
    for outcome in phases(result):
        out += markdown_lines(outcome, text, COMMENT_SCENARIO_LINES)
    return out


def _tables(result: RunResult, budget: int) -> str:
    """The per-type tables, the failing cells and the failed mutations, within ``budget``
    characters."""
    types, budget = _type_tables(result, budget)
    body = types
    bad = all_bad_cells(result)
    if bad:
        body += "\n" if types else ""
        table = [
            f"**Failing cells ({len(bad)})**",
            "",
            "| | cell | severity | reason | faults fired |",
            "|---|---|---|---|---|",
        ]
        shared = scenarios_per_scenario(result)

        def row(cell: CellResult) -> str:
            return _failing_row(cell, shared.get(cell.scenario))

        part, budget = _table(table, Mapped(bad, row), budget, "failing cells")
        body += part
    # made as the table takes them (a spooled phase's are read back one at a time)
    failed = Joined([failed_mutations(outcome) for outcome in phases(result)])
    mutations = Mapped(failed, _mutation_row)
    if mutations:
        table = [
            f"**Failed mutations ({len(mutations)})**",
            "",
            "| | mutation | transform | original | sent (or request changes) | reply | "
            "failed invariants | reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        part, budget = _table(table, mutations, budget, "failed mutations")
        body += ("\n" if bad or types else "") + part
    return body
