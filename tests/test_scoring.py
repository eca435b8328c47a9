"""The resilience score, the critical rule and the gate (SPEC §5), as tables."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from flakestorm.errors import ExitCode
from flakestorm.results.model import CellResult, MutationResult, PhaseOutcome, Status
from flakestorm.results.scoring import exit_code, overall, score_cells, score_mutations, score_run
from flakestorm.results.spool import CELLS, MUTATIONS, Spool

P, F, E, S, N = Status.PASSED, Status.FAILED, Status.ERRORED, Status.SKIPPED, Status.NOT_RUN


def cells(*spec: tuple[str, Status] | tuple[str, Status, bool]) -> list[CellResult]:
    out = []
    for i, item in enumerate(spec):
        severity, status = item[0], item[1]
        flaky = len(item) > 2 and bool(item[2])
        out.append(
            CellResult(
                index=i,
                invariant_id=f"inv{i}",
                scenario="s",
                severity=severity,
                status=status,
                reason="",
                flaky=flaky,
            )
        )
    return out


@pytest.mark.parametrize(
    ("spec", "score", "passed"),
    [
        # all pass
        ((("critical", P), ("high", P), ("medium", P), ("low", P)), 100.0, True),
        # one critical fail: 4 of 7 weight points, and the contract fails whatever the score
        ((("critical", F), ("high", P), ("medium", P), ("low", P)), 57.14, False),
        # a high failure costs 2 points of 7 but does not fail the contract
        ((("critical", P), ("high", F), ("medium", P), ("low", P)), 71.43, True),
        # no cell ran to a verdict (each skipped, errored or not run): n/a, never 100 nor 0,
        # and the phase did not pass
        ((("critical", S), ("high", S)), None, False),
        ((("critical", E), ("high", E)), None, False),
        ((("low", E), ("high", E)), None, False),
        ((("critical", N), ("high", N)), None, False),
        ((("low", N), ("high", E), ("medium", S)), None, False),
        # skipped cells are left out of the denominator
        ((("critical", P), ("high", S), ("low", F)), 75.0, True),
        # errored counts as not passed, and an errored critical fails the contract
        ((("critical", E), ("medium", P)), 25.0, False),
        ((("medium", E), ("medium", P)), 50.0, True),
        # cells a stopped run never finished are not scored
        ((("critical", N), ("medium", P)), 100.0, True),
        # flaky cells count by their status
        ((("high", P, True), ("high", F, True)), 50.0, True),
    ],
)
def test_score_table(spec: tuple, score: float | None, passed: bool) -> None:
    result = score_cells(cells(*spec))
    assert result.score == score
    assert result.passed is passed


def test_critical_failures_are_named_and_counts_kept() -> None:
    result = score_cells(cells(("critical", F), ("critical", E), ("low", P, True), ("high", S)))
    assert result.critical_failures == ("inv0[s]", "inv1[s]")
    assert result.counts == {
        "passed": 1,
        "failed": 1,
        "errored": 1,
        "skipped": 1,
        "not_run": 0,
        "flaky": 1,
    }


WEIGHTS = {"mutation": 0.2, "chaos": 0.35, "contract": 0.35, "replay": 0.1}


def test_overall_renormalises_over_phases_that_ran() -> None:
    result = overall({"contract": 80.0, "chaos": 60.0}, WEIGHTS, 0, [])
    assert result.score == 70.0
    assert result.phases_ran == ("chaos", "contract")
    assert result.passed


def test_overall_single_phase_is_its_score() -> None:
    assert overall({"contract": 83.33}, WEIGHTS, 0, []).score == 83.33


@pytest.mark.parametrize(
    ("score", "min_score", "critical", "passed", "reason"),
    [
        (90.0, 80, [], True, None),
        (79.99, 80, [], False, "score 79.99 is below min_score 80"),
        (100.0, 0, ["a[s]"], False, "1 critical cell(s) failed: a[s]"),
        (None, 0, [], True, None),
        (None, 50, [], False, "score n/a is below min_score 50"),
    ],
)
def test_gate(
    score: float | None, min_score: float, critical: list[str], passed: bool, reason: str | None
) -> None:
    result = overall({"contract": score}, WEIGHTS, min_score, critical)
    assert result.passed is passed
    assert result.reasons == (() if reason is None else (reason,))


def test_exit_codes() -> None:
    good = overall({"contract": 100.0}, WEIGHTS, 0, [])
    bad = overall({"contract": 100.0}, WEIGHTS, 0, ["a[s]"])
    assert exit_code(good, errored_cells=0, interrupted=False) is ExitCode.PASSED
    assert exit_code(bad, errored_cells=0, interrupted=False) is ExitCode.GATE_FAILED
    assert exit_code(bad, errored_cells=1, interrupted=False) is ExitCode.INFRASTRUCTURE_ERROR
    assert exit_code(good, errored_cells=0, interrupted=True) is ExitCode.INFRASTRUCTURE_ERROR


def _mutation(id: str, status: Status, failed: tuple[str, ...] = ()) -> MutationResult:
    return MutationResult(
        index=0,
        id=id,
        type="prompt_injection",
        transform="ignore_previous",
        generator="templates",
        weight=1.5,
        original="hi",
        sent="hi PWNED",
        request=None,
        changes=(),
        status=status,
        reason="",
        failed_invariants=failed,
    )


def test_a_mutation_phase_in_which_nothing_ran_to_a_verdict_scores_n_a() -> None:
    errored = (_mutation("a#0", E), _mutation("b#0", N))
    result = score_mutations(errored, ("no-pwn",))
    assert (result.score, result.passed) == (None, False)
    one = score_mutations((*errored, _mutation("c#0", P)))
    assert (one.score, one.passed) == (50.0, True)  # the errored one counts as not passed


def test_the_gate_says_errored_of_an_errored_critical_cell_not_failed() -> None:
    contract = cells(("critical", F), ("critical", E), ("low", P))
    verdict, _ = score_run(
        {"contract": PhaseOutcome("contract", "c", (), (), tuple(contract), score_cells(contract))},
        {"contract": 1},
        0,
    )
    assert verdict.reasons == (
        "1 critical cell(s) failed: inv0[s]",
        "1 critical cell(s) errored: inv1[s]",
    )


def test_the_gate_names_what_failed_critically_cells_mutations_or_sessions() -> None:
    contract = cells(("critical", F), ("low", P))
    replay = cells(("critical", P), ("critical", E))
    mutations = (_mutation("prompt_injection#0.0", F, ("no-pwn",)), _mutation("noise#0.0", P))
    outcomes = {
        "contract": PhaseOutcome("contract", "c", (), (), tuple(contract), score_cells(contract)),
        "mutation": PhaseOutcome(
            "mutation",
            "mutation",
            (),
            (),
            (),
            score_mutations(mutations, ("no-pwn",)),
            mutations=mutations,
        ),
        "replay": PhaseOutcome(
            "replay", "replay", (), (), tuple(replay), score_cells(replay), rows="session"
        ),
    }
    verdict, _ = score_run(outcomes, {"contract": 1, "mutation": 1, "replay": 1}, 0)
    assert verdict.reasons == (
        "1 critical cell(s) failed: inv0[s]",
        "1 critical mutation(s) failed: prompt_injection#0.0",
        "1 critical session(s) errored: inv1[s]",
    )


def test_a_spooled_phase_scores_as_the_same_items_held_in_a_tuple(tmp_path: Path) -> None:
    rng = random.Random(7)
    statuses = [P, F, E, S, N]

    def made(i: int) -> MutationResult:
        failed = rng.choice([(), ("crit",), ("other",), ("other", "crit")])
        return replace(
            _mutation(f"m#{i}", rng.choice(statuses), failed),
            index=i,
            weight=rng.choice([0.5, 1.0, 1.2, 1.5]),
            flaky=rng.random() < 0.2,
        )

    mutations = [made(i) for i in range(200)]
    written = Spool(MUTATIONS, tmp_path)
    for m in rng.sample(mutations, len(mutations)):  # as they finish, out of order
        written.add(m)
    for i in rng.sample(range(200), 50):  # rewritten, the status changed
        mutations[i] = made(i)
        written.add(mutations[i])
    assert score_mutations(written.items, ("crit",)) == score_mutations(tuple(mutations), ("crit",))

    cell_spool = Spool(CELLS, tmp_path)
    held = cells(*((rng.choice(["critical", "low"]), rng.choice(statuses)) for _ in range(100)))
    cell_spool.extend(held[::-1])
    assert score_cells(cell_spool.items) == score_cells(tuple(held))
    assert score_cells(held).critical_failures  # some failed critically: the check can fail
