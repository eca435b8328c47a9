"""Every reporter against its golden files (tests/golden/README.md: how to regenerate)."""

from __future__ import annotations

import pytest
from golden.cases import CASES
from golden.regenerate import HERE, golden_names, render_golden

REGENERATE = ".venv/bin/python -m tests.golden.regenerate"


@pytest.mark.parametrize("name", golden_names())
def test_rendering_matches_the_golden_file(name: str) -> None:
    path = HERE / name
    assert path.exists(), f"{path} is missing: run `{REGENERATE}`"
    expected = path.read_bytes().decode("utf-8")
    actual = render_golden(name)
    assert actual == expected, f"{name} differs from its golden file: review, then `{REGENERATE}`"


def test_no_stale_golden_files() -> None:
    known = set(golden_names())
    stale = [
        p.name
        for p in HERE.iterdir()
        if p.is_file() and p.suffix in (".xml", ".md", ".html") and p.name != "README.md"
        if p.name not in known
    ]
    assert not stale, f"golden files no case renders: {stale}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_case_agrees_with_itself(name: str) -> None:
    """Each case's scores, critical failures, gate and exit code are what flakestorm's scoring
    gives for its own cells and mutations (a hand-typed score once drifted from its items)."""
    from flakestorm.results.scoring import score_cells, score_mutations, score_run

    result = CASES[name]()
    for outcome in result.phases.values():
        critical = [i.id for i in outcome.invariants if i.severity == "critical"]
        if outcome.mutations:
            assert outcome.score == score_mutations(outcome.mutations, critical)
        elif outcome.phase == "contract":
            assert outcome.score == score_cells(outcome.cells)
        else:  # chaos: the pass rate of its golden prompts
            counts = outcome.score.counts
            rate = round(100.0 * counts["prompts_passed"] / counts["prompts"], 2)
            assert outcome.score.score == rate
            assert outcome.score.critical_failures == score_cells(outcome.cells).critical_failures
    overall, code = score_run(
        result.phases,
        result.overall.weights,
        result.overall.min_score,
        interrupted=result.stop_reason == "interrupted",
    )
    assert result.overall == overall
    assert result.exit_code == code
