"""The step's annotations, as data: config problems on their lines, and what failed in a run.

:func:`config_annotations` places a config's errors and warnings on their lines of the config;
:func:`run_annotations` gives one error per failing critical invariant, on its line, and under
``fail-on: regression`` a warning instead when each of its failing cells (or mutations) is a
known failure (still failing against the baseline), with the new failures as the error; then
the step's error or why its gate failed. :class:`flakestorm.github.client.GitHub` writes them
(``annotate_all``, with :func:`more_known` / :func:`more_failed` for what does not fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flakestorm.baseline.delta import Change, FailOn
from flakestorm.errors import ExitCode, Problem
from flakestorm.github.notes import TITLE, Annotation
from flakestorm.reporters.escape import log_line
from flakestorm.reporters.view import RunVerdict, error_causes
from flakestorm.results.model import (
    CellResult,
    InvariantInfo,
    MutationResult,
    PhaseOutcome,
    RunResult,
    Status,
)

if TYPE_CHECKING:
    from flakestorm.reporters.delta import Compared

__all__ = [
    "RunAnnotations",
    "config_annotations",
    "more_failed",
    "more_known",
    "run_annotations",
]

KNOWN = " (known: failing on the baseline too)"


def more_known(n: int) -> str:
    """The warning standing for the known failures past the runner's cap."""
    return f"{n} more known critical failure(s): see the job summary"


def more_failed(n: int) -> str:
    """The error standing for the failures past the runner's cap."""
    return f"{n} more critical invariant(s) failed or errored: see the job summary"


def config_annotations(
    problems: Sequence[Problem], config_name: str, what: str
) -> list[Annotation]:
    """``problems`` of the config ``config_name``, each on its line, titled ``what`` (``config
    error``, ``config warning``)."""
    return [
        Annotation(
            f"{problem.path}: {problem.message}" if problem.path else problem.message,
            file=config_name,
            line=problem.line,
            title=f"{TITLE}: {what}",
        )
        for problem in problems
    ]


@dataclass(frozen=True)
class RunAnnotations:
    """A run's annotations: ``warnings`` (known failures) are written before ``errors``."""

    errors: list[Annotation] = field(default_factory=list)
    warnings: list[Annotation] = field(default_factory=list)


def run_annotations(
    result: RunResult, shown: RunVerdict, compared: Compared | None, config_name: str
) -> RunAnnotations:
    """The annotations of ``result`` (public-safe already, when the log must be), judged
    ``shown`` by the step against ``compared``; critical invariants on their lines of
    ``config_name``."""
    regression = compared is not None and compared.fail_on is FailOn.REGRESSION
    known = frozenset(
        c.key for c in (compared.delta.of(Change.STILL_FAILING) if compared else ()) if regression
    )
    annotations = RunAnnotations()
    for phase, outcome in result.phases.items():
        for invariant in outcome.invariants:
            if invariant.severity == "critical":
                _invariant(annotations, phase, outcome, invariant, known, config_name)
    if compared is not None and regression and shown.code == 1 and not annotations.errors:
        annotations.errors.append(_new_failures(compared))
    _step_error(annotations.errors, result, shown)
    return annotations


def _invariant(
    annotations: RunAnnotations,
    phase: str,
    outcome: PhaseOutcome,
    invariant: InvariantInfo,
    known: frozenset[str],
    config_name: str,
) -> None:
    """The critical ``invariant``'s annotations: its broken mutations', then its cells'."""
    bad = (Status.FAILED, Status.ERRORED)
    cells = [c for c in outcome.cells if c.invariant_id == invariant.id and c.status in bad]
    broke = [m for m in outcome.mutations if invariant.id in m.failed_invariants]
    if broke:
        broke_known = all(f"{phase}:{m.id}" in known for m in broke)
        (annotations.warnings if broke_known else annotations.errors).append(
            _mutations(invariant, broke, outcome, broke_known, config_name)
        )
    if cells:
        scored = sum(1 for c in outcome.cells if c.invariant_id == invariant.id and c.status.scored)
        is_known = all(f"{phase}:{c.id}" in known for c in cells)
        (annotations.warnings if is_known else annotations.errors).append(
            _cells(invariant, cells, scored, is_known, config_name)
        )


def _cells(
    invariant: InvariantInfo,
    cells: list[CellResult],
    scored: int,
    is_known: bool,
    config_name: str,
) -> Annotation:
    """The annotation for a critical invariant that failed or errored in ``cells`` (of
    ``scored``), on its line (errored cells are said to have errored, as in the gate's
    reasons)."""
    detail = "; ".join(
        f"{log_line(c.scenario, 60)}: {c.status.value}: {log_line(c.reason, 300)}"
        for c in cells[:5]
    )
    more = f"; and {len(cells) - 5} more" if len(cells) > 5 else ""
    how = " or ".join(
        s.value for s in (Status.FAILED, Status.ERRORED) if any(c.status is s for c in cells)
    )
    name = log_line(invariant.id, 80)
    return Annotation(
        f"critical invariant {name} {how} in {len(cells)} of {scored} scenario(s)"
        f"{KNOWN if is_known else ''}: {detail}{more}",
        file=config_name,
        line=invariant.line,
        title=f"{TITLE}: critical invariant {name} {how}",
    )


def _mutations(
    invariant: InvariantInfo,
    broke: list[MutationResult],
    outcome: PhaseOutcome,
    is_known: bool,
    config_name: str,
) -> Annotation:
    """The annotation for a critical invariant that mutations broke, on its line
    (``is_known``: each of those mutations failed on the baseline too)."""
    detail = "; ".join(
        f"{log_line(m.id, 60)} ({log_line(m.transform, 40)}): {log_line(m.reason, 300)}"
        for m in broke[:5]
    )
    more = f"; and {len(broke) - 5} more" if len(broke) > 5 else ""
    return Annotation(
        f"critical invariant {log_line(invariant.id, 80)} failed in {len(broke)} of "
        f"{len(outcome.mutations)} mutation(s)"
        f"{KNOWN if is_known else ''}: {detail}{more}",
        file=config_name,
        line=invariant.line,
        title=f"{TITLE}: critical invariant {log_line(invariant.id, 80)} failed",
    )


def _new_failures(compared: Compared) -> Annotation:
    """Under ``fail-on: regression``, the new failures that failed the step (when no critical
    invariant said it)."""
    new = compared.delta.of(Change.NEW_FAILURE)
    listed = ", ".join(log_line(c.cell_id, 120) for c in new[:10])
    more = f" and {len(new) - 10} more" if len(new) > 10 else ""
    return Annotation(
        f"{log_line(compared.delta.headline(compared.against), 400)}: {listed}{more}",
        title=f"{TITLE}: new failures",
    )


def _step_error(errors: list[Annotation], result: RunResult, shown: RunVerdict) -> None:
    """The step's error first (the causes of the logged, public-safe result, or the baseline
    file's config error); else, when the step failed and nothing said why, the gate's reasons."""
    if shown.error:
        config = shown.code == ExitCode.CONFIG_ERROR  # the baseline file: no agent output
        causes = "; ".join(
            log_line(c, 400) for c in (shown.causes if config else error_causes(result))
        )
        title = f"{TITLE}: {'config error' if config else 'ERROR'}"
        errors.insert(0, Annotation(f"exit {shown.code}: {causes}", title=title))
    elif shown.code != 0 and not errors:
        reasons = "; ".join(log_line(r, 400) for r in result.overall.reasons) or "the gate failed"
        errors.append(Annotation(reasons, title=f"{TITLE}: gate failed"))
