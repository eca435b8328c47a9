"""The contract phase: every invariant under every scenario of the chaos matrix (SPEC §5)."""

from __future__ import annotations

from flakestorm.config import Contract, Scenario
from flakestorm.errors import UsageError
from flakestorm.executor import Executor
from flakestorm.plan import Plan, build_plan, undeliverable_faults
from flakestorm.results import ContractOutcome, InvariantInfo, ScenarioInfo
from flakestorm.scoring import score_contract

STATEFUL_WARNING = (
    "Warning: No reset_endpoint configured. Contract matrix cells may share state. "
    "Results may be contaminated. Add reset_endpoint to your config for accurate isolation."
)


def prepare(contract: Contract, golden_prompts: list[str]) -> Plan:
    """The plan of ``contract``; refuses scenarios whose faults this run cannot deliver."""
    plan = build_plan(contract, golden_prompts)
    for scenario in plan.scenarios:
        missing = undeliverable_faults(scenario)
        if missing:
            raise UsageError(
                f"scenario {scenario.name!r} declares {', '.join(missing)}: these faults are "
                "delivered through the chaos proxy or python tool wrapping, which this version "
                "of flakestorm does not have yet. Remove the scenario, or keep it in a "
                "separate config; flakestorm never runs a scenario without its faults."
            )
    return plan


def run_contract(
    plan: Plan,
    executor: Executor,
    golden_prompts: list[str],
    has_reset: bool,
    lines: dict[str, int],
) -> ContractOutcome:
    """Run ``plan``: the stateful check, the baselines, then the matrix; score it."""
    warnings = []
    probe = golden_prompts[0] if golden_prompts else plan.cells[0].prompts[0]
    if not has_reset and executor.looks_stateful(probe):
        warnings.append(STATEFUL_WARNING)
    baselines = executor.baselines(plan.baseline_prompts)
    cells = executor.run(plan, baselines)
    contract = plan.contract
    return ContractOutcome(
        name=contract.name,
        invariants=tuple(
            InvariantInfo(
                id=inv.id,
                type=inv.type.value,
                severity=inv.severity.value,
                when=inv.when.value,
                negate=inv.negate,
                description=inv.description,
                line=lines.get(inv.id, 1),
            )
            for inv in contract.invariants
        ),
        scenarios=tuple(ScenarioInfo(s.name, describe_faults(s)) for s in plan.scenarios),
        cells=tuple(cells),
        score=score_contract(cells),
        warnings=tuple(warnings),
    )


def describe_faults(scenario: Scenario) -> tuple[str, ...]:
    """One short line per fault declared by ``scenario``."""
    out = [f"tool {f.tool}: {f.mode.value}" for f in scenario.tool_faults]
    out += [f"llm: {f.mode.value}" for f in scenario.llm_faults]
    out += [f"context: {a.type.value}" for a in scenario.context_attacks]
    return tuple(out)
