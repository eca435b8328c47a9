"""Small run results built from cell statuses, for the baseline tests.

``run_of({"contract": ["a[calm]=passed", "b[calm]=failed 2/5"]})`` is a RunResult whose contract
phase has those cells (``id[scenario]=status``, optionally ``passed/total`` runs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from flakestorm.results.model import (
    CellResult,
    Overall,
    PhaseOutcome,
    PhaseScore,
    RunResult,
    Status,
    to_document,
)

_CELL = re.compile(r"^(?P<inv>[^\[]+)\[(?P<scn>[^\]]+)\]=(?P<st>\w+)(?: (?P<p>\d+)/(?P<t>\d+))?$")


def cell(spec: str, index: int = 0, severity: str = "high") -> CellResult:
    match = _CELL.match(spec)
    assert match, spec
    status = Status(match["st"])
    total = int(match["t"]) if match["t"] else 1
    passed = int(match["p"]) if match["p"] else int(status is Status.PASSED)
    return CellResult(
        index=index,
        invariant_id=match["inv"],
        scenario=match["scn"],
        severity=severity,
        status=status,
        reason=f"{match['inv']} {status.value}",
        runs_passed=passed,
        runs_total=total,
        flaky=0 < passed < total,
    )


def run_of(
    phases: Mapping[str, Sequence[str]],
    exit_code: int | None = None,
    config_path: str = "flakestorm.yaml",
) -> RunResult:
    outcomes = {}
    failing = False
    for phase, specs in phases.items():
        cells = tuple(cell(spec, i) for i, spec in enumerate(specs))
        failing |= any(c.status in (Status.FAILED, Status.ERRORED) for c in cells)
        outcomes[phase] = PhaseOutcome(
            phase=phase,
            name=phase,
            invariants=(),
            scenarios=(),
            cells=cells,
            score=PhaseScore(score=50.0, passed=True, critical_failures=(), counts={}),
        )
    code = exit_code if exit_code is not None else int(failing)
    return RunResult(
        flakestorm_version="2.0.0",
        config_path=config_path,
        config_digest="0" * 64,
        seed=1,
        started_at="2026-01-01T00:00:00Z",
        duration_s=1.0,
        complete=True,
        stop_reason=None,
        invocations=len(outcomes),
        phases=outcomes,
        overall=Overall(
            score=50.0,
            passed=code == 0,
            min_score=0.0,
            weights={},
            phases_ran=tuple(outcomes),
            reasons=() if code == 0 else ("a cell failed",),
        ),
        exit_code=code,
    )


def results_json(result: RunResult) -> str:
    return json.dumps(to_document(result))
