"""What a run produced: immutable result values and the versioned ``results.json`` document.

``results.json`` (schema version 1, documented in ``docs/results.md``) is the contract
between a run and every reporter: ``flakestorm report`` renders any format from it alone.
``to_document`` / ``from_document`` round-trip exactly.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from flakestorm.redaction import Redactor, redact_data
from flakestorm.results.acceptance import Acceptance
from flakestorm.results.field_types import mistyped, non_finite_score
from flakestorm.results.scenarios import CallRecord as CallRecord
from flakestorm.results.scenarios import ScenarioInfo as ScenarioInfo
from flakestorm.results.scenarios import call_records, scenario_from_document
from flakestorm.results.shards import Shard
from flakestorm.results.status import FLAKY_SYMBOL as FLAKY_SYMBOL
from flakestorm.results.status import Status as Status
from flakestorm.results.stream_timing import StreamTiming, timing_from_document
from flakestorm.results.sweeps import SweepInfo, sweep_from_document
from flakestorm.results.usage import Spend

if TYPE_CHECKING:
    from flakestorm.config import ContractInvariant

SCHEMA_VERSION = 2
"""2: phases under one ``phases`` mapping; delivery proof per scenario (``declared``,
``matched``, ``hints``) and the invariant's own verdict on cells that delivery errored."""


@dataclass(frozen=True)
class PromptResult:
    """One invocation of the agent inside a cell, and the invariant's verdict on it."""

    prompt: str
    """The golden prompt or probe."""
    sent: str
    """What the agent actually received (differs under ``memory_poisoning``)."""
    run: int
    """Which repeat this belongs to (0-based)."""
    passed: bool
    reason: str
    output: str | None
    latency_ms: float
    status: int | None = None
    error: str | None = None
    """The agent error kind when the agent did not answer."""
    error_message: str = ""
    similarity: float | None = None
    similarity_backend: str | None = None
    leak_at: int | None = None
    """Where the reply starts showing what a leak invariant forbids (PII, an extracted system
    prompt), when that failed it: public reports cut the reply there."""
    conversation: int | None = None
    """For a conversation's turn (SPEC §12): the index of its golden prompt."""
    turn: int | None = None
    """For a conversation's turn: its number, from 1 (its calls' invocation ends ``.TURN``)."""
    checked: bool = True
    """Whether the invariant was checked on this reply (``turn: last | every | N``)."""
    console: str = ""
    """For an invocation that did not pass, what a python agent printed and logged during it:
    its last lines (the whole is in ``agent.log``); "" otherwise."""
    stream: StreamTiming | None = None
    """How the reply streamed (SPEC §16: ``agent.stream``, a python generator): its figures
    and the first and last events of its timeline; None for a reply that was not streamed."""


@dataclass(frozen=True)
class CellResult:
    """The outcome of one (invariant × scenario) cell."""

    index: int
    invariant_id: str
    scenario: str
    severity: str
    status: Status
    reason: str
    """One line: why the cell passed, failed, errored or was skipped."""
    flaky: bool = False
    runs_passed: int = 0
    runs_total: int = 0
    prompts: tuple[PromptResult, ...] = ()
    faults_fired: tuple[str, ...] = ()
    """Each fault that was actually injected in this cell, e.g.
    ``context_attacks[1] memory_poisoning(append)``, in declaration order
    (:func:`~flakestorm.results.scenarios.declaration_order`)."""
    calls: tuple[CallRecord, ...] = ()
    """The tool and LLM calls the agent made in this cell (chaos scenarios)."""
    checked: Status | None = None
    """What the invariant decided, when the scenario's delivery judgement replaced it with
    ERRORED (a fault was not delivered); None otherwise. Delivery can be judged again from
    this (:func:`flakestorm.chaos.delivery.proof.judge`), e.g. over the shards of a run."""
    checked_reason: str | None = None
    notes: tuple[str, ...] = ()
    """What the phase adds about the cell, one line each, shown with its details (a replayed
    session: how its tool calls diverged from the recorded ones)."""
    spend: Spend | None = None
    """What its calls spent (SPEC §15): calls per target, faulted among them, tokens, cost;
    None when its calls were not recorded per cell."""

    @property
    def id(self) -> str:
        return f"{self.invariant_id}[{self.scenario}]"

    @property
    def symbol(self) -> str:
        return FLAKY_SYMBOL if self.flaky else self.status.symbol


@dataclass(frozen=True)
class MutationResult:
    """One mutation of the mutation phase (SPEC §6): what the agent was sent instead of a
    golden prompt, what it answered, and the verdict. ``index`` is stable for a config and
    seed (shards deal mutations by it); ``sent`` and ``request`` are the input exactly as the
    agent got it, so a failed mutation can be replayed."""

    index: int
    id: str
    """``type#prompt.variant``, e.g. ``prompt_injection#0.1``."""
    type: str
    transform: str
    """The named transform of the type's catalogue (``base64``, ``template_2``, ``llm``)."""
    generator: str
    weight: float
    original: str
    """The golden prompt it mutates."""
    sent: str
    """The prompt the agent was sent (request-level: before any padding the request adds)."""
    request: Mapping[str, Any] | None
    """Request-level types: the request's changes as data (the fields of
    :class:`flakestorm.agents.request.RequestShape` that differ from its defaults)."""
    changes: tuple[str, ...]
    """Request-level types: the request's changes, one line each, for people."""
    status: Status
    reason: str
    failed_invariants: tuple[str, ...] = ()
    severity: str = "medium"
    """The highest severity among the invariants it failed (``medium`` when it failed none)."""
    output: str | None = None
    """The reply's answer (capped), or None when the agent did not answer."""
    http_status: int | None = None
    latency_ms: float = 0.0
    error: str | None = None
    """The agent error kind when the agent did not answer."""
    runs_passed: int = 0
    runs_total: int = 0
    flaky: bool = False
    leak_at: int | None = None
    """Where ``output`` starts showing what a failed leak invariant forbids (PII, an extracted
    system prompt): public reports cut the reply there."""
    run: int = 0
    """Which run (0-based, with ``advanced.repeat``) the reply, verdict and ``output`` shown are
    from: the first that failed or errored, else the first."""
    calls: tuple[CallRecord, ...] = ()
    """The tool and LLM calls the agent made for this mutation, as flakestorm saw them (kept
    when the fault channel is open and each call can be attributed to its mutation); a call's
    ``invocation`` is ``RUN.0`` (of a run judged on an isolated re-run, the re-run's calls).
    What ``replay export`` serves again."""
    turns: tuple[str, ...] = ()
    """Sent as real turns (``multi_turn_attack``, ``context_manipulation`` to an agent with
    sessions): the turns sent before ``sent``, in order, in the same session."""
    isolated: bool = False
    """The verdict comes from an isolated re-run: the agent went down under this mutation
    while other mutations were in flight, so it was sent again on its own once the agent was
    ready again, and judged on that run (the reason quotes the first)."""

    @property
    def request_level(self) -> bool:
        return self.request is not None


@dataclass(frozen=True)
class InvariantInfo:
    """What reports need to know about an invariant."""

    id: str
    type: str
    severity: str
    when: str
    negate: bool
    description: str | None
    line: int
    """Its line in the config file (for annotations)."""

    @classmethod
    def of(cls, invariant: ContractInvariant, line: int) -> InvariantInfo:
        """What reports need of ``invariant``, written at ``line`` of the config."""
        return cls(
            id=invariant.id,
            type=invariant.type.value,
            severity=invariant.severity.value,
            when=invariant.when.value,
            negate=invariant.negate,
            description=invariant.description,
            line=line,
        )


@dataclass(frozen=True)
class PhaseScore:
    """The score of a phase (see :mod:`flakestorm.results.scoring` and each phase's module)."""

    score: float | None
    """0–100, or None when nothing was scored (all skipped or not run)."""
    passed: bool
    """False when a critical cell failed or errored."""
    critical_failures: tuple[str, ...]
    counts: Mapping[str, int]
    """Cells per status and ``flaky``, then what the phase's score counts (``prompts``…)."""
    summary: str | None = None
    """What the score counts, when it is not the cells (``3 of 4 prompts passed``)."""


CELL_COUNTS = frozenset([*(s.value for s in Status), "flaky"])
"""The keys of :attr:`PhaseScore.counts` that count cells; any other key is the phase's own."""


@dataclass(frozen=True)
class PhaseOutcome:
    """A finished (or stopped) phase: a matrix of cells (rows = invariants, columns =
    scenarios) and its score. Reports render every phase from this alone."""

    phase: str
    """The phase's name (``contract``, ``chaos``): its key in :attr:`RunResult.phases`."""
    name: str
    """What the phase ran: the contract's name, or the phase's name when it has none."""
    invariants: tuple[InvariantInfo, ...]
    scenarios: tuple[ScenarioInfo, ...]
    cells: Sequence[CellResult]
    """In index order: a tuple, or a run's cells read back from disk as they are used
    (:class:`flakestorm.results.spool.Spooled`, already redacted)."""
    score: PhaseScore
    warnings: tuple[str, ...] = ()
    mutations: Sequence[MutationResult] = ()
    """The mutation phase's unit of work, instead of cells (empty for other phases): in index
    order, a tuple or read back from disk as they are used (as :attr:`cells`)."""
    rows: str = "invariant"
    """What the matrix's rows (``invariants``) are: ``invariant``, or ``session`` (replay)."""
    sweeps: tuple[SweepInfo, ...] = ()
    """The phase's swept scenarios, with their breaking points (the contract phase's)."""

    @property
    def label(self) -> str:
        """``contract Finance Agent Contract``, or ``chaos`` when the name is the phase's."""
        return self.phase if self.name == self.phase else f"{self.phase} {self.name}"

    @property
    def unit(self) -> str:
        """What :attr:`PhaseScore.critical_failures` name: ``mutation``, ``session`` (replay)
        or ``cell``."""
        if self.mutations and not self.cells:
            return "mutation"
        return "session" if self.rows == "session" else "cell"


@dataclass(frozen=True)
class Overall:
    score: float | None
    passed: bool
    min_score: float
    weights: Mapping[str, float]
    phases_ran: tuple[str, ...]
    reasons: tuple[str, ...]
    """Why the gate failed (empty when it passed)."""


@dataclass(frozen=True)
class RunResult:
    """Everything one run produced: what ``results.json`` holds."""

    flakestorm_version: str
    config_path: str
    config_digest: str
    seed: int
    started_at: str
    duration_s: float
    complete: bool
    stop_reason: str | None
    """Why the run stopped early (``interrupted``, ``max_invocations``), None when complete."""
    invocations: int
    phases: Mapping[str, PhaseOutcome]
    """Every phase that ran, by name, in report order."""
    overall: Overall
    exit_code: int
    warnings: tuple[str, ...] = field(default=())
    shard: Shard | None = None
    """Which part of the run this is (``--shard K/N``); None for a whole run. A shard's
    ``exit_code`` is its own part's: ``flakestorm merge`` gives the run's."""
    config: Mapping[str, Any] | None = None
    """A shard's resolved config (:func:`flakestorm.results.shards.config_document`, secrets as
    ``***``): what ``config_digest`` is the digest of, and what the merge scores with."""
    step: Mapping[str, Any] | None = None
    """How the action's step judged the run (its ``fail-on`` rule and the baseline delta):
    :mod:`flakestorm.baseline.judgement` reads it; None outside the action. Every report
    states the step's verdict when it is set."""
    error: str | None = None
    """Why the run could not start (the agent never became ready, the proxy is unreachable),
    in full: its items are errored with the short cause (``stop_reason``); None otherwise."""
    accepted: tuple[Acceptance, ...] | None = None
    """The config's ``accepted:`` entries as this run judged them (SPEC §14); None when it has
    none."""
    judges: tuple[str, ...] | None = None
    """The health of each ``llm_judge`` judge the run asked, one line each (verdicts, cached,
    retried, unusable, calibration); None when no judge was asked."""
    plan: Mapping[str, Any] | None = None
    """The plan the run executed (SPEC §13), as ``validate --json`` prints it: the channel,
    sessions, reset, and per phase of the command its cells, invocations, whether the count
    is exact, and how its scenarios ran and why (``ci``: the total too); None in a file
    written before runs recorded it."""


# --------------------------------------------------------------------------- JSON


def _acceptances(docs: Any) -> tuple[Acceptance, ...] | None:
    """``accepted`` of a results.json read back (None when the run's config had none)."""
    if docs is None:
        return None
    return tuple(Acceptance.from_document(d) for d in docs)


def to_document(result: RunResult) -> dict[str, Any]:
    """The ``results.json`` document for ``result``."""
    doc = {"schema_version": SCHEMA_VERSION, **_plain(result)}
    for key in OPTIONAL:  # a run outside the action has none: its document is unchanged
        if doc.get(key) is None:
            doc.pop(key, None)
    if result.shard is not None:
        doc["shard"] = str(result.shard)
    return doc


OPTIONAL = ("shard", "config", "step", "error", "accepted", "judges", "plan")
"""Top-level keys written only when set."""


_ATOMS = frozenset([str, int, float, bool, type(None)])
"""Types a document keeps as they are: checked first, by type, as they are most values (a
run's documents are made item by item as it streams them)."""


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is tuple or kind is list:
        return [_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def cell_document(cell: CellResult) -> dict[str, Any]:
    """``cell`` as it is in ``results.json``."""
    document: dict[str, Any] = _plain(cell)
    return document


def cell_from_document(d: Mapping[str, Any]) -> CellResult:
    """A cell of ``results.json`` read back."""
    return _cell(d)


def mutation_document(mutation: MutationResult) -> dict[str, Any]:
    """``mutation`` as it is in ``results.json``."""
    document: dict[str, Any] = _plain(mutation)
    return document


def mutation_from_document(d: Mapping[str, Any]) -> MutationResult:
    """A mutation of ``results.json`` read back."""
    return _mutation(d)


STREAMED: Mapping[str, Callable[[Any], dict[str, Any]]] = {
    "cells": cell_document,
    "mutations": mutation_document,
}
"""The fields of a :class:`PhaseOutcome` that may be read back from disk as they are used
(:mod:`flakestorm.results.spool`; not tuples then), and how each of their items is written."""


def streamed(outcome: PhaseOutcome) -> dict[str, Sequence[Any]]:
    """The fields of ``outcome`` read back from disk (already redacted when written)."""
    return {k: v for k in STREAMED if not isinstance(v := getattr(outcome, k), tuple)}


def with_streamed(outcome: PhaseOutcome, fields: Mapping[str, Sequence[Any]]) -> PhaseOutcome:
    """``outcome`` with the given fields of :data:`STREAMED` replaced (``()``: left out)."""
    return replace(
        outcome,
        cells=fields.get("cells", outcome.cells),
        mutations=fields.get("mutations", outcome.mutations),
    )


def redact(result: RunResult, secrets: Iterable[str]) -> RunResult:
    """``result`` with every secret replaced by ``***`` in every string, agent output included.

    The secrets are the values the config took from the environment: ``::add-mask::`` hides
    them in the job log, but not in the reports, the job summary or the pull request comment,
    which are all rendered from the result.
    """
    redactor = Redactor(secrets)
    if not redactor:
        return result
    # items streamed to disk were redacted as they were written: keep them as they are
    on_disk = {name: streamed(o) for name, o in result.phases.items()}
    if any(on_disk.values()):
        bare = {n: with_streamed(o, {k: () for k in on_disk[n]}) for n, o in result.phases.items()}
        done = redact(replace(result, phases=bare), secrets)
        return replace(
            done, phases={n: with_streamed(o, on_disk[n]) for n, o in done.phases.items()}
        )

    # the run's own values: their types are the engine's, not checked as a file's would be
    document = redact_data(to_document(result), redactor, keys=False)
    return from_document(document, check_types=False)


class ResultsError(ValueError):
    """A results document that this version cannot read."""


def from_document(doc: Mapping[str, Any], *, check_types: bool = True) -> RunResult:
    """Read a ``results.json`` document back (raises :class:`ResultsError` when unreadable,
    a field of the wrong type included unless ``check_types`` is off)."""
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"results schema_version {version!r} is not supported (this flakestorm reads "
            f"{SCHEMA_VERSION})"
        )
    try:
        result = RunResult(
            flakestorm_version=doc["flakestorm_version"],
            config_path=doc["config_path"],
            config_digest=doc["config_digest"],
            seed=doc["seed"],
            started_at=doc["started_at"],
            duration_s=doc["duration_s"],
            complete=doc["complete"],
            stop_reason=doc["stop_reason"],
            invocations=doc["invocations"],
            phases={name: _phase(d) for name, d in doc["phases"].items()},
            overall=Overall(
                **{**doc["overall"], **_tuples(doc["overall"], "phases_ran", "reasons")}
            ),
            exit_code=doc["exit_code"],
            warnings=tuple(doc.get("warnings", ())),
            shard=None if doc.get("shard") is None else Shard.parse(doc["shard"]),
            config=doc.get("config"),
            step=doc.get("step"),
            error=doc.get("error"),
            accepted=_acceptances(doc.get("accepted")),
            judges=None if doc.get("judges") is None else tuple(doc["judges"]),
            plan=doc.get("plan"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"results document is malformed: {exc!r}") from None
    problem = mistyped(result) if check_types else None
    if problem is not None:
        raise ResultsError(f"results document is malformed: {problem}")
    not_finite = non_finite_score(result) if check_types else ""
    if not_finite:  # no run writes one: never drawn, compared or taken as a baseline
        raise ResultsError(not_finite)
    return result


def _tuples(d: Mapping[str, Any], *keys: str) -> dict[str, tuple[Any, ...]]:
    return {k: tuple(d[k]) for k in keys}


def _phase(d: Mapping[str, Any]) -> PhaseOutcome:
    return PhaseOutcome(
        phase=d["phase"],
        name=d["name"],
        invariants=tuple(InvariantInfo(**i) for i in d["invariants"]),
        scenarios=tuple(scenario_from_document(s) for s in d["scenarios"]),
        cells=tuple(_cell(c) for c in d["cells"]),
        score=PhaseScore(
            **{
                **d["score"],
                "critical_failures": tuple(d["score"]["critical_failures"]),
                "counts": dict(d["score"]["counts"]),
            }
        ),
        warnings=tuple(d.get("warnings", ())),
        mutations=tuple(_mutation(m) for m in d.get("mutations", ())),
        rows=d.get("rows", "invariant"),
        sweeps=tuple(sweep_from_document(w) for w in d.get("sweeps", ())),
    )


def _mutation(d: Mapping[str, Any]) -> MutationResult:
    return MutationResult(
        **{
            **d,
            "status": Status(d["status"]),
            "changes": tuple(d["changes"]),
            "failed_invariants": tuple(d["failed_invariants"]),
            "turns": tuple(d.get("turns", ())),
            "request": None if d["request"] is None else dict(d["request"]),
            "calls": call_records(d.get("calls", ())),
        }
    )


_STATUSES = {status.value: status for status in Status}


def _status(value: Any) -> Status:
    """``Status(value)``, looked up (a cell is read back each time a report reads it)."""
    status = _STATUSES.get(value) if type(value) is str else None
    return Status(value) if status is None else status


def _maker(kind: type[Any]) -> Callable[[Mapping[str, Any]], Any]:
    """``kind(**values)`` for a frozen dataclass without ``__post_init__`` or default
    factories, made without its ``__init__`` (which sets each field through
    ``object.__setattr__``; a large file's cells are read back several times) when ``values``
    has each field it needs and no other: else the constructor, which raises as it does."""
    fields = dataclasses.fields(kind)
    assert not hasattr(kind, "__post_init__")
    assert all(f.default_factory is dataclasses.MISSING for f in fields)
    names = frozenset(f.name for f in fields)
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING)
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    new = object.__new__

    def make(values: Mapping[str, Any]) -> Any:
        if values.keys() <= names and required <= values.keys():
            made = new(kind)
            state = made.__dict__
            state.update(defaults)
            state.update(values)
            return made
        return kind(**values)

    return make


_prompt_of = _maker(PromptResult)
_cell_of = _maker(CellResult)


def _prompt(d: Mapping[str, Any]) -> PromptResult:
    stream = d.get("stream")
    if stream is not None:
        d = {**d, "stream": timing_from_document(stream)}
    prompt: PromptResult = _prompt_of(d)
    return prompt


def _cell(d: Mapping[str, Any]) -> CellResult:
    fields = dict(d)
    checked = d.get("checked")
    fields["status"] = _status(d["status"])
    fields["checked"] = None if checked is None else _status(checked)
    fields["prompts"] = tuple([_prompt(p) for p in d["prompts"]])
    fields["faults_fired"] = tuple(d["faults_fired"])
    fields["notes"] = tuple(d.get("notes", ()))
    calls = d.get("calls", ())
    fields["calls"] = () if calls == [] or calls == () else call_records(calls)
    spend = d.get("spend")
    fields["spend"] = None if spend is None else Spend.from_document(spend)
    cell: CellResult = _cell_of(fields)
    return cell
