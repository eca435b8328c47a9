"""Judging a pull request by what it changes (SPEC §8, §14).

- ``delta.py``: the cell-by-cell comparison of two runs (new failures, fixed, still failing,
  new, removed), the ``fail-on`` gate on it; pure, independent of GitHub;
- ``fisher.py``: the one-sided Fisher exact test that decides whether a repeated cell got
  significantly worse;
- ``judgement.py``: how a step judged its run (its rule, the delta, why there was none), kept
  in ``results.json`` so every report states it;
- ``blessed.py``: a blessed baseline committed in the repository.

``flakestorm compare`` uses them alone; the action finds the base branch's run and its artifact
in :mod:`flakestorm.github.baseline_source` and judges its step in
:mod:`flakestorm.github.baseline_step`.
"""

from flakestorm.baseline.delta import CellChange, Change, Delta, FailOn, compare

__all__ = ["CellChange", "Change", "Delta", "FailOn", "compare"]
