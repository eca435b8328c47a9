"""What a contract run will do, counted before it runs (``flakestorm validate``), by the rules
:mod:`flakestorm.engine.phases.matrix` runs it with; light to import (no engine), so ``validate``
starts fast."""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.config import AgentType, Config
from flakestorm.engine.plan import Plan


@dataclass(frozen=True)
class MatrixCount:
    """What running a matrix will do, counted before it runs."""

    invariants: int
    scenarios: int
    cells: int
    skipped: int
    prompt_runs: int
    """Invocations for the cells, before repeat."""
    repeat: int
    baselines: int
    detection: int
    """The stateful check's invocations."""
    probe: int = 0
    """The forwarding probe's invocation."""

    @property
    def invocations(self) -> int:
        return self.prompt_runs * self.repeat + self.baselines + self.detection + self.probe


def count_invocations(
    plan: Plan, config: Config, first: bool = True, sessions: bool | None = None
) -> MatrixCount:
    """The invocations :func:`run_matrix` makes for ``plan`` (``first``: as the run's first
    phase), by its rules: two calls of the first prompt to detect a stateful agent when cells
    are not isolated (no reset, no session); isolated and with no baselines, one call to learn
    whether an http agent forwards the cell header, when some scenario needs fault delivery.
    ``sessions``: whether the agent keeps a session per cell, when the caller knows more than
    ``agent.session`` says (a python agent whose callable takes ``session_id``)."""
    keeps = config.agent.session is not None if sessions is None else sessions
    isolated = keeps or bool(config.agent.reset_endpoint or config.agent.reset_function)
    applicable = [c for c in plan.cells if c.applicable]
    baselines = plan.baseline_invocations
    probe = (
        isolated
        and not baselines
        and config.agent.type is AgentType.HTTP
        and any(s.needs_delivery for s in plan.scenarios)
    )
    return MatrixCount(
        invariants=len(plan.contract.invariants),
        scenarios=len(plan.scenarios),
        cells=len(plan.cells),
        skipped=len(plan.cells) - len(applicable),
        prompt_runs=sum(len(c.prompts) for c in applicable),
        repeat=config.advanced.repeat,
        baselines=baselines,
        detection=2 if first and not isolated else 0,
        probe=int(probe),
    )
