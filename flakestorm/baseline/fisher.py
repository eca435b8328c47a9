"""The one-sided Fisher exact test on two pass counts, in pure Python (exact integers).

A cell that ran ``repeat`` times on the base branch and on the pull request gives a 2×2 table::

                 passed   failed
    baseline       a        b
    pull request   c        d

Given the margins, the number of passes the pull request got follows the hypergeometric
distribution: of ``N = a + b + c + d`` runs, ``K = a + c`` passed, and the pull request drew
``n = c + d`` of them. The one-sided p-value that the pull request passes *less often* than the
baseline is the probability of ``c`` or fewer passes::

    p = Σ_{x = max(0, n - (N - K))}^{c}  C(K, x) · C(N - K, n - x) / C(N, n)

It equals ``scipy.stats.fisher_exact([[a, b], [c, d]], alternative="greater")``; the sums are
exact (integers and a :class:`~fractions.Fraction`) and only the result is a float.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

__all__ = ["fisher_one_sided"]


def fisher_one_sided(
    base_passed: int, base_failed: int, head_passed: int, head_failed: int
) -> float:
    """The p-value that the head's pass rate is lower than the baseline's (1.0 when it is not
    lower at all, or there is nothing to compare)."""
    counts = (base_passed, base_failed, head_passed, head_failed)
    if any(n < 0 for n in counts):
        raise ValueError(f"pass and fail counts cannot be negative: {counts}")
    total = sum(counts)
    passes = base_passed + head_passed
    drawn = head_passed + head_failed
    if total == 0 or drawn == 0 or drawn == total:
        return 1.0
    low = max(0, drawn - (total - passes))
    tail = sum(
        comb(passes, x) * comb(total - passes, drawn - x) for x in range(low, head_passed + 1)
    )
    return float(Fraction(tail, comb(total, drawn)))
