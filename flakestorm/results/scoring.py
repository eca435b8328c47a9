"""Scores and the gate (pure).

Resilience score of a contract (SPEC §5)::

    score = 100 × Σ w(cell)·passed(cell) / Σ w(cell)      over scored cells

where w = 3 for critical, 2 for high, 1 for medium and low; a scored cell is one that
passed, failed or errored (errored counts as not passed). Skipped cells (``when`` does not
apply) and cells a stopped run never finished are left out.

One rule for every phase (:func:`judged`): a phase in which no item ran to a verdict (none
passed or failed: each errored, was skipped or did not run — an agent never ready, a run
interrupted before its first verdict, a reply read wrong) scores ``None``, shown as n/a —
never 100 nor 0 — and did not pass (``passed`` is false: no report says "passed" of it).

A contract FAILS if any critical cell failed or errored, whatever the score.

Mutation score (SPEC §6), over the mutations that ran (a stopped run's unfinished ones are
left out)::

    score = 100 × Σ w(type)·passed / Σ w(type)

An errored mutation counts as failed (and makes the exit code 3). A mutation that failed a
critical invariant is a critical failure, like a critical cell.

Overall score over the phases that ran, with the configured weights re-normalised::

    overall = Σ wᵢ·sᵢ / Σ wᵢ      over the phases that ran and have a score

The gate FAILS when any critical cell (mutation, replayed session) failed or errored in any
phase — but for failures an ``accepted:`` entry accepts until its date (SPEC §14) —, or
overall < min_score (a ``None`` overall fails any ``min_score`` above 0). Its reasons
name what failed and what errored, apart: ``1 critical mutation(s) failed:
prompt_injection#0.0``, ``2 critical cell(s) errored: a[calm], a[outage]``.

:func:`score_run` is the one place a run is scored: the runner calls it on the phases it ran,
and anything that rebuilds a run from ``results.json`` files can call it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from flakestorm.config import Severity
from flakestorm.errors import ExitCode
from flakestorm.results.acceptance import (
    EXPIRED_TEXT,
    Acceptance,
    accepted_items,
    expired_items,
)
from flakestorm.results.model import (
    CellResult,
    MutationResult,
    Overall,
    PhaseOutcome,
    PhaseScore,
    Status,
)
from flakestorm.results.tally import tally_of


def judged(score: PhaseScore) -> PhaseScore:
    """``score`` under the one rule for a phase in which no item ran to a verdict (see the
    module docstring): its score ``None`` (n/a), and not passed."""
    counts = score.counts
    if counts.get(Status.PASSED.value, 0) or counts.get(Status.FAILED.value, 0):
        return score
    return dataclasses.replace(score, score=None, passed=False)


def score_cells(cells: Sequence[CellResult]) -> PhaseScore:
    """The resilience score and critical rule over ``cells``."""
    tally = tally_of(cells)  # counted as they were spooled: not read again
    counts = tally.statuses
    score = round(100.0 * tally.earned / tally.total, 2) if tally.total else None
    critical = tally.critical((Severity.CRITICAL.value,))
    return judged(
        PhaseScore(
            score=score,
            passed=not critical,
            critical_failures=critical,
            counts={s.value: counts.get(s.value, 0) for s in Status} | {"flaky": tally.flaky},
        )
    )


def score_mutations(
    mutations: Sequence[MutationResult], critical: Sequence[str] = ()
) -> PhaseScore:
    """The mutation score of ``mutations`` (see the module docstring); ``critical`` names the
    critical invariants."""
    tally = tally_of(mutations)  # counted as they were spooled: not read again
    counts = tally.statuses
    critical_failures = tally.critical(critical)
    passed = counts[Status.PASSED.value]
    score = round(100.0 * tally.earned / tally.total, 2) if tally.total else None
    return judged(
        PhaseScore(
            score=score,
            passed=not critical_failures,
            critical_failures=critical_failures,
            counts={s.value: counts[s.value] for s in Status}
            | {"flaky": tally.flaky, "mutations": tally.count},
            summary=f"{passed} of {tally.scored} mutations passed",
        )
    )


def score_run(
    outcomes: Mapping[str, PhaseOutcome],
    weights: Mapping[str, float],
    min_score: float,
    interrupted: bool = False,
    acceptances: Sequence[Acceptance] = (),
) -> tuple[Overall, ExitCode]:
    """The overall score, the gate and the exit code of the phases that ran. A critical
    failure an ``accepted`` acceptance names does not fail the gate; one whose acceptance
    expired does, saying so (SPEC §14)."""
    accepted, expired = accepted_items(acceptances), expired_items(acceptances)
    critical: dict[str, list[str]] = {}
    errored_ids: set[str] = set()
    for outcome in outcomes.values():
        errored_ids.update(_errored_ids(outcome))
        critical.setdefault(outcome.unit, []).extend(
            f"{name} ({EXPIRED_TEXT.format(until=expired[name])})" if name in expired else name
            for name in outcome.score.critical_failures
            if name not in accepted
        )
    scores = {name: o.score.score for name, o in outcomes.items()}
    verdict = overall(scores, weights, min_score, critical, errored_ids)
    errored = sum(
        tally_of(items).statuses[Status.ERRORED.value]
        for o in outcomes.values()
        for items in (o.cells, o.mutations)
    )
    return verdict, exit_code(verdict, errored, interrupted)


def _errored_ids(outcome: PhaseOutcome) -> set[str]:
    """The ids of the phase's errored items (cells, mutations), from their tallies."""
    ids: set[str] = set()
    for items in (outcome.cells, outcome.mutations):
        tally = tally_of(items)
        ids.update(ident for key, (ident, _) in tally.missed.items() if key in tally.errored)
    return ids


def overall(
    phase_scores: Mapping[str, float | None],
    weights: Mapping[str, float],
    min_score: float,
    critical_failures: Sequence[str] | Mapping[str, Sequence[str]],
    errored: Collection[str] = (),
) -> Overall:
    """Combine the scores of the phases that ran and apply the gate. ``critical_failures``
    are cells, or per unit (``cell``, ``mutation``, ``session``) what failed critically;
    those ``errored`` names are said to have errored, not failed."""
    if not isinstance(critical_failures, Mapping):
        critical_failures = {"cell": critical_failures}
    ran = tuple(name for name in weights if name in phase_scores)
    scored = {n: s for n, s in phase_scores.items() if s is not None and weights.get(n, 0) > 0}
    weight_sum = sum(weights[n] for n in scored)
    score = None
    if scored:
        score = round(sum(weights[n] * s for n, s in scored.items()) / weight_sum, 2)
    reasons = []
    for unit, names in critical_failures.items():
        failed = [name for name in names if name not in errored]
        for how, listed in (("failed", failed), ("errored", [n for n in names if n in errored])):
            if not listed:
                continue
            shown = ", ".join(listed[:5])
            more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
            reasons.append(f"{len(listed)} critical {unit}(s) {how}: {shown}{more}")
    if min_score > 0 and (score is None or score < min_score):
        shown_score = "n/a" if score is None else f"{score:.2f}"
        reasons.append(f"score {shown_score} is below min_score {min_score:g}")
    return Overall(
        score=score,
        passed=not reasons,
        min_score=min_score,
        weights=dict(weights),
        phases_ran=ran,
        reasons=tuple(reasons),
    )


def exit_code(result_overall: Overall, errored_cells: int, interrupted: bool) -> ExitCode:
    """The process exit code for a finished run (SPEC §5).

    Harness errors (errored cells or mutations) and an interrupted run are infrastructure
    failures (3): the verdict cannot be trusted. Otherwise a failed gate is 1 and a pass is 0.
    A run cut short by ``max_invocations`` is judged on what it did.
    """
    if errored_cells or interrupted:
        return ExitCode.INFRASTRUCTURE_ERROR
    if not result_overall.passed:
        return ExitCode.GATE_FAILED
    return ExitCode.PASSED
