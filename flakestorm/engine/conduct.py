"""The invariants on what the agent did, judged in a matrix (SPEC §15): once a scenario's
calls are in its cells (the delivery proof's :func:`~flakestorm.chaos.delivery.proof.prove`)
and before delivery is judged, each invocation of a cell whose invariant reads calls is judged
on its own calls (:func:`flakestorm.checks.conduct.judge_conduct`), and the cell over its runs
again. Every cell the scenario ran also gets what it spent (:class:`Spend`), and the scenario
the sum.

``max_amplification`` compares an invocation with the same prompt in the matrix's scenario
without faults, which therefore runs before the others (:attr:`MatrixPlan.compared_with`):
its measures are kept here, per invariant and prompt, as its cells are judged.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence

from flakestorm.chaos.delivery.proof import invocation_of
from flakestorm.checks.conduct import Conduct, Measures, Uncountable, judge_conduct, measures
from flakestorm.config import Config, InvariantType
from flakestorm.engine.matrix_plan import Cell, MatrixPlan
from flakestorm.engine.tracker import Counts, runs_judged
from flakestorm.results import prices
from flakestorm.results.model import CallRecord, CellResult, ScenarioInfo, Status
from flakestorm.results.spend import LLM, Pricer, added, aims_at, spend_of


class ConductJudge:
    """Judges the cells of a matrix's scenarios on their calls, as each scenario settles."""

    def __init__(self, plan: MatrixPlan, options: Counts, price: Pricer | None) -> None:
        self._options = options
        self._price = price
        self._compared_with = plan.compared_with
        self._without: dict[tuple[str, int], list[Measures]] = {}
        self._lock = threading.Lock()

    def judge(self, results: Sequence[CellResult], cells: Mapping[int, Cell]) -> list[CellResult]:
        """``results`` (one scenario's, their calls attached) with their spend, and those whose
        invariant reads calls judged on them."""
        out = []
        reached: dict[str, bool] = {}  # per target: did any call of the scenario aim at it
        for result in results:
            cell = cells.get(result.index)
            spent = dataclasses.replace(result, spend=spend_of(result.calls, self._price))
            if cell is None or not cell.invariant.type.reads_calls:
                out.append(spent)
                continue
            if cell.scenario.name == self._compared_with:
                self._keep(cell, spent)
            target = cell.invariant.target or LLM
            if target not in reached:
                reached[target] = any(aims_at(c, target) for r in results for c in r.calls)
            out.append(_vacuous(self._judged(cell, spent), cell, reached[target]))
        return out

    def spent(self, info: ScenarioInfo, results: Sequence[CellResult]) -> ScenarioInfo:
        """``info`` with what its cells spent together (None when no cell recorded a call)."""
        spends = [r.spend for r in results if r.spend is not None]
        return dataclasses.replace(info, spend=added(spends) if spends else None)

    def _keep(self, cell: Cell, result: CellResult) -> None:
        """The measures of a cell of the scenario without faults, per prompt and run, for the
        same prompt under chaos."""
        invariant = cell.invariant
        if invariant.type is not InvariantType.MAX_AMPLIFICATION:
            return
        if result.status not in (Status.PASSED, Status.FAILED):
            return
        n = len(cell.prompts)
        target = invariant.target or LLM
        with self._lock:
            for k in range(len(result.prompts)):
                own = _calls_of(result.calls, cell, k // n, k % n, self._options.repeat)
                key = (invariant.id or "", k % n)
                self._without.setdefault(key, []).append(measures(own, target, self._price))

    def _without_chaos(self, cell: Cell, index: int) -> Measures | None:
        with self._lock:
            runs = self._without.get((cell.invariant.id or "", index))
        if not runs:
            return None
        return _mean(runs)

    def _judged(self, cell: Cell, result: CellResult) -> CellResult:
        if result.status not in (Status.PASSED, Status.FAILED):
            return result  # errored, skipped or not run: nothing judged on it
        n = len(cell.prompts)
        if len(result.prompts) != n * self._options.repeat:
            return result
        prompts = []
        for k, prompt in enumerate(result.prompts):
            if not prompt.checked:
                prompts.append(prompt)
                continue
            run, index = k // n, k % n
            own = _calls_of(result.calls, cell, run, index, self._options.repeat)
            without = (
                self._without_chaos(cell, index)
                if cell.invariant.type is InvariantType.MAX_AMPLIFICATION
                else None
            )
            try:
                passed, reason = judge_conduct(cell.invariant, Conduct(own, self._price, without))
            except Uncountable as exc:
                where = f"prompt {index + 1}/{n}" if n > 1 else "its invocation"
                return dataclasses.replace(
                    result, status=Status.ERRORED, reason=f"cannot count ({where}): {exc}"
                )
            prompts.append(dataclasses.replace(prompt, passed=passed, reason=reason))
        return runs_judged(dataclasses.replace(result, prompts=tuple(prompts)), cell, self._options)


def _vacuous(result: CellResult, cell: Cell, reached: bool) -> CellResult:
    """``result`` ERRORED when no call of its scenario was one its invariant counts
    (``reached`` is false): then
    flakestorm saw none of the calls it is about (the agent's calls to its target do not pass
    through flakestorm), and a count of nothing is no verdict — but for ``max_calls`` with
    ``max: 0``, which asks for none."""
    invariant = cell.invariant
    if result.status not in (Status.PASSED, Status.FAILED):
        return result
    if invariant.type is InvariantType.MAX_CALLS and not invariant.max:
        return result
    target = invariant.target or LLM
    if reached:
        return result
    return dataclasses.replace(
        result,
        status=Status.ERRORED,
        reason=(
            f"counted nothing: no call to {target} reached flakestorm in scenario "
            f"{cell.scenario.name!r}, so {invariant.type.value} has nothing to judge (are the "
            f"agent's calls to {target} pointed at flakestorm?)"
        ),
    )


def _calls_of(
    calls: Sequence[CallRecord], cell: Cell, run: int, index: int, repeat: int
) -> list[CallRecord]:
    """The calls of invocation ``run``.``index`` of ``cell``: those of its isolated re-run
    (run + ``repeat``) when it was sent again alone after the agent went down, else its own."""
    again = invocation_of(cell.invocation(run + repeat, index))
    rerun = [c for c in calls if c.invocation == again]
    if rerun:
        return rerun
    own = invocation_of(cell.invocation(run, index))
    return [c for c in calls if c.invocation == own]


def _mean(runs: Sequence[Measures]) -> Measures:
    tokens = [m.tokens for m in runs]
    costs = [m.cost for m in runs]
    return Measures(
        calls=sum(m.calls for m in runs) / len(runs),
        tokens=None if None in tokens else round(sum(t or 0 for t in tokens) / len(runs)),
        cost=None if None in costs else sum(c or 0.0 for c in costs) / len(runs),
        unpriced=next((m.unpriced for m in runs if m.unpriced), ""),
    )


def pricer(config: Config) -> Pricer:
    """The prices a run's costs are counted with: the config's ``prices:``, then the pinned
    price table."""
    return prices.pricer(config.prices)
