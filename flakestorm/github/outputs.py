"""The step's outputs (``action.yml``'s ``outputs``), as data: what ``GITHUB_OUTPUT`` gets.

:class:`StepOutputs` has one field per output (``x_y`` is output ``x-y``); an output left None
is not set, and a workflow reads it as empty. ``action.yml``, this class and the output table of
``docs/action.md`` are kept in step by ``tests/test_action_contract.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flakestorm.errors import ExitCode

if TYPE_CHECKING:
    from flakestorm.reporters.delta import Compared
    from flakestorm.reporters.view import RunVerdict
    from flakestorm.results.model import RunResult

__all__ = ["StepOutputs", "failed_outputs", "outputs_of"]


@dataclass(frozen=True)
class StepOutputs:
    """The outputs a step sets, in ``action.yml`` order; None: not set."""

    score: str | None = None
    """The run's overall score, two decimals (empty when nothing was scored)."""
    passed: str | None = None
    """``true`` or ``false``: the step's outcome, as its exit code."""
    contract_score: str | None = None
    critical_failures: str | None = None
    report_dir: str | None = None
    """Relative to the workspace."""
    new_failures: str | None = None
    """Against the baseline, when one was compared."""
    fixed: str | None = None

    def items(self) -> Iterator[tuple[str, str]]:
        """``(output name, value)`` of each output set, in order."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                yield field.name.replace("_", "-"), value


def _two(score: float | None) -> str:
    return "" if score is None else f"{score:.2f}"


def outputs_of(
    result: RunResult, shown: RunVerdict, compared: Compared | None, report_dir: str
) -> StepOutputs:
    """The outputs of a step that judged ``result`` (its verdict ``shown``, its delta
    ``compared``; ``passed`` follows the exit code, so ``fail-on: regression`` passes on known
    failures) and wrote its reports to ``report_dir``."""
    from flakestorm.engine.phases.phase import PhaseName

    contract = result.phases.get(PhaseName.CONTRACT.value)
    return StepOutputs(
        score=_two(result.overall.score),
        passed="true" if shown.code == ExitCode.PASSED else "false",
        contract_score="" if contract is None else _two(contract.score.score),
        critical_failures=str(sum(len(o.score.critical_failures) for o in result.phases.values())),
        report_dir=report_dir,
        new_failures=None if compared is None else str(compared.delta.new_failures),
        fixed=None if compared is None else str(compared.delta.fixed),
    )


def failed_outputs(report_dir: str) -> StepOutputs:
    """The outputs of a step that ended in an error before it had a result to judge."""
    return StepOutputs(passed="false", report_dir=report_dir)
