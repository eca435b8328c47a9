"""The contract phase: every invariant of ``contract`` under every scenario of its chaos
matrix (SPEC §5), scored as the resilience score."""

from __future__ import annotations

from flakestorm.config import Config
from flakestorm.engine.matrix_plan import MatrixPlan, plan_for
from flakestorm.engine.phases.matrix import MatrixPhase, dealt
from flakestorm.engine.phases.phase import PhaseName, PhaseRequest
from flakestorm.errors import UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.results.model import PhaseOutcome, PhaseScore
from flakestorm.results.scoring import score_cells


class ContractPhase(MatrixPhase):
    kind = PhaseName.CONTRACT
    invariants_at = ("contract", "invariants")

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> MatrixPlan:
        config = loaded.config
        if config.contract is None:
            raise UsageError(f"{loaded.path.name} has no `contract` section")
        plan = plan_for(config, config.contract)
        return dealt(plan, request)

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        return score_cells(outcome.cells)
