"""How the step judged a run: its ``fail-on`` rule, and the baseline delta it compared with (or
why it compared with none).

The action records it in the run's ``results.json`` (the ``step`` key, :attr:`RunResult.step`)
before it writes the report directory, so every report there — and ``flakestorm report``
rendering them again from that file — states the verdict the step's exit code, the job summary
and the pull request comment state, and leads with the same delta. Only the cells that changed
are kept (a delta's ``unchanged`` cells are neither listed nor counted anywhere), so the
document does not grow with the cells that did not move.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flakestorm.baseline.delta import CellChange, Change, Delta, FailOn
from flakestorm.errors import ExitCode
from flakestorm.results.model import ResultsError, RunResult, Status
from flakestorm.results.trend import Trend

__all__ = ["Judgement", "judgement_of"]


@dataclass(frozen=True)
class Judgement:
    """The rule a step judged its run by, and what it compared the run with."""

    fail_on: FailOn
    delta: Delta | None = None
    """The cells that changed against the baseline; None when nothing was compared."""
    against: str = "the baseline"
    """``main @ abc1234`` (a branch name: untrusted, escape it)."""
    age: str = ""
    """``3 hours old``."""
    url: str | None = None
    """The baseline run's page."""
    missing: str | None = None
    """Why no baseline was compared, when one was looked for and none found (the notice)."""
    trend: Trend | None = None
    """The score over the base branch's last runs and this one (``baseline: auto``)."""
    error: str | None = None
    """Why the baseline file could not be read as a blessed baseline (SPEC §14): a config
    error, so the step exits 2 whatever the run's gate says (never "nothing is known, so no
    failure is new")."""

    @property
    def matters(self) -> bool:
        """Whether the reports say anything of it: a rule other than the run's own gate, a
        delta, or a baseline that was missing or unreadable. A run without one keeps its
        document as it was."""
        return (
            self.fail_on is not FailOn.ANY
            or self.delta is not None
            or bool(self.missing)
            or self.error is not None
        )

    def exit_code(self, result: RunResult) -> int:
        """The step's exit code for ``result``: an unreadable baseline is a config error (2)
        over the gate's 0 or 1; the run's own infrastructure error (3) stays."""
        code = self.fail_on.exit_code(result, self.delta)
        if self.error is not None and code in (ExitCode.PASSED, ExitCode.GATE_FAILED):
            return int(ExitCode.CONFIG_ERROR)
        return code

    def document(self, result: RunResult) -> dict[str, Any]:
        """The ``step`` of ``result``'s ``results.json`` (its ``exit_code`` is the step's, for
        readers of the file; reading it back checks it)."""
        delta = None
        if self.delta is not None:
            delta = [_change_document(c) for c in self.delta.changes if c.change.shown]
        return (
            {
                "fail_on": self.fail_on.value,
                "exit_code": self.exit_code(result),
                "against": self.against,
                "age": self.age,
                "url": self.url,
                "missing": self.missing,
                "delta": delta,
            }
            | ({"trend": self.trend.document()} if self.trend is not None else {})
            | ({"error": self.error} if self.error is not None else {})
        )


def _change_document(change: CellChange) -> dict[str, Any]:
    return {
        "phase": change.phase,
        "cell_id": change.cell_id,
        "change": change.change.value,
        "base": None if change.base is None else change.base.value,
        "head": None if change.head is None else change.head.value,
        "severity": change.severity,
        "p_value": change.p_value,
        "base_runs": list(change.base_runs),
        "head_runs": list(change.head_runs),
    }


def _change(d: Mapping[str, Any]) -> CellChange:
    def status(value: Any) -> Status | None:
        return None if value is None else Status(value)

    def runs(value: Any) -> tuple[int, int]:
        passed, total = value
        if not all(type(n) is int for n in (passed, total)):
            raise TypeError(f"runs {value!r} are not two integers")
        return passed, total

    p_value = d["p_value"]
    if p_value is not None and (type(p_value) not in (int, float)):
        raise TypeError(f"p_value {p_value!r} is not a number")
    return CellChange(
        phase=str(d["phase"]),
        cell_id=str(d["cell_id"]),
        change=Change(d["change"]),
        base=status(d["base"]),
        head=status(d["head"]),
        severity=str(d["severity"]),
        p_value=p_value,
        base_runs=runs(d["base_runs"]),
        head_runs=runs(d["head_runs"]),
    )


def judgement_of(result: RunResult) -> Judgement | None:
    """How the step judged ``result`` (its ``results.json``'s ``step``), None when it carries
    none (a run outside the action, a shard). Raises :class:`ResultsError` when the document
    is malformed, or its ``exit_code`` is not what its rule and delta give."""
    step = result.step
    if step is None:
        return None
    try:
        changes = step["delta"]
        judgement = Judgement(
            fail_on=FailOn(step["fail_on"]),
            delta=None if changes is None else Delta(tuple(_change(c) for c in changes)),
            against=_text(step["against"]),
            age=_text(step["age"]),
            url=None if step["url"] is None else _text(step["url"]),
            missing=None if step["missing"] is None else _text(step["missing"]),
            trend=None if step.get("trend") is None else Trend.from_document(step["trend"]),
            error=None if step.get("error") is None else _text(step["error"]),
        )
        code = step["exit_code"]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"results document is malformed: step: {exc!r}") from None
    if code != judgement.exit_code(result):
        raise ResultsError(
            f"results document is malformed: step: exit_code {code!r} is not the exit code "
            f"its rule gives ({judgement.exit_code(result)}: fail-on {judgement.fail_on.value}, "
            f"run exit code {result.exit_code})"
        )
    return judgement


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r:.60} is not a string")
    return value
