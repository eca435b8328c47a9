"""JUnit XML (the common ``testsuites/testsuite/testcase`` schema CI viewers read).

- one ``<testsuite>`` per phase that ran: the contract suite is named after the contract, the
  chaos-only phase's suite is named ``chaos``, the mutation phase's ``mutation``;
- the mutation suite has one ``<testcase>`` per mutation: ``name`` = ``id transform``
  (``prompt_injection#0.1 fake_system_message``), a ``<failure>`` or ``<error>`` quoting the
  original, the mutated prompt or the request changes, the reply and the failed invariants;
- one ``<testcase>`` per cell: ``classname`` = the suite name, ``name`` =
  ``invariant_id[scenario]``, ``time`` = the sum of the cell's invocation latencies, ``file`` /
  ``line`` = the config file and the invariant's line;
- a failed cell has a ``<failure>`` (``message`` = the reason; text = the failing prompts, an
  excerpt of each reply, the faults that fired and the first calls the agent made), an errored
  cell an ``<error>`` (a cell of a scenario whose faults were not delivered is one: its message
  starts ``fault not delivered:``), a skipped or not-run cell a ``<skipped>`` with the reason;
- suite ``<properties>``: ``phase``, ``score``, ``passed``, ``critical_failures``, ``seed``,
  ``config_digest``, ``config_path``, ``overall_score``, ``overall_passed``, ``min_score``,
  ``flakestorm_version``; the phase's own counts (``prompts`` and ``prompts_passed`` for the
  chaos phase);
  ``undelivered_faults`` (``scenario: fault`` joined by ``; ``) when a declared fault was not
  delivered, ``serial_scenarios`` when some scenario's cells ran one at a time,
  ``breaking_point[SCENARIO]`` per swept scenario (the field, then each invariant's breaking
  point), ``public_safe`` when the agent's output it quotes was masked or cut (below), and
  ``stop_reason`` for a partial run. ``junit-xml`` has no case-level properties, so each case's
  ``severity`` (with status, flakiness and faults fired) is the first lines of its
  ``<system-out>``.

Agent output and config strings are untrusted: every string goes through
:func:`flakestorm.reporters.escape.document_text` (characters illegal in XML 1.0 become U+FFFD) and
the XML serializer escapes the rest, so the document always parses.

JUnit leaves the runner: test-report actions publish it as check runs, which anyone can read
on a public repository. So it quotes the agent's output public-safe, by the rule of the job
summary and the PR comment (:func:`flakestorm.reporters.public.public`: replies cut where a leak
invariant matched, PII masked) — the failure details, each turn of a conversation in
``system-out`` and the mutations alike — and each suite's ``public_safe`` property says what was
withheld. ``results.json`` and ``report.html`` keep the full text.
"""

from __future__ import annotations

import io
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from junit_xml import TestCase, TestSuite

from flakestorm.reporters import breaking
from flakestorm.reporters.escape import document_excerpt, document_text
from flakestorm.reporters.public import PublicResult, public
from flakestorm.reporters.spend_view import cell_spend
from flakestorm.reporters.stream_view import cell_stream
from flakestorm.reporters.transcript import transcript, turn_line
from flakestorm.reporters.view import (
    call_status,
    call_target,
    cell_reader,
    phase_counts,
    phases,
    score_text,
    unattributed_heading,
)
from flakestorm.results.acceptance import AcceptanceState, accepts_in
from flakestorm.results.model import (
    CallRecord,
    CellResult,
    MutationResult,
    PhaseOutcome,
    PromptResult,
    RunResult,
    Status,
)
from flakestorm.results.spool import Spooled
from flakestorm.results.tally import seconds, tally_of

EXCERPT_CHARS = 1000
"""How much of a reply (or prompt) a failure quotes."""
MAX_PROMPTS_PER_CELL = 5
MAX_CALLS_PER_CELL = 20
"""Calls quoted in a failure; the rest are counted (``report.html`` has them all)."""


def _one_line(value: str, limit: int = 500) -> str:
    return document_excerpt(value, limit).replace("\n", " ")


def _invocation(prompt: PromptResult) -> str:
    lines = [f"prompt (run {prompt.run + 1}): {document_excerpt(prompt.prompt, EXCERPT_CHARS)}"]
    if prompt.sent != prompt.prompt:
        lines.append(f"sent: {document_excerpt(prompt.sent, EXCERPT_CHARS)}")
    lines.append(f"verdict: {_one_line(prompt.reason)}")
    if prompt.output is None:
        error = prompt.error or "error"
        lines.append(f"no reply: {_one_line(error, 40)}: {_one_line(prompt.error_message)}")
    else:
        lines.append(f"reply ({len(prompt.output):,} characters):")
        lines.append(document_excerpt(prompt.output, EXCERPT_CHARS))
    return "\n".join(lines)


def _faults(cell: CellResult) -> str:
    return ", ".join(_one_line(f, 200) for f in cell.faults_fired) or "none"


def _calls(calls: Sequence[CallRecord], heading: str = "calls through flakestorm") -> str:
    lines = [f"{heading}: {len(calls)}"]
    for number, call in enumerate(calls[:MAX_CALLS_PER_CELL], 1):
        line = (
            f"{number}. {_one_line(call_target(call), 120)} {_one_line(call.method, 20)} "
            f"{_one_line(call.url, 500)} -> {call_status(call)} ({call.latency_ms:.0f} ms)"
        )
        if call.fired:
            line += "; fired: " + ", ".join(_one_line(f, 200) for f in call.fired)
        if call.upstream_error:
            line += f"; upstream error: {_one_line(call.upstream_error, 300)}"
        lines.append(line)
    if len(calls) > MAX_CALLS_PER_CELL:
        lines.append(f"... and {len(calls) - MAX_CALLS_PER_CELL} more calls")
    return "\n".join(lines)


def _details(cell: CellResult) -> str:
    failing = [p for p in cell.prompts if not p.passed]
    parts = [_invocation(p) for p in failing[:MAX_PROMPTS_PER_CELL]]
    if len(failing) > MAX_PROMPTS_PER_CELL:
        parts.append(f"... and {len(failing) - MAX_PROMPTS_PER_CELL} more failing invocations")
    parts.append(f"faults fired: {_faults(cell)}")
    parts.extend(_one_line(note, 600) for note in cell.notes)
    if cell.calls:
        parts.append(_calls(cell.calls))
    return "\n\n".join(parts)


class _Lines:
    """:func:`_one_line` of the texts many cells share (a severity, a reason, a fault), each
    made once while a document is written (the texts it keeps are bounded)."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, int], str] = {}

    def __call__(self, value: str, limit: int = 500) -> str:
        made = self._made.get((value, limit))
        if made is None:
            if len(self._made) >= 4096:
                self._made.clear()
            made = self._made[value, limit] = _one_line(value, limit)
        return made

    def faults(self, cell: CellResult) -> str:
        return ", ".join(self(f, 200) for f in cell.faults_fired) or "none"


def _summary_lines(
    severity: str, status: str, runs: tuple[int, int, bool], reason: str, faults: str
) -> list[str]:
    """The first lines of a cell's ``system-out``: its severity (already one line), status,
    runs passed of ``runs`` (passed, total, flaky) when it ran more than once, reason and the
    faults fired."""
    lines = [f"severity: {severity}", f"status: {status}"]
    passed, total, flaky = runs
    if total > 1:
        lines.append(f"runs passed: {passed} of {total}{' (flaky)' if flaky else ''}")
    lines.append(f"reason: {reason}")
    lines.append(f"faults fired: {faults}")
    return lines


def _system_out(cell: CellResult, line: _Lines, reason: str, faults: str) -> str:
    runs = (cell.runs_passed, cell.runs_total, cell.flaky)
    lines = _summary_lines(line(cell.severity, 40), cell.status.value, runs, reason, faults)
    for conversation in transcript(cell):
        lines.append(_one_line(conversation.title))
        lines.extend(f"  {_one_line(turn_line(turn, 300), 2000)}" for turn in conversation.turns)
    return "\n".join(lines)


def _case(
    cell: CellResult,
    classname: str,
    file: str,
    line: int | None,
    lines: _Lines,
    accepted: Mapping[str, str] | None = None,
) -> Any:
    reason = lines(cell.reason)
    case = TestCase(
        name=document_text(cell.id),
        classname=classname,
        elapsed_sec=seconds(cell),
        stdout=_system_out(cell, lines, reason, lines.faults(cell)),
        file=file,
        line=str(line) if line else None,
    )
    message = reason or cell.status.value
    streamed = cell_stream(cell)
    for extra in (cell_spend(cell.spend), streamed and f"stream: {streamed}"):
        message += f" ({_one_line(extra)})" if extra else ""
    acceptance = (accepted or {}).get(cell.id)
    return _judged(case, cell.status, message, acceptance, lambda: _details(cell))


def _judged(
    case: Any, status: Status, message: str, acceptance: str | None, details: Callable[[], str]
) -> Any:
    """``case`` marked by its item's ``status``: a failure (skipped, with its acceptance, when
    one accepts it), an error, or skipped (``when`` does not apply, or it did not run);
    ``details``, what a failure or an error shows besides its message."""
    if status is Status.FAILED and acceptance is not None:
        case.add_skipped_info(message=f"{acceptance}; failed: {message}")
    elif status is Status.FAILED:
        case.add_failure_info(message=message, output=details())
    elif status is Status.ERRORED:
        case.add_error_info(message=message, output=details())
    elif status is Status.SKIPPED:
        case.add_skipped_info(message=f"skipped: {message}")
    elif status is Status.NOT_RUN:
        case.add_skipped_info(message=f"not run: {message}")
    return case


def _mutation_details(mutation: MutationResult) -> str:
    lines = [
        f"type: {mutation.type} (weight {mutation.weight:g}), transform {mutation.transform} "
        f"({mutation.generator})",
        f"failed invariants: {', '.join(mutation.failed_invariants) or 'none'}",
        f"original: {_one_line(mutation.original)}",
    ]
    if mutation.changes:
        lines.append(f"request changes: {_one_line('; '.join(mutation.changes))}")
    else:
        lines.append(f"sent: {_one_line(mutation.sent)}")
    if mutation.output is None:
        status = f" (HTTP {mutation.http_status})" if mutation.http_status is not None else ""
        lines.append(f"no reply{status}: {mutation.error or 'error'}")
    else:
        lines.append(f"reply: {_one_line(mutation.output)}")
    lines.append(f"reason: {_one_line(mutation.reason)}")
    if mutation.calls:
        lines.append(_calls(mutation.calls))
    return "\n".join(document_text(line) for line in lines)


def _mutation_case(
    mutation: MutationResult, classname: str, file: str, accepted: Mapping[str, str]
) -> Any:
    """One mutation: ``name`` is its id and transform, failures and errors kept apart."""
    case = TestCase(
        name=document_text(f"{mutation.id} {mutation.transform}"),
        classname=classname,
        elapsed_sec=seconds(mutation),
        stdout=document_text(f"status: {mutation.status.value}\nweight: {mutation.weight:g}"),
        file=file,
    )
    message = _one_line(mutation.reason) or mutation.status.value
    acceptance = accepted.get(mutation.id)
    return _judged(case, mutation.status, message, acceptance, lambda: _mutation_details(mutation))


def _suite(result: RunResult, outcome: PhaseOutcome, withheld: str = "") -> Any:
    """The phase's suite without its cases (:func:`_cases` makes them); ``withheld``: what the
    report does not quote of the agent's output (its ``public_safe`` property)."""
    file = document_text(result.config_path)
    properties = {
        "phase": document_text(outcome.phase),
        "score": score_text(outcome.score.score),
        "passed": str(outcome.score.passed).lower(),
        "critical_failures": str(len(outcome.score.critical_failures)),
    }
    properties |= {document_text(k): str(v) for k, v in phase_counts(outcome).items()}
    properties |= {
        "seed": str(result.seed),
        "config_path": file,
        "config_digest": document_text(result.config_digest),
        "overall_score": score_text(result.overall.score),
        "overall_passed": str(result.overall.passed).lower(),
        "min_score": f"{result.overall.min_score:g}",
        "flakestorm_version": document_text(result.flakestorm_version),
    }
    if result.judges:
        properties["llm_judge"] = document_text("; ".join(result.judges))
    undelivered = [f"{s.name}: {f}" for s in outcome.scenarios for f in s.undelivered]
    if undelivered:
        properties["undelivered_faults"] = document_text("; ".join(undelivered))
    serial = [s.name for s in outcome.scenarios if s.serial]
    if serial:
        properties["serial_scenarios"] = document_text(", ".join(serial))
    for sweep in outcome.sweeps:
        properties[document_text(f"breaking_point[{sweep.scenario}]")] = document_text(
            f"{sweep.field}: {breaking.compact(sweep, limit=50)}"
        )
    unattributed = [s for s in outcome.scenarios if s.unattributed]
    if unattributed:
        properties["unattributed_calls"] = document_text(
            "; ".join(f"{s.name}: {s.unattributed}" for s in unattributed)
        )
    if not result.complete:
        properties["stop_reason"] = document_text(result.stop_reason or "unknown")
    if withheld:
        properties["public_safe"] = withheld
    return TestSuite(
        name=document_text(outcome.name),
        test_cases=[],
        timestamp=document_text(result.started_at),
        properties=properties,
        stdout=document_text(
            "\n\n".join(
                _calls(s.unattributed_calls, f"{unattributed_heading(outcome, s)}; calls kept")
                for s in unattributed
            )
        )
        or None,
    )


def _cases(result: RunResult, outcome: PhaseOutcome, shown: PhaseOutcome) -> Iterator[str]:
    """The phase's cases' elements, one at a time: its cells, then its mutations, as
    ``shown`` (``outcome`` made public-safe, or ``outcome``) quotes them. A spooled phase's
    cells are read as the documents it wrote (:class:`_CellCases`), a cell whose case quotes
    the agent from ``shown``."""
    name = document_text(outcome.name)
    file = document_text(result.config_path)
    lines = {i.id: i.line for i in outcome.invariants}
    texts = _Lines()
    accepted = _accepted(result, outcome)
    if isinstance(outcome.cells, Spooled):
        cases = _CellCases(name, file, lines, texts, accepted, cell_reader(shown.cells))
        yield from map(cases, outcome.cells.documents())
    else:
        for cell in shown.cells:
            line = lines.get(cell.invariant_id)
            yield _case_xml(_case(cell, name, file, line, texts, accepted))
    for mutation in shown.mutations:
        yield _case_xml(_mutation_case(mutation, name, file, accepted))


def _accepted(result: RunResult, outcome: PhaseOutcome) -> dict[str, str]:
    """The failing items of ``outcome`` an acceptance accepts -> their ``<skipped>`` message
    (SPEC §14: GitHub's test reporters show a skipped case with its message)."""
    return {
        item: document_text(f"accepted until {a.until}: {a.reason}")
        for a in result.accepted or ()
        if a.state is AcceptanceState.ACCEPTED and accepts_in(a, outcome.phase)
        for item in a.failed
    }


_SHORT = {
    Status.PASSED.value: None,
    Status.SKIPPED.value: "skipped",
    Status.NOT_RUN.value: "not run",
}
"""The statuses of a cell whose case has no details (the prefix of its ``<skipped>``
message)."""


class _CellCases:
    """The element of a cell's case from its document, as :func:`_case_xml` writes
    :func:`_case`'s: a cell that passed, was skipped or did not run and has no conversation
    (no details, no transcript) from the few fields its case shows, made once per distinct
    severity, status and reason; any other read by its index with ``read`` (made public-safe,
    as the report quotes it)."""

    def __init__(
        self,
        classname: str,
        file: str,
        lines: dict[str, int],
        texts: _Lines,
        accepted: Mapping[str, str],
        read: Callable[[int], CellResult],
    ) -> None:
        self._classname, self._file, self._lines, self._texts = classname, file, lines, texts
        self._accepted = accepted
        self._read = read
        self._tails: dict[str, str] = {}  # per invariant: the attributes after ``time``
        self._outs: dict[tuple[Any, ...], str] = {}  # what follows the attributes

    def __call__(self, d: dict[str, Any]) -> str:
        status, prompts = d["status"], d["prompts"]
        if status not in _SHORT or any(p.get("turn") is not None for p in prompts):
            cell = self._read(d["index"])
            line = self._lines.get(cell.invariant_id)
            case = _case(cell, self._classname, self._file, line, self._texts, self._accepted)
            return _case_xml(case)
        invariant = d["invariant_id"]
        tail = self._tails.get(invariant)
        if tail is None:
            line = self._lines.get(invariant)
            line_text = str(line) if line else ""
            shown = (("classname", self._classname), ("file", self._file), ("line", line_text))
            tail = self._tails[invariant] = _attributes((k, v) for k, v in shown if v)
        elapsed = round(sum(p["latency_ms"] for p in prompts) / 1000.0, 6)
        time = f' time="{elapsed:f}"' if elapsed else ""
        name = _attribute(document_text(f"{invariant}[{d['scenario']}]"))
        return f'<testcase name="{name}"{time}{tail}>{self._out(d, status, _SHORT[status])}'

    def _out(self, d: dict[str, Any], status: str, short: str | None) -> str:
        """The case's children and end tag."""
        runs_total = d.get("runs_total", 0)
        several = runs_total > 1
        runs_passed = d.get("runs_passed", 0) if several else 0
        flaky = several and d.get("flaky", False)
        faults = tuple(d["faults_fired"])
        key = (d["severity"], status, d["reason"], faults, runs_total, runs_passed, flaky)
        out = self._outs.get(key)
        if out is not None:
            return out
        texts = self._texts
        reason = texts(d["reason"])
        fired = ", ".join(texts(f, 200) for f in faults) or "none"
        runs = (runs_passed, runs_total, flaky)
        lines = _summary_lines(texts(d["severity"], 40), status, runs, reason, fired)
        children = []
        if short is not None:
            message = f"{short}: {reason or status}"
            children.append(_element("skipped", (("type", "skipped"), ("message", message))))
        children.append(_element("system-out", (), "\n".join(lines)))
        out = "".join(f"\n\t\t\t{child}" for child in children) + "\n\t\t</testcase>"
        if len(self._outs) >= 4096:
            self._outs.clear()
        self._outs[key] = out
        return out


_TOTALS = ("disabled", "errors", "failures", "tests")
"""The ``<testsuites>`` totals, summed over its suites."""


_SKIPPED_CELL = (Status.SKIPPED, Status.NOT_RUN)
_SKIPPED_MUTATION = (Status.NOT_RUN,)
"""The statuses whose case is skipped (:func:`_case`, :func:`_mutation_case`)."""


def _counts(outcome: PhaseOutcome) -> tuple[dict[str, int], float]:
    """A suite's counts of its cases, and their time (as ``junit-xml`` counts them), from the
    phase's tallies (:mod:`flakestorm.results.tally`): its cases are not made for them."""
    counts = dict.fromkeys(("disabled", "errors", "failures", "skipped", "tests"), 0)
    microseconds = 0
    for items, skipped in ((outcome.cells, _SKIPPED_CELL), (outcome.mutations, _SKIPPED_MUTATION)):
        tally = tally_of(items)
        statuses = tally.statuses
        counts["errors"] += statuses[Status.ERRORED.value]
        counts["failures"] += statuses[Status.FAILED.value]
        counts["skipped"] += sum(statuses[status.value] for status in skipped)
        counts["tests"] += tally.count
        microseconds += tally.microseconds
    return counts, microseconds / 1_000_000


_CASE_ATTRIBUTES = (
    ("timestamp", "timestamp"),
    ("classname", "classname"),
    ("status", "status"),
    ("category", "class"),
    ("file", "file"),
    ("line", "line"),
    ("log", "log"),
    ("url", "url"),
)


def _case_xml(case: TestCase) -> str:
    """One case's element as it stands in the indented document (a suite's child): the
    ``<testcase>`` element ``junit-xml`` makes of ``case`` in a suite
    (``TestSuite.build_xml_doc``), indented by ``ElementTree.indent`` and serialised by
    ``ElementTree.tostring`` — written here as text, escaped as they escape it (a test keeps
    them equal), not built as a tree for each of a run's cases. Its strings were cleaned
    already (no decoding to do)."""
    attributes = [("name", str(case.name))]
    if case.assertions:
        attributes.append(("assertions", f"{int(case.assertions):d}"))
    if case.elapsed_sec:
        attributes.append(("time", f"{case.elapsed_sec:f}"))
    for field, name in _CASE_ATTRIBUTES:
        value = getattr(case, field)
        if value:
            attributes.append((name, str(value)))
    children = []
    for kind, infos in (("failure", case.failures), ("error", case.errors)):
        for info in infos:
            if info["output"] or info["message"]:
                child = {"type": kind}
                if info["message"]:
                    child["message"] = info["message"]
                if info["type"]:
                    child["type"] = info["type"]
                children.append(_element(kind, child.items(), info["output"]))
    for info in case.skipped:
        child = {"type": "skipped"}
        if info["message"]:
            child["message"] = info["message"]
        children.append(_element("skipped", child.items(), info["output"]))
    for stream, tag in ((case.stdout, "system-out"), (case.stderr, "system-err")):
        if stream:
            children.append(_element(tag, (), stream))
    if not children:
        return _element("testcase", attributes)
    inner = "".join(f"\n\t\t\t{child}" for child in children)
    return f"<testcase{_attributes(attributes)}>{inner}\n\t\t</testcase>"


def _element(tag: str, attributes: Iterable[tuple[str, str]], text: str | None = None) -> str:
    """An element without children, as ``ElementTree.tostring`` writes it."""
    if not text:
        return f"<{tag}{_attributes(attributes)} />"
    return f"<{tag}{_attributes(attributes)}>{_text(text)}</{tag}>"


def _attributes(attributes: Iterable[tuple[str, str]]) -> str:
    return "".join(f' {name}="{_attribute(value)}"' for name, value in attributes)


_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTRIBUTE = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\n": "&#10;",
     "\t": "&#09;"}
)  # fmt: skip
"""What ``ElementTree`` escapes in text and in an attribute value."""


def _text(value: str) -> str:
    return value.translate(_TEXT)


def _attribute(value: str) -> str:
    return value.translate(_ATTRIBUTE)


def render(result: RunResult, *, redact: bool = True) -> str:
    """The JUnit XML document for ``result`` (:func:`write`'s text)."""
    out = io.StringIO()
    write(result, out, redact=redact)
    return out.getvalue()


def _withheld(safe: PublicResult) -> str:
    """The ``public_safe`` property: what the report does not quote, or "" (nothing)."""
    if not safe.changed:
        return ""
    return (
        f"{safe.masked} PII finding(s) masked, {safe.cut} reply(ies) cut where a leak "
        "invariant matched; the full text is in results.json and report.html"
    )


def write(result: RunResult, out: TextIO, *, redact: bool = True) -> None:
    """Write the JUnit XML document for ``result`` to ``out``, a case at a time; ``redact``
    (the default): the agent's output quoted public-safe (see the module docstring).

    Each suite's element comes from ``junit-xml`` (``TestSuite.build_xml_doc``) without its
    cases; its counts and the ``<testsuites>`` totals lead the document, and come from the
    phase's tally (:mod:`flakestorm.results.tally`); then each case is made and written in its
    place:
    a run's cases are never all held, and are read once. The document is indented with
    ``ElementTree.indent`` rather than ``minidom``, which takes seconds on a 10,000-cell
    matrix. Every string was cleaned before it reached the tree, so the library's own pass
    over the serialized text for illegal characters is not needed.
    """
    token = uuid.uuid4().hex  # a case that stands for a suite's cases (no string of the run)
    safe = public(result) if redact else PublicResult(result, 0, 0)
    withheld = _withheld(safe)
    root = ET.Element("testsuites")
    totals = dict.fromkeys(_TOTALS, 0)
    time_s = 0.0
    streamed = []
    for outcome in phases(result):
        element = _suite(result, outcome, withheld).build_xml_doc()
        counts, suite_s = _counts(outcome)
        accepted = len(_accepted(result, outcome))  # failed, shown as skipped
        counts["failures"] -= accepted
        counts["skipped"] += accepted
        for key, value in counts.items():
            element.set(key, str(value))
        # junit-xml sums the case times as floats (30.240000000000002)
        element.set("time", f"{suite_s:.6f}")
        for key in totals:
            totals[key] += counts[key]
        time_s += float(element.get("time", 0))
        if counts["tests"]:  # the cases before the suite's system-out, as the schema has it
            out_at = next((i for i, e in enumerate(element) if e.tag == "system-out"), None)
            placeholder = ET.Element("testcase", {"name": token})
            element.insert(len(element) if out_at is None else out_at, placeholder)
            streamed.append(outcome)
        root.append(element)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{time_s:.6f}")
    ET.indent(root, space="\t")
    text = '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"
    marker = ET.tostring(ET.Element("testcase", {"name": token}), "unicode")
    for outcome in streamed:
        head, text = text.split(marker, 1)
        out.write(head)
        shown = safe.result.phases.get(outcome.phase, outcome)
        for number, case in enumerate(_cases(result, outcome, shown)):
            out.write(("\n\t\t" if number else "") + case)
    out.write(text)
