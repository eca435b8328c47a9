"""Collecting a run's prompt results into cells (:class:`Tracker`): each cell is finished —
its verdict over its runs (``repeat`` / ``min_pass``, flaky), or ERRORED, or ``not_run`` — when
its last task is in, and announced (``CellFinished``, ``ScenarioFinished``) or handed to a sink
(the phase's spool) so nothing is kept longer than needed. With a ``settle`` (a chaos
scenario's delivery judgement), a scenario's cells are settled and announced together as soon
as its last cell is in, each verdict once, final: scenarios in flight side by side are
announced as each ends, not at the end of their wave. Used by the executor's workers."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from flakestorm.engine.events import CellFinished, Event, ScenarioFinished
from flakestorm.engine.matrix_plan import Cell
from flakestorm.results.model import CellResult, PromptResult, Status
from flakestorm.results.scenarios import declaration_order


class Counts(Protocol):
    """What the tracker needs of the run's options."""

    @property
    def repeat(self) -> int: ...

    @property
    def min_pass(self) -> int: ...


class Tracker:
    """Collects prompt results per cell and finishes each cell when its last task is in."""

    def __init__(
        self,
        cells: Sequence[Cell],
        options: Counts,
        on_event: Callable[[Event], None],
        sink: Callable[[CellResult], None] | None = None,
        settle: Callable[[str, list[CellResult]], list[CellResult]] | None = None,
    ) -> None:
        self._options = options
        self._on_event = on_event
        self._sink = sink
        self._settle_scenario = settle
        self._announced = 0
        self._lock = threading.Lock()
        self._results: dict[int, CellResult] = {}
        self._slots: dict[int, list[PromptResult | None]] = {}
        self._missing: dict[int, int] = {}
        self._fired: dict[int, dict[str, None]] = {}
        self._errors: dict[int, str] = {}
        self._alone: dict[int, int] = {}  # invocations re-run alone, per cell
        self._total = len(cells)
        self._frozen = False
        self._by_scenario: dict[str, list[Cell]] = {}
        for cell in cells:
            self._by_scenario.setdefault(cell.scenario.name, []).append(cell)
            if cell.applicable:
                n = len(cell.prompts) * options.repeat
                self._slots[cell.index] = [None] * n
                self._missing[cell.index] = n
                self._fired[cell.index] = {}

    def skip(self, cell: Cell) -> None:
        reason = f"when: {cell.invariant.when.value} does not apply to this scenario"
        self._finish(cell, _result(cell, Status.SKIPPED, reason))

    def is_errored(self, cell: Cell) -> bool:
        with self._lock:
            return cell.index in self._errors

    def error(self, cell: Cell, reason: str, run: int | None = None, prompt_index: int = 0) -> None:
        """Mark ``cell`` ERRORED. With ``run`` given, that one task is settled; without, the
        cell's remaining tasks are abandoned (they will never be recorded)."""
        slot = None if run is None else run * len(cell.prompts) + prompt_index
        self._settle(cell, slot, None, (), error=reason)

    def record(
        self,
        cell: Cell,
        run: int,
        prompt_index: int,
        result: PromptResult | None,
        fired: tuple[str, ...] = (),
        alone: bool = False,
    ) -> None:
        """``alone``: the result of an invocation sent again on its own, after the agent went
        down under it with others in flight (the cell says it was judged so)."""
        if alone:
            with self._lock:
                self._alone[cell.index] = self._alone.get(cell.index, 0) + 1
        self._settle(cell, run * len(cell.prompts) + prompt_index, result, fired)

    def _settle(
        self,
        cell: Cell,
        slot: int | None,
        result: PromptResult | None,
        fired: tuple[str, ...],
        error: str | None = None,
    ) -> None:
        with self._lock:
            if cell.index in self._results or self._frozen or cell.index not in self._slots:
                return  # finished (or being announced) already, or abandoned
            if error is not None:
                self._errors.setdefault(cell.index, error)
            if slot is None:
                self._missing[cell.index] = 0
            else:
                self._slots[cell.index][slot] = result
                self._missing[cell.index] -= 1
                self._fired[cell.index].update(dict.fromkeys(fired))
            if self._missing[cell.index] > 0:
                return
            finished = self._finalise(cell)
            del self._slots[cell.index], self._fired[cell.index]  # memory flat in the run's size
        self._finish(cell, finished)

    def abandon(self) -> None:
        """Finish every cell still open as it stands (``not_run`` unless errored), and ignore
        whatever the abandoned invocations report later."""
        with self._lock:
            self._frozen = True
            open_cells = [
                cell
                for cells in self._by_scenario.values()
                for cell in cells
                # not finished, nor being finished (a finalised cell's slots are gone)
                if cell.applicable and cell.index not in self._results and cell.index in self._slots
            ]
            finished = [(cell, self._finalise(cell)) for cell in open_cells]
        for cell, result in finished:
            self._finish(cell, result)

    def _finalise(self, cell: Cell) -> CellResult:
        result = self._verdict(cell)
        alone = self._alone.pop(cell.index, 0)
        if not alone:
            return result
        n = len(self._slots[cell.index])
        note = (
            f"judged on an isolated re-run: the agent went down while other invocations were "
            f"in flight, so {alone} of its {n} invocation(s) were sent again on their own once "
            "it was back"
        )
        return dataclasses.replace(result, notes=(*result.notes, note))

    def _verdict(self, cell: Cell) -> CellResult:
        prompts = tuple(p for p in self._slots[cell.index] if p is not None)
        fired = tuple(self._fired[cell.index])
        if cell.index in self._errors:
            return _result(cell, Status.ERRORED, self._errors[cell.index], prompts, fired)
        slots = self._slots[cell.index]
        if any(p is None for p in slots):
            done = sum(1 for p in slots if p is not None)
            reason = f"the run stopped before this cell finished ({done}/{len(slots)} invocations)"
            return _result(cell, Status.NOT_RUN, reason, prompts, fired)
        return runs_judged(_result(cell, Status.PASSED, "", prompts, fired), cell, self._options)

    def _finish(self, cell: Cell, result: CellResult) -> None:
        settle = self._settle_scenario
        if self._sink is not None and settle is None:
            self._sink(result)
        kept = result if self._sink is None else dataclasses.replace(result, prompts=(), calls=())
        name = cell.scenario.name
        with self._lock:
            self._results[cell.index] = kept
            siblings = self._by_scenario[name]
            scenario_done = all(c.index in self._results for c in siblings)
            scenario_results = [self._results[c.index] for c in siblings] if scenario_done else []
            if settle is None:
                self._announced += 1
                done = self._announced
        if settle is None:
            self._on_event(CellFinished(result, done, self._total))
            if scenario_done:
                self._on_event(ScenarioFinished(name, tuple(scenario_results)))
            return
        if not scenario_done:
            return  # announced with its scenario, settled
        settled = settle(name, scenario_results)
        with self._lock:
            for one in settled:
                self._results[one.index] = one
            first = self._announced
            self._announced += len(settled)
        for offset, one in enumerate(settled, 1):
            self._on_event(CellFinished(one, first + offset, self._total))
        self._on_event(ScenarioFinished(name, tuple(settled)))

    def results(self) -> list[CellResult]:
        return [self._results[i] for i in sorted(self._results)]


def runs_judged(result: CellResult, cell: Cell, options: Counts) -> CellResult:
    """``result`` (every invocation of ``cell`` in, in order) judged over its runs: passed when
    at least ``min_pass`` of its ``repeat`` runs passed every invocation; flaky when some did."""
    n, repeat = len(cell.prompts), options.repeat
    slots: list[PromptResult | None] = list(result.prompts)
    runs = [slots[r * n : (r + 1) * n] for r in range(repeat)]
    passed_runs = sum(1 for run in runs if all(p is not None and p.passed for p in run))
    status = Status.PASSED if passed_runs >= options.min_pass else Status.FAILED
    return dataclasses.replace(
        result,
        status=status,
        reason=_reason(cell, runs, passed_runs, options.min_pass),
        flaky=0 < passed_runs < repeat,
        runs_passed=passed_runs,
        runs_total=repeat,
    )


def _result(
    cell: Cell,
    status: Status,
    reason: str,
    prompts: tuple[PromptResult, ...] = (),
    fired: tuple[str, ...] = (),
) -> CellResult:
    return CellResult(
        index=cell.index,
        invariant_id=cell.invariant.id,
        scenario=cell.scenario.name,
        severity=cell.invariant.severity.value,
        status=status,
        reason=reason,
        prompts=prompts,
        faults_fired=declaration_order(fired),
    )


def _reason(
    cell: Cell, runs: list[list[PromptResult | None]], passed_runs: int, min_pass: int
) -> str:
    n = len(cell.prompts)
    repeat = len(runs)
    failing = next((p for run in runs for p in run if p is not None and not p.passed), None)
    if repeat > 1:
        head = f"{passed_runs}/{repeat} runs passed (min_pass {min_pass})"
        return head if failing is None else f"{head}; {failing.reason}"
    if failing is None:
        return f"held for all {n} prompt(s)" if n > 1 else runs[0][0].reason  # type: ignore[union-attr]
    index = next(i for run in runs for i, p in enumerate(run) if p is failing)
    turn = cell.turn(index)
    if turn is not None:
        where = f"turn {turn.number}/{turn.of}"
        if any(t is not None and t.conversation != turn.conversation for t in cell.turns):
            where = f"golden prompt {turn.conversation + 1}, {where}"
        return f"{where}: {failing.reason}"
    return f"prompt {index + 1}/{n}: {failing.reason}"
