"""The contract phase: every invariant of ``contract`` under every scenario of its chaos
matrix (SPEC §5), scored as the resilience score."""

from __future__ import annotations

from flakestorm.config import Config
from flakestorm.errors import UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.phases.matrix import run_matrix
from flakestorm.phases.phase import PhaseContext, PhaseName, PhasePlan, PhaseRequest
from flakestorm.plan import Plan, build_plan
from flakestorm.results import PhaseOutcome, PhaseScore
from flakestorm.scoring import score_cells


class ContractPhase:
    name = PhaseName.CONTRACT.value

    def configured(self, config: Config) -> bool:
        return PhaseName.CONTRACT.configured(config)

    def weight(self, config: Config) -> float:
        return PhaseName.CONTRACT.weight(config)

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> Plan:
        config = loaded.config
        if config.contract is None:
            raise UsageError(f"{loaded.path.name} has no `contract` section")
        return build_plan(config.contract, config.golden_prompts)

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome:
        assert isinstance(plan, Plan)
        loaded = context.loaded
        lines = {
            inv.id: loaded.line_of(("contract", "invariants", i))
            for i, inv in enumerate(plan.contract.invariants)
        }
        return run_matrix(self.name, plan, context, lines)

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        return score_cells(outcome.cells)
