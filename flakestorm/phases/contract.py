"""The contract phase: every invariant under every scenario of the chaos matrix (SPEC §5)."""

from __future__ import annotations

import dataclasses

from flakestorm.chaos.delivery import CALM, Channel, active_scenario, attach, needs_delivery
from flakestorm.chaos.faults import ActiveScenario, FaultBook
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


def prepare(contract: Contract, golden_prompts: list[str], can_deliver: bool = False) -> Plan:
    """The plan of ``contract``; without a delivery channel (``can_deliver``), refuses
    scenarios whose faults travel with the agent's tool and LLM calls."""
    plan = build_plan(contract, golden_prompts)
    for scenario in plan.scenarios:
        missing = [] if can_deliver else undeliverable_faults(scenario)
        if missing:
            raise UsageError(
                f"scenario {scenario.name!r} declares {', '.join(missing)}: these faults are "
                "delivered through the chaos proxy or python tool wrapping, which this version "
                "of flakestorm does not have yet. Remove the scenario, or keep it in a "
                "separate config; flakestorm never runs a scenario without its faults."
            )
    return plan


NOT_FORWARDING_WARNING = (
    "The agent does not forward the X-Flakestorm-Cell header (or a baggage entry "
    "flakestorm-cell=...) to its tool and LLM calls, so the cells of chaos scenarios ran one "
    "at a time to attribute every call to its cell. Forward the header to run them concurrently."
)
PRE_MATRIX_CELLS = frozenset({"stateful-check", "baseline", "forwarding-probe"})


def run_contract(
    plan: Plan,
    executor: Executor,
    golden_prompts: list[str],
    has_reset: bool,
    lines: dict[str, int],
    channel: Channel | None = None,
    seed: int = 0,
    stateful_check: bool = True,
) -> ContractOutcome:
    """Run ``plan``: the stateful check, the baselines, then the matrix scenario by scenario
    (chaos scenarios activated on ``channel`` one at a time); score it."""
    warnings = []
    calm = ActiveScenario(CALM, seed)
    if channel is not None:
        channel.activate(calm)
    probe = golden_prompts[0] if golden_prompts else plan.cells[0].prompts[0]
    if stateful_check and not has_reset and executor.looks_stateful(probe):
        warnings.append(STATEFUL_WARNING)
    baselines = executor.baselines(plan.baseline_prompts)
    chaos = [s for s in plan.scenarios if channel is not None and needs_delivery(s)]
    forwarding = True
    if channel is not None and chaos and not channel.exact_attribution:
        if has_reset and not plan.baseline_prompts:
            executor.probe(probe, "forwarding-probe")
        seen = channel.interactions(CALM)
        forwarding = any(i.cell_id in PRE_MATRIX_CELLS for i in seen)
        if not forwarding:
            warnings.append(NOT_FORWARDING_WARNING)
    by_index = {}
    calm_cells = [c for c in plan.cells if c.scenario not in chaos]
    for result in executor.run_cells(calm_cells, baselines):
        by_index[result.index] = result
    infos = {s.name: ScenarioInfo(s.name, describe_faults(s)) for s in plan.scenarios}
    for scenario in chaos:
        assert channel is not None
        # an earlier phase may have run a scenario of the same name ("chaos"): not ours
        earlier = {i.seq for i in channel.interactions(scenario.name)}
        active = active_scenario(scenario, seed)
        channel.activate(active)
        cells = [c for c in plan.cells if c.scenario is scenario]

        def before_invocation(invocation: str, active: ActiveScenario = active) -> None:
            assert channel is not None
            channel.activate(dataclasses.replace(active, cell_id=invocation))

        results = executor.run_cells(
            cells,
            baselines,
            serial=not forwarding,
            before_invocation=before_invocation,
            announce=False,
        )
        seen = [i for i in channel.interactions(scenario.name) if i.seq not in earlier]
        proven, undelivered = attach(results, seen, FaultBook(active), channel)
        for result in proven:
            by_index[result.index] = result
        executor.announce(scenario.name, proven)
        infos[scenario.name] = dataclasses.replace(
            infos[scenario.name], undelivered=undelivered, serial=not forwarding
        )
    if channel is not None:
        channel.activate(calm)
    cells_out = [by_index[i] for i in sorted(by_index)]
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
        scenarios=tuple(infos[s.name] for s in plan.scenarios),
        cells=tuple(cells_out),
        score=score_contract(cells_out),
        warnings=tuple(warnings),
    )


def describe_faults(scenario: Scenario) -> tuple[str, ...]:
    """One short line per fault declared by ``scenario``."""
    out = [f"tool {f.tool}: {f.mode.value}" for f in scenario.tool_faults]
    out += [f"llm: {f.mode.value}" for f in scenario.llm_faults]
    out += [f"context: {a.type.value}" for a in scenario.context_attacks]
    return tuple(out)
