"""The shards of one run put back together into the run's result (SPEC §9).

:func:`read_shards` finds the shards' ``results.json`` files; :func:`merge` checks that they
belong together — one config digest, one seed, one flakestorm version, one gate, shards
``1..N`` each exactly once — and raises :class:`MergeError` (exit 2) naming the problem
otherwise. It then rebuilds each phase from the shards' parts:

- the cells (and mutations) of every shard, by their stable index (each ran in exactly one
  shard);
- each scenario's delivery proof, over all shards: the declared faults, the faults *some*
  shard's calls matched, those some shard could not apply, and the calls whose result a tool
  fault replaced (summed); delivery is judged again from it (:func:`~flakestorm.chaos.delivery.
  judge`), so a fault only one shard's calls matched is delivered, and the cells another shard
  errored for it get their own verdicts back;
- the phase's score, by the phase itself (``Phase.score``, with the shards' resolved config),
  and the overall score and gate with :func:`~flakestorm.scoring.score_run`.

The merged result is what an unsharded run with the same seed gives, timings and the
invocation count (each shard checks the agent before its cells) aside.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from flakestorm.chaos.delivery import judge
from flakestorm.config import Config, OutputFormat
from flakestorm.errors import UsageError
from flakestorm.phases.registry import PHASES
from flakestorm.results import (
    CellResult,
    InvariantInfo,
    MutationResult,
    PhaseOutcome,
    ResultsError,
    RunResult,
    ScenarioInfo,
    from_document,
)
from flakestorm.scenario_results import MAX_UNATTRIBUTED_CALLS
from flakestorm.scoring import score_run
from flakestorm.shards import digest_of
from flakestorm.sweeps import judged as sweeps_judged
from flakestorm.validation import InvalidData, validate_model

RESULTS_FILE = "results.json"


class MergeError(UsageError):
    """Shards that cannot be merged: what is missing, foreign or unreadable (exit 2)."""


@dataclasses.dataclass(frozen=True)
class ShardFile:
    """A shard's result and the file it came from."""

    path: Path
    result: RunResult

    @property
    def name(self) -> str:
        return f"{self.path} (shard {self.result.shard})"


def find_results(paths: Iterable[Path]) -> list[Path]:
    """The ``results.json`` files of ``paths``: a file as given, a directory searched
    (recursively, as downloaded CI artifacts nest them), in path order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob(RESULTS_FILE)))
        elif path.is_file():
            found.append(path)
        else:
            raise MergeError(f"{path}: no such file or directory")
    if not found:
        shown = ", ".join(str(p) for p in paths) or "(no paths)"
        raise MergeError(f"no {RESULTS_FILE} found in {shown}: give the shards' results")
    return found


def read_shards(paths: Iterable[Path]) -> list[ShardFile]:
    """Every shard result under ``paths`` (see :func:`find_results`)."""
    shards = []
    for path in find_results(paths):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise MergeError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except ValueError as exc:  # JSON and UTF-8 errors alike
            raise MergeError(f"{path}: not a results.json ({exc})") from None
        if not isinstance(document, dict):
            raise MergeError(f"{path}: not a results document (expected a JSON object)")
        try:
            result = from_document(document)
        except ResultsError as exc:
            raise MergeError(f"{path}: {exc}") from None
        if result.shard is None:
            raise MergeError(f"{path}: a whole run, not a shard (run each part with --shard K/N)")
        shards.append(ShardFile(path, result))
    return shards


def check_together(shards: Sequence[ShardFile]) -> None:
    """Raise :class:`MergeError` unless ``shards`` are shards 1..N of one run."""
    first = shards[0]
    head = first.result
    assert head.shard is not None
    for shard in shards:
        result = shard.result
        if result.config is None or digest_of(result.config) != result.config_digest:
            raise MergeError(
                f"{shard.name}: its recorded config does not match its config digest "
                "(the file was edited, or written by another tool)"
            )
        checks = (
            ("flakestorm version", head.flakestorm_version, result.flakestorm_version),
            ("seed", head.seed, result.seed),
            ("config digest", head.config_digest, result.config_digest),
            ("shard count", head.shard.total, result.shard.total if result.shard else None),
            ("min_score", head.overall.min_score, result.overall.min_score),
            ("phases", list(head.phases), list(result.phases)),
        )
        for what, expected, got in checks:
            if expected != got:
                raise MergeError(
                    f"{shard.name} is not a shard of the same run as {first.name}: its {what} "
                    f"is {_short(got)}, not {_short(expected)} (merge the shards of one run: "
                    "same config, seed and flakestorm version, and the same --shard N)"
                )
    seen: dict[int, ShardFile] = {}
    for shard in shards:
        assert shard.result.shard is not None
        index = shard.result.shard.index
        if index in seen:
            raise MergeError(
                f"shard {shard.result.shard} is given twice: {seen[index].path} and {shard.path}"
            )
        seen[index] = shard
    total = head.shard.total
    missing = [f"{k}/{total}" for k in range(1, total + 1) if k not in seen]
    if missing:
        have = ", ".join(f"{k}/{total}" for k in sorted(seen))
        raise MergeError(
            f"shard(s) {', '.join(missing)} missing (have {have}): every shard's results.json "
            "is needed for the run's verdict"
        )


def merge(shards: Sequence[ShardFile], min_score: float | None = None) -> RunResult:
    """The run's result from its shards (see the module docstring); ``min_score`` replaces
    the shards' own (``--min-score`` on the merge: the gate is the merge's)."""
    if not shards:
        raise MergeError("no shards to merge")
    check_together(shards)
    ordered = sorted(shards, key=lambda s: s.result.shard.index if s.result.shard else 0)
    results = [s.result for s in ordered]
    head = results[0]
    assert head.config is not None
    try:
        config = validate_model(Config, dict(head.config))
    except InvalidData as exc:
        raise MergeError(f"{ordered[0].name}: its recorded config cannot be read: {exc}") from None
    outcomes: dict[str, PhaseOutcome] = {}
    for name in head.phases:
        phase = PHASES.get(name)
        if phase is None:
            raise MergeError(
                f"the shards ran the {name} phase, which this version of flakestorm cannot "
                f"score (known: {', '.join(PHASES)})"
            )
        parts = [r.phases[name] for r in results]
        outcome = merge_phase(parts, [str(s.name) for s in ordered])
        outcomes[name] = dataclasses.replace(outcome, score=phase.score(outcome, config))
    interrupted = any(r.stop_reason == "interrupted" for r in results)
    gate = head.overall.min_score if min_score is None else min_score
    verdict, code = score_run(outcomes, head.overall.weights, gate, interrupted=interrupted)
    stop_reason = next((r.stop_reason for r in results if r.stop_reason), None)
    return RunResult(
        flakestorm_version=head.flakestorm_version,
        config_path=head.config_path,
        config_digest=head.config_digest,
        seed=head.seed,
        started_at=min(r.started_at for r in results),
        duration_s=max(r.duration_s for r in results),
        complete=all(r.complete for r in results),
        stop_reason=stop_reason,
        invocations=sum(r.invocations for r in results),
        phases=outcomes,
        overall=verdict,
        exit_code=int(code),
        warnings=_union(w for r in results for w in r.warnings),
    )


def output_formats(shards: Sequence[ShardFile]) -> tuple[OutputFormat, ...]:
    """The report formats the shards' config asks for (``output.formats``)."""
    config = shards[0].result.config or {}
    formats = config.get("output", {}).get("formats", [f.value for f in OutputFormat])
    return tuple(OutputFormat(f) for f in formats if f in OutputFormat._value2member_map_)


def merge_phase(parts: Sequence[PhaseOutcome], names: Sequence[str]) -> PhaseOutcome:
    """One phase of the run from its shards' parts (in shard order): cells by index, each
    scenario's delivery proof over all parts and judged again. Unscored."""
    head = parts[0]
    cells: dict[int, CellResult] = {}
    owner: dict[int, str] = {}
    for part, name in zip(parts, names, strict=True):
        for cell in part.cells:
            if cell.index in cells:
                raise MergeError(
                    f"cell {cell.id} ran in two shards ({owner[cell.index]} and {name}): "
                    "these are not shards of one run"
                )
            cells[cell.index] = cell
            owner[cell.index] = name
    merged = [cells[i] for i in sorted(cells)]
    mutations: dict[int, MutationResult] = {}
    for part, name in zip(parts, names, strict=True):
        for mutation in part.mutations:
            if mutation.index in mutations:
                raise MergeError(
                    f"mutation {mutation.id} ran in two shards (the other before {name}): "
                    "these are not shards of one run"
                )
            mutations[mutation.index] = mutation
    infos = [
        merge_proof([p.scenarios[i] for p in parts if i < len(p.scenarios)])
        for i in range(len(head.scenarios))
    ]
    judged: dict[str, ScenarioInfo] = {}
    by_index: dict[int, CellResult] = {}
    for info in infos:
        own = [c for c in merged if c.scenario == info.name]
        judged[info.name], settled = judge(info, own)
        by_index.update((c.index, c) for c in settled)
    return sweeps_judged(
        dataclasses.replace(
            head,
            invariants=_rows(parts, merged),
            scenarios=tuple(judged[i.name] for i in infos),
            cells=tuple(by_index.get(c.index, c) for c in merged),
            mutations=tuple(mutations[i] for i in sorted(mutations)),
            warnings=_union(w for p in parts for w in p.warnings),
        )
    )


def _rows(parts: Sequence[PhaseOutcome], cells: Sequence[CellResult]) -> tuple[InvariantInfo, ...]:
    """The rows of the merged matrix: every shard's (a phase whose rows are its items, like
    the replay phase's sessions, lists only its shard's), in the order of their first cell."""
    rows: dict[str, InvariantInfo] = {}
    for part in parts:
        for info in part.invariants:
            rows.setdefault(info.id, info)
    first: dict[str, int] = {}
    for cell in cells:
        first.setdefault(cell.invariant_id, cell.index)
    listed = {ident: n for n, ident in enumerate(rows)}
    return tuple(sorted(rows.values(), key=lambda i: (first.get(i.id, len(cells)), listed[i.id])))


def merge_proof(infos: Sequence[ScenarioInfo]) -> ScenarioInfo:
    """A scenario's delivery proof over the shards: declared by any, matched by any, not
    applied in any (the first shard's reason), and the replaced calls of every shard."""
    head = infos[0]
    declared = _union(label for i in infos for label in i.declared)
    matched = {label for i in infos for label in i.matched}
    hints: dict[str, str] = {}
    unapplied: dict[str, str] = {}
    unscheduled: dict[str, str] = {}
    replaced: dict[str, dict[str, int]] = {}
    for info in infos:
        for label, hint in info.hints.items():
            hints.setdefault(label, hint)
        for label, why in info.unapplied.items():
            unapplied.setdefault(label, why)
        for label, why in info.unscheduled.items():
            unscheduled.setdefault(label, why)
        for label, by in info.replaced.items():
            counts = replaced.setdefault(label, {})
            for fault, n in by.items():
                counts[fault] = counts.get(fault, 0) + n
    return dataclasses.replace(
        head,
        serial=any(i.serial for i in infos),
        declared=declared,
        matched=tuple(label for label in declared if label in matched),
        hints=hints,
        unapplied=unapplied,
        unscheduled=unscheduled,
        replaced=replaced,
        seen=_summed([i.seen for i in infos]),
        undelivered=(),
        unattributed=sum(i.unattributed for i in infos),
        unattributed_calls=tuple(c for i in infos for c in i.unattributed_calls)[
            :MAX_UNATTRIBUTED_CALLS
        ],
    )


def _summed(counts: Sequence[Mapping[str, int] | None]) -> dict[str, int] | None:
    """The shards' call counts added up (None when no shard recorded them)."""
    if all(c is None for c in counts):
        return None
    total: dict[str, int] = {}
    for one in counts:
        for kind, n in (one or {}).items():
            total[kind] = total.get(kind, 0) + n
    return total


def _union(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _short(value: object) -> str:
    text = str(value)
    return text[:12] + "…" if len(text) == 64 else text
