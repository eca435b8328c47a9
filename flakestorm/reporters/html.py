"""A self-contained HTML report: summary, matrix, filters and every cell's invocations.

Layout: the verdict, the score of every phase, why the gate failed and — flagged — the faults
that were not delivered (SPEC §4) with the wiring hint; then, per phase that ran, the matrix, a
table of the scenarios with their declared faults and how they ran, and every cell with its
invocations, its streams and every tool and LLM call the agent made in it.

Status glyphs are inline SVG (:data:`~flakestorm.reporters.html_matrix.GLYPHS`, drawn by its
``glyph``), not emoji, so they render on a machine without an emoji font.

Rendered with jinja2 from ``templates/report.html.j2`` with autoescaping on; every string from
the run first goes through :func:`flakestorm.reporters.escape.document_text` (or its excerpt),
and replies and prompts are shown in ``<pre>`` as text (the matrix's cells are made as strings
by :mod:`flakestorm.reporters.html_matrix`, escaped alike; a large phase details some cells).
The page loads nothing: no external URL, inline CSS, one small inline script (``report.js``);
its Content-Security-Policy allows only that script, by its SHA-256 hash computed at render
time, so even markup that slipped through escaping could not run a script or fetch anything::

    default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-…'; img-src data:;
    base-uri 'none'; form-action 'none'

Filters: the "failed only" and "critical only" checkboxes hide matrix rows and cells; the URL
hash selects them on load (``#failed``, ``#critical``, ``#failed+critical``) and ticking a box
updates it, so a filtered view can be linked to.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import jinja2

from flakestorm.baseline.judgement import judgement_of
from flakestorm.reporters import breaking, trend_chart
from flakestorm.reporters import delta as delta_report
from flakestorm.reporters.escape import document_excerpt, document_text
from flakestorm.reporters.html_matrix import (
    DETAIL_LIMIT,
    Detail,
    detail,
    detailed,
    glyph,
    glyph_kinds,
    matrix,
    row_html,
)
from flakestorm.reporters.mutation_view import (
    TypeRow,
    failed_mutations,
    mutation_legend,
    mutation_types,
)
from flakestorm.reporters.spend_view import Amplification, amplification, cell_spend
from flakestorm.reporters.stream_view import TimelineRow, cell_stream, html_timeline
from flakestorm.reporters.transcript import TurnRow, rows
from flakestorm.reporters.view import (
    accepted_lines,
    all_warnings,
    call_status,
    call_target,
    cell_counts,
    judge_lines,
    no_calls,
    phase_state,
    phases,
    run_verdict,
    scenario_notes,
    score_text,
    unattributed_heading,
    undelivered,
)
from flakestorm.results.model import (
    CallRecord,
    CellResult,
    InvariantInfo,
    MutationResult,
    PhaseOutcome,
    PromptResult,
    RunResult,
    ScenarioInfo,
    Status,
)
from flakestorm.results.spool import Mapped
from flakestorm.results.sweeps import SweepInfo
from flakestorm.results.tally import tally_of

TEMPLATES = Path(__file__).parent / "templates"

LEGEND_ITEMS: tuple[tuple[str, str], ...] = (
    ("passed", "passed"),
    ("failed", "failed"),
    ("flaky", "flaky (repeats disagreed; next to a failure: flaky and failed)"),
    ("errored", "errored (flakestorm could not carry the cell out)"),
    ("skipped", "skipped (when does not apply)"),
    ("not_run", "not run (the run stopped first)"),
)
UNDELIVERED_ITEM = (
    "undelivered",
    "next to a scenario: a declared fault was not delivered (no matching call reached "
    "flakestorm, or the fault could not act on those that did), so its cells are errored",
)
EXCERPT_CHARS = 20_000
"""How much of one reply or prompt the report shows (results.json has all of it)."""


@dataclass(frozen=True)
class _Baseline:
    """The delta the step compared the run with (:attr:`RunResult.step`)."""

    headline: str
    against: str
    age: str
    url: str | None
    rows: list[delta_report.Row]
    more: int


@dataclass(frozen=True)
class _Invocation:
    number: int
    run: int
    passed: bool
    reason: str
    prompt: str
    sent: str | None
    output: str | None
    output_chars: int
    error: str | None
    latency_ms: float
    status: int | None
    similarity: str | None


@dataclass(frozen=True)
class _Call:
    number: int
    target: str
    method: str
    url: str
    status: str
    fired: tuple[str, ...]
    upstream_error: str | None
    latency_ms: float


@dataclass(frozen=True)
class _Cell:
    index: int
    anchor: str
    """The element id (``contract-cell-3``, ``chaos-cell-3``: the phase, then the cell)."""
    id: str
    invariant_id: str
    scenario: str
    severity: str
    status: str
    glyphs: tuple[str, ...]
    """The status glyphs (:data:`~flakestorm.reporters.html_matrix.GLYPHS`) of the cell: its
    status, and ``flaky``."""
    bad: bool
    flaky: bool
    reason: str
    runs: str | None
    faults: tuple[str, ...]
    invocations: tuple[_Invocation, ...]
    calls: tuple[_Call, ...]
    no_calls: bool
    notes: tuple[str, ...] = ()
    """The agent was invoked under declared faults, yet no call reached flakestorm."""
    turns: tuple[TurnRow, ...] = ()
    """A failed cell's conversations, turn by turn."""
    spend: str = ""
    stream: str = ""
    timeline: tuple[TimelineRow, ...] = ()


@dataclass(frozen=True)
class _Scenario:
    name: str
    faults: tuple[str, ...]
    undelivered: bool
    notes: tuple[str, ...]
    unattributed: str = ""
    """How many of its calls were not attributed to a cell (when some were)…"""
    calls: tuple[_Call, ...] = ()
    """…and the first of them."""


@dataclass(frozen=True)
class _Row:
    invariant: InvariantInfo
    """The row's invariant, its texts escaped (:func:`_escaped`)."""
    bad: bool
    cells: str
    """Its cells' ``<td>`` elements (``Markup``: :func:`~flakestorm.reporters.html_matrix.
    row_html`)."""


@dataclass(frozen=True)
class _Mutation:
    mutation: MutationResult
    """The failed or errored mutation, its texts escaped and its quotes cut (:func:`_mutation`)."""
    glyphs: tuple[str, ...]
    calls: tuple[_Call, ...] = ()


def _mutation(m: MutationResult) -> _Mutation:
    shown = dataclasses.replace(
        m,
        id=document_text(m.id),
        type=document_text(m.type),
        transform=document_text(m.transform),
        generator=document_text(m.generator),
        severity=document_text(m.severity),
        reason=document_excerpt(m.reason, 2000),
        failed_invariants=tuple(document_text(i) for i in m.failed_invariants),
        original=document_excerpt(m.original, EXCERPT_CHARS),
        sent=document_excerpt(m.sent, EXCERPT_CHARS),
        changes=tuple(document_excerpt(c, 500) for c in m.changes),
        output=None if m.output is None else document_excerpt(m.output, EXCERPT_CHARS),
        error=document_text(m.error or "error"),
    )
    glyphs = ("flaky",) if m.flaky else (m.status.value,)
    return _Mutation(shown, glyphs, tuple(_call(n, c) for n, c in enumerate(m.calls, 1)))


@dataclass(frozen=True)
class _Phase:
    key: str
    """The phase (``contract``, ``chaos``): the prefix of its section and cell ids."""
    name: str
    title: str
    score: str
    state: str
    counts: dict[str, int]
    scenarios: tuple[_Scenario, ...]
    rows: Iterable[_Row]
    cells: Iterable[_Cell]
    """Each cell shown in detail with its invocations and calls, made as the template reaches
    it (a run's cells are not all held in memory at once: :class:`_CellViews`)."""
    more: int
    """How many cells are not shown in detail (:data:`~flakestorm.reporters.html_matrix.
    DETAIL_LIMIT`)."""
    legend: tuple[tuple[str, str], ...]
    """The matrix legend: (glyph kind, words) items."""
    types: tuple[TypeRow, ...] = ()
    """A mutation phase's per-type table; with it, ``mutations`` replaces the matrix."""
    mutations: Sequence[_Mutation] = ()
    """A mutation phase's failed and errored mutations, each view made as the template
    reaches it."""
    row_kind: str = "invariant"
    legend_text: str = ""
    """A mutation phase's legend, words only."""
    sweeps: tuple[_Sweep, ...] = ()
    spend: Amplification | None = None


@dataclass(frozen=True)
class _Sweep:
    """A swept scenario: its pass-rate chart (inline SVG geometry) and its table."""

    title: str
    field: str
    values: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...], str], ...]
    """(invariant, glyph kind per value: ``passed``, ``failed``, ``skipped``, breaking point)."""
    chart: breaking.Chart


@dataclass(frozen=True)
class _Undelivered:
    where: str
    scenario: str | None
    fault: str
    hint: str


def _invocation(number: int, prompt: PromptResult) -> _Invocation:
    error = None
    if prompt.output is None:
        message = document_excerpt(prompt.error_message, 2000)
        error = f"{document_text(prompt.error or 'error')}: {message}"
    similarity = None
    if prompt.similarity is not None:
        similarity = f"{prompt.similarity:.3f} ({document_text(prompt.similarity_backend or '?')})"
    return _Invocation(
        number=number,
        run=prompt.run + 1,
        passed=prompt.passed,
        reason=document_excerpt(prompt.reason, 2000),
        prompt=document_excerpt(prompt.prompt, EXCERPT_CHARS),
        sent=None if prompt.sent == prompt.prompt else document_excerpt(prompt.sent, EXCERPT_CHARS),
        output=None if prompt.output is None else document_excerpt(prompt.output, EXCERPT_CHARS),
        output_chars=0 if prompt.output is None else len(prompt.output),
        error=error,
        latency_ms=prompt.latency_ms,
        status=prompt.status,
        similarity=similarity,
    )


def _call(number: int, call: CallRecord) -> _Call:
    return _Call(
        number=number,
        target=document_text(call_target(call)),
        method=document_excerpt(call.method, 40),
        url=document_excerpt(call.url, 4000),
        status=call_status(call),
        fired=tuple(document_excerpt(f, 500) for f in call.fired),
        upstream_error=None
        if call.upstream_error is None
        else document_excerpt(call.upstream_error, 2000),
        latency_ms=call.latency_ms,
    )


class _CellViews:
    """The views of a phase's cells shown in detail, made one at a time each time they are
    iterated."""

    def __init__(self, outcome: PhaseOutcome, prefix: str, shown: Detail) -> None:
        self._outcome = outcome
        self._prefix = prefix
        self._shown = shown
        self._infos = {s.name: s for s in outcome.scenarios}

    def __iter__(self) -> Iterator[_Cell]:
        for cell in detailed(self._outcome, self._shown):
            yield _cell(cell, self._prefix, self._infos.get(cell.scenario))


def _cell(cell: CellResult, prefix: str, scenario: ScenarioInfo | None) -> _Cell:
    """The view of ``cell``, with its invocations and calls."""
    return _Cell(
        index=cell.index,
        anchor=f"{prefix}cell-{cell.index}",
        id=document_text(cell.id),
        invariant_id=document_text(cell.invariant_id),
        scenario=document_text(cell.scenario),
        severity=document_text(cell.severity),
        status=cell.status.value,
        glyphs=glyph_kinds(cell.status, cell.flaky),
        bad=cell.status in (Status.FAILED, Status.ERRORED),
        flaky=cell.flaky,
        reason=document_excerpt(cell.reason, 2000),
        runs=f"{cell.runs_passed} of {cell.runs_total}" if cell.runs_total > 1 else None,
        faults=tuple(document_excerpt(f, 500) for f in cell.faults_fired),
        invocations=tuple(_invocation(n, p) for n, p in enumerate(cell.prompts, 1)),
        calls=tuple(_call(n, c) for n, c in enumerate(cell.calls, 1)),
        no_calls=no_calls(cell, scenario),
        notes=tuple(document_excerpt(n, 2000) for n in cell.notes),
        turns=rows(cell, document_excerpt),
        spend=document_text(cell_spend(cell.spend) or ""),
        stream=document_text(cell_stream(cell) or ""),
        timeline=html_timeline(cell),
    )


class _Rows:
    """The matrix rows of a phase, each made (its cells' elements) as the template reaches it:
    a large matrix's elements are not all held at once."""

    def __init__(self, outcome: PhaseOutcome, prefix: str, shown: Detail) -> None:
        self._outcome = outcome
        self._by_key = matrix(outcome, prefix, shown) if outcome.cells else {}

    def __iter__(self) -> Iterator[_Row]:
        names = [s.name for s in self._outcome.scenarios]
        for inv in self._outcome.invariants:
            cells = [self._by_key.get((inv.id, name)) for name in names]
            bad = any(c is not None and c.bad for c in cells)
            yield _Row(_escaped(inv), bad, row_html(cells))


def _escaped(inv: InvariantInfo) -> InvariantInfo:
    """``inv`` with each text the config gave it made safe for the report."""
    description = None if inv.description is None else document_text(inv.description)
    return dataclasses.replace(
        inv,
        id=document_text(inv.id),
        type=document_text(inv.type),
        severity=document_text(inv.severity),
        when=document_text(inv.when),
        description=description,
    )


def _phase(outcome: PhaseOutcome) -> _Phase:
    key = outcome.phase
    prefix = f"{key}-"
    shown = detail(outcome)
    scenarios = tuple(
        _Scenario(
            name=document_text(s.name),
            faults=tuple(document_text(f) for f in s.faults),
            undelivered=bool(s.undelivered),
            notes=tuple(document_excerpt(note, 2000) for note in scenario_notes(s)),
            unattributed=document_excerpt(unattributed_heading(outcome, s), 2000)
            if s.unattributed
            else "",
            calls=tuple(_call(n, c) for n, c in enumerate(s.unattributed_calls, 1)),
        )
        for s in outcome.scenarios
    )
    legend, spent = LEGEND_ITEMS, amplification(outcome)
    if any(s.undelivered for s in outcome.scenarios):
        legend = (*LEGEND_ITEMS, UNDELIVERED_ITEM)
    return _Phase(
        key=key,
        name=document_text(outcome.name),
        title=document_text(outcome.label[:1].upper() + outcome.label[1:]),
        score=score_text(outcome.score.score),
        state=phase_state(outcome),
        counts=cell_counts(outcome),
        scenarios=scenarios,
        rows=_Rows(outcome, prefix, shown),
        cells=_CellViews(outcome, prefix, shown),
        more=shown.more,
        legend=() if outcome.mutations else legend,
        legend_text=mutation_legend(outcome).replace("`", "") if outcome.mutations else "",
        types=tuple(
            dataclasses.replace(r, type=document_text(r.type)) for r in mutation_types(outcome)
        ),
        mutations=Mapped(failed_mutations(outcome), _mutation),
        row_kind=document_text(outcome.rows),
        sweeps=tuple(_sweep(sweep) for sweep in outcome.sweeps),
        spend=None if spent is None else spent.escaped(document_text),
    )


def _sweep(sweep: SweepInfo) -> _Sweep:
    chart = breaking.chart(sweep)
    return _Sweep(
        title=document_text(breaking.title(sweep)),
        field=document_text(sweep.field),
        values=tuple(document_text(v) for v in sweep.values),
        rows=tuple(
            (
                document_text(p.invariant),
                tuple(m or "skipped" for m in p.marks),
                document_text(p.text),
            )
            for p in sweep.breaking
        ),
        chart=dataclasses.replace(
            chart,
            points=tuple((x, y, document_text(v), r) for x, y, v, r in chart.points),
            ticks=tuple((x, document_text(v)) for x, v in chart.ticks),
        ),
    )


def _leaks(result: RunResult) -> str | None:
    """``3 replies`` that failed a leak invariant, or None."""
    n = sum(tally_of(outcome.cells).leaks for outcome in phases(result))
    return None if not n else f"{n} repl{'y' if n == 1 else 'ies'}"


TEMPLATES_CACHE = TEMPLATES / "__pycache__"
"""Where the compiled template is kept."""


class _CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """The template compiled once per installation, as Python keeps a module's bytecode:
    beside the templates, keyed by the template's source and the interpreter (jinja2 checks
    both), so a changed template or another Python compiles it again; where the directory
    cannot be written, the template is compiled at each run as before."""

    def __init__(self) -> None:
        super().__init__(str(TEMPLATES_CACHE), "%s.jinja")

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            Path(self.directory).mkdir(exist_ok=True)
            super().dump_bytecode(bucket)


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        bytecode_cache=_CompiledTemplates(),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def compile_template() -> None:
    """Compile the report's template into its cache (the Docker image does it at build time,
    so the action's first report does not compile it)."""
    _environment().get_template("report.html.j2")


@functools.cache
def _script() -> tuple[str, str]:
    """The inline script and its CSP source expression (``'sha256-…'``)."""
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return script, f"'sha256-{digest}'"


def content_security_policy(script_source: str) -> str:
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src {script_source}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def render(result: RunResult) -> str:
    """The HTML report for ``result``."""
    return "".join(_generate(result))


def write(result: RunResult, out: TextIO) -> None:
    """The HTML report for ``result``, written to ``out`` as it is rendered."""
    for chunk in _generate(result):
        out.write(chunk)


def _generate(result: RunResult) -> Iterator[str]:
    script, script_source = _script()
    phase_views = [_phase(outcome) for outcome in phases(result)]
    not_delivered = [
        _Undelivered(
            where=document_text(u.outcome.label)
            if u.shown_scenario is not None
            else f"the {document_text(u.outcome.label)} phase",
            scenario=None if u.shown_scenario is None else document_text(u.shown_scenario),
            fault=document_text(u.fault),
            hint=document_excerpt(u.hint, 2000),
        )
        for u in undelivered(result)
    ]
    shown = run_verdict(result)
    judged = judgement_of(result)
    compared = None if judged is None else delta_report.compared_of(judged)
    changed, more = ([], 0) if compared is None else delta_report.rows(compared)
    template = _environment().get_template("report.html.j2")
    return template.generate(
        csp=content_security_policy(script_source),
        glyph=glyph,
        detail_limit=DETAIL_LIMIT,
        leaks=_leaks(result),
        script=script,
        result=result,
        verdict=shown.word,
        exit_code=shown.code,
        causes=[document_excerpt(cause, 2000) for cause in shown.causes],
        causes_lead=shown.lead,
        verdict_note=document_text(shown.note(lambda s: s)),
        own_gate=shown.rule is not None,
        baseline=None
        if compared is None
        else _Baseline(
            headline=document_text(compared.delta.headline(compared.against)),
            against=document_text(compared.against),
            age=document_text(compared.age),
            url=delta_report.link(compared),
            rows=[
                dataclasses.replace(
                    r, cell_id=document_text(r.cell_id), phase=document_text(r.phase)
                )
                for r in changed
            ],
            more=more,
        ),
        no_baseline=None
        if judged is None or judged.missing is None
        else document_text(judged.missing),
        trend=None if judged is None or judged.trend is None else trend_chart.chart(judged.trend),
        overall_score=score_text(result.overall.score),
        phases=phase_views,
        undelivered=not_delivered,
        reasons=[document_text(r) for r in result.overall.reasons],
        accepted=[document_text(line) for line in accepted_lines(result)],
        warnings=[document_text(w) for w in all_warnings(result)],
        judges=[document_text(line) for line in judge_lines(result)],
        stop_reason=None
        if result.complete
        else document_text(result.stop_reason or "unknown reason"),
        phases_ran=", ".join(document_text(p) for p in result.overall.phases_ran) or "none",
        config_path=document_text(result.config_path),
        config_digest=document_text(result.config_digest),
        version=document_text(result.flakestorm_version),
        started_at=document_text(result.started_at),
    )
