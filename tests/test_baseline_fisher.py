"""The one-sided Fisher exact test, against published values and a brute-force enumeration."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import pytest

from flakestorm.baseline.fisher import fisher_one_sided


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # Fisher's lady tasting tea: 3 of 4 right; scipy fisher_exact([[3, 1], [1, 3]],
        # alternative="greater") = 17/70
        ((3, 1, 1, 3), 17 / 70),
        # Wikipedia's dieting example, one-tailed: 0.001380 (= 2706 / 1961256)
        ((11, 3, 1, 9), 2706 / 1961256),
        # all passed before, all failed now, five runs each: 1 / C(10, 5)
        ((5, 0, 0, 5), 1 / 252),
        # 4/5 before, 3/5 now: noise
        ((4, 1, 3, 2), 0.5),
        # 5/5 before, 4/5 now: one failure in ten runs proves nothing
        ((5, 0, 4, 1), 0.5),
        # 20/20 before, 10/20 now: only the observed table is that extreme (all 10 fails
        # in head): C(30, 10) · C(10, 10) / C(40, 20)
        ((20, 0, 10, 10), comb(30, 10) / comb(40, 20)),
    ],
)
def test_known_values(table: tuple[int, int, int, int], expected: float) -> None:
    assert fisher_one_sided(*table) == pytest.approx(expected, rel=1e-9)


def _brute(a: int, b: int, c: int, d: int) -> float:
    """Every way to deal the passes between the two sides: the share with c or fewer in head."""
    runs = [1] * (a + c) + [0] * (b + d)
    n = c + d
    hits = total = 0
    for chosen in itertools.combinations(range(len(runs)), n):
        total += 1
        hits += sum(runs[i] for i in chosen) <= c
    return float(Fraction(hits, total))


@pytest.mark.parametrize(
    "table",
    [t for t in itertools.product(range(4), repeat=4) if 0 < t[2] + t[3] < sum(t)],
)
def test_matches_a_brute_force_count(table: tuple[int, int, int, int]) -> None:
    assert fisher_one_sided(*table) == pytest.approx(_brute(*table), abs=1e-12)


def test_a_better_head_is_never_significant() -> None:
    assert fisher_one_sided(0, 5, 5, 0) == 1.0
    assert fisher_one_sided(3, 2, 3, 2) > 0.5


def test_degenerate_tables() -> None:
    assert fisher_one_sided(0, 0, 0, 0) == 1.0
    assert fisher_one_sided(5, 0, 0, 0) == 1.0
    assert fisher_one_sided(0, 0, 0, 5) == 1.0
    with pytest.raises(ValueError, match="negative"):
        fisher_one_sided(-1, 0, 0, 0)
