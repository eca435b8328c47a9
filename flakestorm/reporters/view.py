"""What the reports share: scores, verdicts and marks as text, the phases and cells to show,
faults not delivered, calls and notes. Every reporter renders these the same way; untrusted
text in them still goes through :mod:`flakestorm.reporters.escape` in each format."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flakestorm.baseline.delta import Change, Delta, FailOn
from flakestorm.baseline.judgement import judgement_of
from flakestorm.errors import ExitCode
from flakestorm.reporters.errored import errored_groups
from flakestorm.reporters.escape import text
from flakestorm.results.acceptance import reported
from flakestorm.results.model import (
    CELL_COUNTS,
    FLAKY_SYMBOL,
    CallRecord,
    CellResult,
    PhaseOutcome,
    RunResult,
    ScenarioInfo,
    Status,
)
from flakestorm.results.spool import Mapped
from flakestorm.results.tally import CellMark, tally_of

LEGEND = (
    "✅ passed · ❌ failed · ⚠️ flaky (repeats disagreed; ❌⚠️ = flaky and failed) · "
    "💥 errored (flakestorm could not carry the cell out) · ➖ skipped (`when` does not apply) · "
    "⏸ not run (the run stopped first)"
)
UNDELIVERED_LEGEND = (
    "🚫 next to a scenario: a declared fault was not delivered (no matching call reached "
    "flakestorm, or the fault could not act on those that did), so its cells are errored"
)
"""Added to the legend of a matrix with an undelivered scenario."""


def score_text(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


class Verdict(str, enum.Enum):
    """What a run's exit code says (SPEC §8): the verdict line always matches it."""

    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"

    @classmethod
    def of(cls, exit_code: int) -> Verdict:
        """0 passes, 1 fails the gate, anything else (3) is an ERROR."""
        if exit_code == ExitCode.PASSED:
            return cls.PASS
        return cls.FAIL if exit_code == ExitCode.GATE_FAILED else cls.ERROR

    @property
    def mark(self) -> str:
        return _VERDICT_MARKS[self]


_VERDICT_MARKS = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.ERROR: "💥"}


@dataclass(frozen=True)
class Rule:
    """The ``fail-on`` rule that gave a step its verdict instead of the run's own gate
    (``fail-on: regression``): what it found, and what the run's own gate says."""

    fail_on: FailOn
    new_failures: int | None
    """Cells newly failing against the baseline; None: nothing was compared."""
    against: str
    """What was compared with (``main @ abc1234``; untrusted: a branch name, escape it)."""
    own: Verdict
    """The run's own gate (``fail-on: any``)."""
    uncounted: tuple[str, ...] = ()
    """The failures the rule did not count (``2 known failures``, ``1 within noise``)."""

    def finding(self, clean: Callable[[str], str]) -> str:
        """``no new failures vs main @ abc1234`` (``clean`` escapes the baseline's name)."""
        if self.new_failures is None:
            return "no baseline compared, so no failure is known to be new"
        if not self.new_failures:
            return f"no new failures vs {clean(self.against)}"
        return f"{_count(self.new_failures, 'new failure')} vs {clean(self.against)}"


@dataclass(frozen=True)
class RunVerdict:
    """The verdict line of a run, or of the step that ran it: ``PASS`` (0), ``FAIL`` (1) or
    ``ERROR`` (3, with the infrastructure problems named in ``causes``). ``rule``: the
    ``fail-on`` rule that decided it, when that is not the run's own gate."""

    verdict: Verdict
    code: int
    causes: tuple[str, ...] = ()
    """Why the run is an ERROR (untrusted: they quote cell reasons; escape each)."""
    rule: Rule | None = None

    def __str__(self) -> str:
        return f"{self.verdict.mark} {self.word}"

    @property
    def word(self) -> str:
        return self.verdict.value

    @property
    def error(self) -> bool:
        return self.verdict is Verdict.ERROR

    @property
    def lead(self) -> str:
        """What an ERROR's causes are, by its exit code: ``a config error`` (2: the baseline
        file is unreadable), else ``flakestorm could not carry the run out`` (3)."""
        if self.code == ExitCode.CONFIG_ERROR:
            return "a config error"
        return "flakestorm could not carry the run out"

    def note(self, clean: Callable[[str], str]) -> str:
        """What follows the verdict when a rule decided it: `` — fail-on: regression: no new
        failures vs main @ abc1234 (the run's own gate: FAIL, 2 known failures)``; the run's
        own gate is named when it says otherwise. Empty without a rule; ``clean`` escapes the
        baseline's name for the format."""
        rule = self.rule
        if rule is None:
            return ""
        note = f" — fail-on: {rule.fail_on.value}: {rule.finding(clean)}"
        if rule.own is not self.verdict:
            note += f" (the run's own gate: {', '.join((rule.own.value, *rule.uncounted))})"
        return note

    def heading(self, clean: Callable[[str], str]) -> str:
        """``✅ PASS``, with the :meth:`note` of the rule that decided it."""
        return f"{self}{self.note(clean)}"


INTERRUPTED_CAUSE = "the run was interrupted: the results are partial"
MISREAD_CAUSE = (
    "agent.response_path is not in the agent's first reply: the config reads the reply wrong "
    "(the run stopped there)"
)


def run_verdict(result: RunResult) -> RunVerdict:
    """The verdict every report of ``result`` states: the step's that judged it, when it
    carries one (:attr:`RunResult.step`: the action's ``fail-on`` rule and baseline delta, so
    the report directory says what the check said), else the run's own, read from its exit
    code (never from the gate alone: a run whose gate passed but that exits 3 is an ERROR)."""
    judged = judgement_of(result)
    if judged is None:
        return step_verdict(result)
    return step_verdict(result, judged.fail_on, judged.delta, judged.against, judged.error)


def step_verdict(
    result: RunResult,
    fail_on: FailOn = FailOn.ANY,
    delta: Delta | None = None,
    against: str = "the baseline",
    baseline_error: str | None = None,
) -> RunVerdict:
    """The verdict of the step that ran ``result`` under ``fail_on`` (``delta``: against the
    baseline ``against``; None when nothing was compared): what its exit code,
    :meth:`FailOn.exit_code`, says. Every verdict a user sees comes from here: the run's own
    (``fail-on: any``) is :func:`run_verdict`; under ``fail-on: regression`` it carries the
    :class:`Rule` and the run's own gate. An ERROR stays an ERROR, with its causes.
    ``baseline_error``: why the baseline file could not be read, a config error (exit 2,
    an ERROR with that cause) unless the run's own exit code is an error already."""
    code = fail_on.exit_code(result, delta)
    if baseline_error is not None and code in (ExitCode.PASSED, ExitCode.GATE_FAILED):
        return RunVerdict(Verdict.ERROR, int(ExitCode.CONFIG_ERROR), (baseline_error,))
    verdict = Verdict.of(code)
    if verdict is Verdict.ERROR:
        return RunVerdict(verdict, code, error_causes(result))
    if fail_on is FailOn.ANY:
        return RunVerdict(verdict, code)
    rule = Rule(
        fail_on=fail_on,
        new_failures=None if delta is None else delta.new_failures,
        against=against,
        own=Verdict.of(result.exit_code),
        uncounted=() if delta is None else _uncounted(delta),
    )
    return RunVerdict(verdict, code, rule=rule)


def _uncounted(delta: Delta) -> tuple[str, ...]:
    """The failing cells a delta does not count as new: known (still failing), within noise,
    and new cells that fail."""
    failing = (Status.FAILED, Status.ERRORED)
    known = len(delta.of(Change.STILL_FAILING))
    noise = len(delta.of(Change.WITHIN_NOISE))
    fresh = sum(1 for c in delta.of(Change.NEW) if c.head in failing)
    parts = [_count(known, "known failure")] if known else []
    if noise:
        parts.append(f"{noise} within noise")
    if fresh:
        parts.append(_count(fresh, "failing new cell"))
    return tuple(parts)


def error_causes(result: RunResult) -> tuple[str, ...]:
    """What made a run exit 3: an interruption, faults not delivered, cells or mutations
    errored by the harness (a failed reset, an unreachable proxy, a similarity backend
    outage)."""
    causes = []
    if result.stop_reason == "interrupted":
        causes.append(INTERRUPTED_CAUSE)
    elif result.stop_reason == "response_path":
        causes.append(MISREAD_CAUSE)
    faults = undelivered(result)
    if faults:
        scenarios = len({(f.outcome.phase, f.scenario) for f in faults})
        their = "its" if scenarios == 1 else "their"
        causes.append(
            f"{_count(len(faults), 'fault')} not delivered "
            f"(in {_count(scenarios, 'scenario')}: {their} cells are errored)"
        )
    harness = [
        cell
        for outcome in phases(result)
        for cell in outcome.cells
        if cell.status is Status.ERRORED
        and not any(s.name == cell.scenario and s.undelivered for s in outcome.scenarios)
    ]
    if harness:
        causes.append(f"{_count(len(harness), 'cell')} errored: {harness[0].reason}")
    # a reason many mutations share (the agent did not come back after one) is given once
    by_reason: dict[str, int] = {}
    for outcome in phases(result):
        for group in errored_groups(outcome):
            by_reason[group.reason] = by_reason.get(group.reason, 0) + len(group.positions)
    shared = [reason for reason, n in by_reason.items() if n > 1]
    for reason in shared:
        causes.append(f"{_count(by_reason[reason], 'mutation')} errored: {reason}")
    alone = [reason for reason, n in by_reason.items() if n == 1]
    if alone:
        causes.append(f"{_count(len(alone), 'mutation')} errored: {alone[0]}")
    if not causes and result.stop_reason not in (None, "max_invocations"):
        # the run could not start (the agent never became ready, the proxy is unreachable) and
        # had nothing to error: the cause, its detail in the run's first warning
        causes.append(f"{result.stop_reason}: nothing was sent (the first warning says why)")
    if not causes:
        causes.append(f"an infrastructure error (exit {result.exit_code})")
    return tuple(causes)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def error_line(result: RunResult, limit: int = 300) -> str | None:
    """For an ERROR: ``**Exit 3: flakestorm could not carry the run out:** cause; cause`` as
    inline markdown (the causes escaped), else None."""
    shown = run_verdict(result)
    if not shown.error:
        return None
    causes = "; ".join(text(cause, limit) for cause in shown.causes)
    return f"**Exit {shown.code}: {shown.lead}:** {causes}"


def cell_mark(cell: CellResult | CellMark) -> str:
    """The matrix symbol of a cell (a flaky failure shows both marks)."""
    if not cell.flaky:
        return cell.status.symbol
    if cell.status is not Status.PASSED:
        return cell.status.symbol + FLAKY_SYMBOL
    return FLAKY_SYMBOL


def cell_marks(outcome: PhaseOutcome) -> Sequence[CellMark]:
    """What a matrix shows of each of the phase's cells, from its tally (a spooled phase's
    cells are not read again)."""
    return list(tally_of(outcome.cells).cells.values())


def bad_cells(outcome: PhaseOutcome) -> Sequence[CellResult]:
    """Failed and errored cells, critical first, then in matrix order: ordered from the
    phase's tally (their ids and severities), each read as it is used, so a list that stops
    at its size limit reads only what it shows (a spooled phase's from disk)."""
    return Mapped([key for _, key in _bad_keys(outcome)], cell_reader(outcome.cells))


def _bad_keys(outcome: PhaseOutcome) -> list[tuple[bool, int]]:
    """(not critical, key) of each of :func:`bad_cells` in the phase's tally (a spooled
    phase's indexes, a tuple's positions), critical first."""
    missed = tally_of(outcome.cells).missed
    return sorted(("critical" not in keys, key) for key, (_, keys) in missed.items())


def cell_reader(cells: Sequence[CellResult]) -> Callable[[int], CellResult]:
    """How a tally key of ``cells`` reads its cell: by index when spooled, else by position."""
    at: Callable[[int], CellResult] | None = getattr(cells, "at", None)
    return at if at is not None and hasattr(cells, "tally") else cells.__getitem__


def phases(result: RunResult) -> list[PhaseOutcome]:
    """Every phase that ran, in report order."""
    return list(result.phases.values())


def all_bad_cells(result: RunResult) -> Sequence[CellResult]:
    """Every failed or errored cell: critical first, then phase order (each read as it is
    used, as :func:`bad_cells`)."""
    keyed: list[tuple[bool, int, int]] = []  # (not critical, phase, key)
    readers = []
    for n, outcome in enumerate(phases(result)):
        keyed.extend((later, n, key) for later, key in _bad_keys(outcome))
        readers.append(cell_reader(outcome.cells))
    keyed.sort(key=lambda k: k[0])  # stable: phase order, then each phase's own
    return Mapped(keyed, lambda k: readers[k[1]](k[2]))


def label_text(outcome: PhaseOutcome, limit: int, title: bool = False) -> str:
    """:attr:`~flakestorm.results.model.PhaseOutcome.label` as inline markdown (``title``: as a
    heading, ``Contract …``)."""
    phase = outcome.phase[:1].upper() + outcome.phase[1:] if title else outcome.phase
    if outcome.name == outcome.phase:
        return text(phase)
    return f"{text(phase)} {text(outcome.name, limit)}"


def phase_state(outcome: PhaseOutcome) -> str:
    """What a phase's score means: ``passed``/``failed``, or what its score counts; of a
    phase in which nothing ran to a verdict (its score n/a), that, and of one a stopped run
    did not finish, how much it left: never "passed" of either."""
    if outcome.score.score is None:
        return f"no verdict: no {outcome.unit} ran to one"
    summary = outcome.score.summary
    left = outcome.score.counts.get(Status.NOT_RUN.value, 0)
    if summary is None and outcome.score.passed and left:
        return f"incomplete: {left} {outcome.unit}{'s' if left != 1 else ''} not run"
    if summary is None:
        return "passed" if outcome.score.passed else "failed"
    return summary if outcome.score.passed else f"{summary}; a critical {outcome.unit} failed"


def phase_counts(outcome: PhaseOutcome) -> dict[str, int]:
    """The phase's own counts (what its score counts, e.g. ``prompts``), not the cells'."""
    return {k: v for k, v in outcome.score.counts.items() if k not in CELL_COUNTS}


def cell_counts(outcome: PhaseOutcome) -> dict[str, int]:
    """Cells per status, and ``flaky``."""
    return {k: v for k, v in outcome.score.counts.items() if k in CELL_COUNTS}


@dataclass(frozen=True)
class Undelivered:
    """One declared fault that was not delivered (SPEC §4, §10), with why."""

    outcome: PhaseOutcome
    scenario: str
    fault: str
    hint: str
    """Why (:meth:`~flakestorm.results.model.ScenarioInfo.why`): when no call matched the fault,
    what is probably mis-wired, or empty."""

    @property
    def shown_scenario(self) -> str | None:
        """The scenario, when the phase has scenarios of its own (a scenario named after its
        phase is the phase's only one, and reports say "the chaos phase" instead)."""
        return None if self.scenario == self.outcome.phase else self.scenario


def undelivered(result: RunResult) -> list[Undelivered]:
    """Every fault that was not delivered, phase by phase, scenario by scenario."""
    return [
        Undelivered(outcome, info.name, fault, info.why(fault))
        for outcome in phases(result)
        for info in outcome.scenarios
        for fault in info.undelivered
    ]


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
    """``tool orders_api``, ``llm``, ``tool booking (SendMessage -> TASK_STATE_FAILED)``: what a
    call was to, and what an A2A call asked and was told (untrusted: escape it)."""
    target = call.target if call.tool is None else f"{call.target} {call.tool}"
    return f"{target} ({call.detail})" if call.detail else target


def call_status(call: CallRecord) -> str:
    """What the agent received: an HTTP status, or ``no reply`` (trusted text)."""
    return "no reply" if call.status is None else str(call.status)


def scenario_notes(info: ScenarioInfo) -> list[str]:
    """Notes on how a scenario ran (they quote fault labels: escape each note)."""
    notes = []
    if info.undelivered:
        notes.append("not delivered: " + "; ".join(info.undelivered))
    if info.serial:
        why = "; ".join(info.order) or "its faults depend on call order"
        # said of every serial scenario: true whether the agent's calls carried no attribution
        # or none reached flakestorm before the matrix (nothing is known of it then)
        notes.append(f"cells ran one at a time (no call showed forwarded attribution; {why})")
    if info.unattributed:
        notes.append(unattributed_title(info))
    return notes


def unattributed_title(info: ScenarioInfo, unit: str = "cell") -> str:
    """What a scenario's calls not attributed to a ``unit`` (``cell``, ``mutation``) are."""
    n = info.unattributed
    calls = f"{n} call{'s' if n != 1 else ''}"
    return (
        f"{calls} not attributed to a {unit} ({unit}s ran side by side; no attribution forwarded)"
    )


def unattributed_heading(outcome: PhaseOutcome, info: ScenarioInfo) -> str:
    """``scenario down: 32 calls not attributed…`` (``the mutation phase: …`` for it);
    quotes the scenario's name: escape it."""
    if outcome.unit == "mutation":
        return f"the mutation phase: {unattributed_title(info, 'mutation')}"
    return f"scenario {info.name}: {unattributed_title(info)}"


def unattributed(outcome: PhaseOutcome) -> list[ScenarioInfo]:
    """The scenarios of ``outcome`` with calls not attributed to a cell."""
    return [info for info in outcome.scenarios if info.unattributed]


def faults_text(cell: CellResult, scenario: ScenarioInfo | None = None) -> str:
    """The faults that fired in ``cell``; for a cell of a scenario whose calls were reported
    per scenario (``scenario``: its cells ran side by side, nothing forwarded), what its calls
    met, not a false "none"."""
    if cell.faults_fired:
        return ", ".join(text(f, 120) for f in cell.faults_fired)
    if scenario is not None and scenario.unattributed and not cell.calls:
        return text(per_scenario(scenario))
    return "none"


def per_scenario(info: ScenarioInfo) -> str:
    """``per scenario (its cells ran side by side): 6 calls, all faulted``."""
    n, kept = info.unattributed, info.unattributed_calls
    fired = sum(1 for call in kept if call.fired)
    if len(kept) < n:
        met = f"{fired} of the first {len(kept)} faulted"
    elif fired == n:
        met = "all faulted"
    else:
        met = f"{fired} faulted" if fired else "none faulted"
    return f"per scenario (its cells ran side by side): {n} call{'s' if n != 1 else ''}, {met}"


def scenarios_per_scenario(result: RunResult) -> dict[str, ScenarioInfo]:
    """The scenarios whose calls were reported per scenario, by name."""
    return {
        info.name: info
        for outcome in phases(result)
        for info in outcome.scenarios
        if info.unattributed
    }


ACCEPTED_TITLE = "Accepted failures (`accepted:`):"


def accepted_lines(result: RunResult) -> list[str]:
    """The config's ``accepted:`` entries as this run judged them, one line each: accepted
    until a date, expired, or passing (untrusted: they quote the config; escape each)."""
    return [a.line() for a in reported(result.accepted)]


def judge_lines(result: RunResult) -> list[str]:
    """The health line of each ``llm_judge`` judge the run asked (none when it asked none)."""
    return list(result.judges or ())


def all_warnings(result: RunResult) -> list[str]:
    """Why the run could not start (when it could not), config warnings, then each phase's run
    warnings (each once)."""
    warnings = [result.error] if result.error else []
    warnings += result.warnings
    for outcome in phases(result):
        warnings.extend(outcome.warnings)
    return list(dict.fromkeys(warnings))


UNDELIVERED_TITLE = (
    "**🚫 Faults not delivered:** no matching call reached flakestorm, or the fault could not "
    "act on those that did (it could not be applied, or a fault answered in place of the tool "
    "or LLM), so these scenarios' cells are errored, not passed."
)


def undelivered_items(result: RunResult, limit: int, hint_chars: int = 400) -> list[str]:
    """The undelivered faults as markdown list items (``- where: fault — hint``), at most
    ``limit`` of them and a count of the rest."""
    faults = undelivered(result)
    out = []
    for fault in faults[:limit]:
        label = label_text(fault.outcome, 100)
        where = (
            f"the {label} phase"
            if fault.shown_scenario is None
            else f"{label}, scenario **{text(fault.scenario, 100)}**"
        )
        line = f"- {where}: {text(fault.fault, 200)}"
        out.append(line + (f" — {text(fault.hint, hint_chars)}" if fault.hint else ""))
    if len(faults) > limit:
        out.append(f"- … and {len(faults) - limit} more")
    return out
