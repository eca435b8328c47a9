"""The baseline from the base branch: judge a pull request by what it changes (SPEC §8).

- ``delta.py``: the cell-by-cell comparison of two runs (new failures, fixed, still failing,
  new, removed), the ``fail-on`` gate on it; pure, independent of GitHub;
- ``fisher.py``: the one-sided Fisher exact test that decides whether a repeated cell got
  significantly worse;
- ``artifact.py``: the baseline's ``results.json`` read from a report artifact's zip;
- ``source.py``: the newest successful run of the same workflow on the base branch, and its
  artifact, through the REST seam of :class:`flakestorm.github.client.GitHub`.

``flakestorm compare BASE.json HEAD.json`` uses ``delta.py`` alone; the action all four.
"""

from flakestorm.baseline.delta import CellChange, Change, Delta, FailOn, compare

__all__ = ["CellChange", "Change", "Delta", "FailOn", "compare"]
