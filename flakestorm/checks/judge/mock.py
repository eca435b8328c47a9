"""``judge: mock``: a deterministic stand-in for a judge model, for tests and the demo.

It reads the phrases the rubric quotes (``"…"``, ``“…”`` or backticks) and answers PASS when
the output contains one of them (case-insensitive), FAIL when it contains none. A rubric that
quotes no phrase gives it nothing to look for: ``validate`` refuses it (:func:`phrases`), so
the mock never guesses a verdict. No model, no network, no cost.
"""

from __future__ import annotations

import re

from flakestorm.checks.judge.asking import Answer

MODEL = "mock"
_QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”|`([^`\n]+)`')


def phrases(rubric: str) -> list[str]:
    """The phrases ``rubric`` quotes, in order, blank ones left out."""
    found = (next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(rubric))
    return [p.strip() for p in found if p.strip()]


def judge(rubric: str, output: str) -> Answer | None:
    """The mock's verdict on ``output``, or None when the rubric quotes nothing."""
    quoted = phrases(rubric)
    if not quoted:
        return None
    folded = output.casefold()
    for phrase in quoted:
        if phrase.casefold() in folded:
            return Answer(True, f'the output says "{phrase}"')
    listed = ", ".join(f'"{p}"' for p in quoted[:4]) + (" …" if len(quoted) > 4 else "")
    return Answer(False, f"the output says none of {listed}")
