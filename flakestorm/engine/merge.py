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
  and the overall score and gate with :func:`~flakestorm.results.scoring.score_run`.

The merged result is what an unsharded run with the same seed gives, timings and the
invocation count (each shard checks the agent before its cells) aside.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from flakestorm.chaos.delivery.proof import judge
from flakestorm.config import Config, OutputFormat
from flakestorm.engine.phases.registry import PHASES
from flakestorm.errors import UsageError
from flakestorm.results import acceptance, clock
from flakestorm.results.model import (
    CellResult,
    InvariantInfo,
    PhaseOutcome,
    ResultsError,
    RunResult,
    ScenarioInfo,
    from_document,
)
from flakestorm.results.scenarios import MAX_UNATTRIBUTED_CALLS
from flakestorm.results.scoring import score_run
from flakestorm.results.shards import digest_of
from flakestorm.results.spend import added
from flakestorm.results.spool import Spool
from flakestorm.results.stream import CODECS, item_of, read_document
from flakestorm.results.sweeps import judged as sweeps_judged
from flakestorm.results.usage import Spend
from flakestorm.structure import InvalidData, validate_model

RESULTS_FILE = "results.json"


class MergeError(UsageError):
    """Shards that cannot be merged: what is missing, foreign or unreadable (exit 2)."""


@dataclasses.dataclass(frozen=True)
class ShardFile:
    """A shard's result, its cells and mutations left out (they are in :class:`Shards`' spools),
    and the file it came from."""

    path: Path
    result: RunResult

    @property
    def name(self) -> str:
        return f"{self.path} (shard {self.result.shard})"


@dataclasses.dataclass
class _Items:
    """One phase's items of one field (``cells``, ``mutations``) from every shard, in one
    spool, and what the merge needs of them, noted as they are read: which shard each came
    from, the cells of each scenario, each invariant's first cell."""

    spool: Spool[Any]
    owner: dict[int, int] = dataclasses.field(default_factory=dict)
    scenarios: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    checked: set[str] = dataclasses.field(default_factory=set)
    """The scenarios with a cell delivery errored (its own verdict in ``checked``)."""
    first: dict[str, int] = dataclasses.field(default_factory=dict)


class Shards:
    """The shards read: each one's result without its items (:attr:`files`, in the order they
    were found), and every shard's items streamed into one spool per phase and field, in the
    report directory (so the merged run's memory stays flat in its size, as a run's does)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.files: list[ShardFile] = []
        self._directory = directory
        self._items: dict[tuple[str, str], _Items] = {}
        self._twice: str | None = None  # the first item two shards ran, when one did

    def __iter__(self) -> Iterator[ShardFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def read(self, path: Path) -> None:
        """Add the shard in ``path``; raises :class:`MergeError` when it cannot be read."""
        position = len(self.files)
        try:
            with path.open(encoding="utf-8") as file:
                document = read_document(file, lambda *item: self._add(position, path, *item))
        except OSError as exc:
            raise MergeError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except RecursionError:
            raise MergeError(f"{path}: not a results.json (nested too deeply)") from None
        except ResultsError as exc:
            raise MergeError(f"{path}: {exc}") from None
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
        self.files.append(ShardFile(path, result))

    def _add(
        self, position: int, path: Path, phase: str, key: str, at: int, document: Any, text: str
    ) -> None:
        item = item_of(phase, key, at, document)
        items = self._items.get((phase, key))
        if items is None:
            items = self._items[phase, key] = _Items(Spool(CODECS[key], self._directory))
        if item.index in items.spool:
            if self._twice is None:
                other = self.files[items.owner[item.index]].path
                self._twice = (
                    f"{key[:-1]} {item.id} ran in two shards ({other} and {path}): these are "
                    "not shards of one run"
                )
            return
        items.spool.add(item, text)
        items.owner[item.index] = position
        if isinstance(item, CellResult):
            items.scenarios.setdefault(item.scenario, []).append(item.index)
            if item.checked is not None:
                items.checked.add(item.scenario)
            items.first.setdefault(item.invariant_id, item.index)

    def items(self, phase: str, key: str) -> _Items | None:
        return self._items.get((phase, key))

    def check_items(self) -> None:
        """Raise :class:`MergeError` when two shards ran the same item."""
        if self._twice is not None:
            raise MergeError(self._twice)


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


def read_shards(paths: Iterable[Path], directory: Path | None = None) -> Shards:
    """Every shard result under ``paths`` (see :func:`find_results`), their items streamed
    into spools in ``directory`` (the report directory; the system's temporary one when
    None)."""
    shards = Shards(directory)
    for path in find_results(paths):
        shards.read(path)
    return shards


@contextlib.contextmanager
def leaving_nothing(directory: Path) -> Iterator[None]:
    """A merge that spools in ``directory``: when it fails, ``directory`` is removed again if
    it made it (the spools are anonymous files, gone with the merge), so a refused merge
    writes nothing."""
    made = not directory.exists()
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


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


def merge(shards: Shards, min_score: float | None = None) -> RunResult:
    """The run's result from its shards (see the module docstring); ``min_score`` replaces
    the shards' own (``--min-score`` on the merge: the gate is the merge's)."""
    if not shards.files:
        raise MergeError("no shards to merge")
    check_together(shards.files)
    shards.check_items()
    ordered = sorted(shards.files, key=lambda s: s.result.shard.index if s.result.shard else 0)
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
        outcome = merge_phase(parts, shards.items(name, "cells"), shards.items(name, "mutations"))
        outcomes[name] = dataclasses.replace(outcome, score=phase.score(outcome, config))
    interrupted = any(r.stop_reason == "interrupted" for r in results)
    gate = head.overall.min_score if min_score is None else min_score
    acceptances = acceptance.judge(config.accepted, outcomes, clock.today())
    verdict, code = score_run(
        outcomes, head.overall.weights, gate, interrupted=interrupted, acceptances=acceptances
    )
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
        accepted=acceptances if config.accepted else None,
        judges=_union(line for r in results for line in r.judges or ()) or None,
        plan=head.plan,
    )


def output_formats(shards: Shards) -> tuple[OutputFormat, ...]:
    """The report formats the shards' config asks for (``output.formats``)."""
    config = shards.files[0].result.config or {}
    formats = config.get("output", {}).get("formats", [f.value for f in OutputFormat])
    return tuple(OutputFormat(f) for f in formats if f in OutputFormat._value2member_map_)


def merge_phase(
    parts: Sequence[PhaseOutcome], cells: _Items | None, mutations: _Items | None
) -> PhaseOutcome:
    """One phase of the run from its shards' parts (in shard order) and their items: each
    scenario's delivery proof over all parts, judged again, the cells it settles rewritten in
    the spool (only a scenario that declares faults, or has a cell delivery errored, has its
    cells read: one scenario's at a time). Unscored."""
    head = parts[0]
    infos = [
        merge_proof([p.scenarios[i] for p in parts if i < len(p.scenarios)])
        for i in range(len(head.scenarios))
    ]
    judged: list[ScenarioInfo] = []
    for info in infos:
        indexes = cells.scenarios.get(info.name, []) if cells is not None else []
        if cells is None or not (info.declared or info.name in cells.checked):
            judged.append(dataclasses.replace(info, undelivered=()))  # as judge() gives it
            continue
        own = [cells.spool.items.at(i) for i in sorted(indexes)]
        settled_info, settled = judge(info, own)
        judged.append(settled_info)
        for old, new in zip(own, settled, strict=True):
            if new is not old:
                cells.spool.add(new)
    return sweeps_judged(
        dataclasses.replace(
            head,
            invariants=_rows(parts, cells.first if cells is not None else {}),
            scenarios=tuple(judged),
            cells=cells.spool.items if cells is not None else (),
            mutations=mutations.spool.items if mutations is not None else (),
            warnings=_union(w for p in parts for w in p.warnings),
        )
    )


def _rows(parts: Sequence[PhaseOutcome], first: Mapping[str, int]) -> tuple[InvariantInfo, ...]:
    """The rows of the merged matrix: every shard's (a phase whose rows are its items, like
    the replay phase's sessions, lists only its shard's), in the order of their first cell
    (``first``: each invariant's first cell's index)."""
    rows: dict[str, InvariantInfo] = {}
    for part in parts:
        for info in part.invariants:
            rows.setdefault(info.id, info)
    listed = {ident: n for n, ident in enumerate(rows)}
    last = max(first.values(), default=0) + 1
    return tuple(sorted(rows.values(), key=lambda i: (first.get(i.id, last), listed[i.id])))


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
        in_flight=any(i.in_flight for i in infos),
        declared=declared,
        matched=tuple(label for label in declared if label in matched),
        hints=hints,
        unapplied=unapplied,
        unscheduled=unscheduled,
        replaced=replaced,
        seen=_summed([i.seen for i in infos]),
        spend=_spent([i.spend for i in infos]),
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


def _spent(spends: Sequence[Spend | None]) -> Spend | None:
    """What the shards' cells of a scenario spent, together (None when none recorded it)."""
    kept = [s for s in spends if s is not None]
    return added(kept) if kept else None


def _union(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _short(value: object) -> str:
    text = str(value)
    return text[:12] + "…" if len(text) == 64 else text
