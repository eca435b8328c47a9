"""Config -> cells (pure).

A contract run is a matrix: every invariant under every scenario of ``chaos_matrix``, a swept
scenario standing for one scenario per value (:mod:`flakestorm.sweeps`). Each
(invariant × scenario) pair is a :class:`Cell`, listed invariant-major in config order; that
order is the order of every report, whatever order cells finish in.
"""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.config import (
    Contract,
    ContractInvariant,
    InvariantType,
    Scenario,
)
from flakestorm.errors import UsageError
from flakestorm.sweep_results import SweepInfo
from flakestorm.sweeps import expanded_matrix, sweeps_of


@dataclass(frozen=True)
class Cell:
    """One (invariant × scenario) pair: the unit that passes or fails."""

    index: int
    invariant: ContractInvariant
    scenario: Scenario
    prompts: tuple[str, ...]
    """The invariant's probes, or else the golden prompts."""

    @property
    def id(self) -> str:
        return f"{self.invariant.id}[{self.scenario.name}]"

    @property
    def applicable(self) -> bool:
        """Whether the invariant's ``when`` applies to this scenario (else the cell is skipped)."""
        return self.invariant.when.applies(self.scenario)

    @property
    def needs_baseline(self) -> bool:
        inv = self.invariant
        return inv.type is InvariantType.BEHAVIOR_UNCHANGED and (inv.baseline or "auto") == "auto"


@dataclass(frozen=True)
class Plan:
    """The cells of one contract, in report order."""

    contract: Contract
    cells: tuple[Cell, ...]
    scenarios: tuple[Scenario, ...]
    """Every scenario of the contract, sweeps expanded, in config order (the objects the cells
    hold)."""

    @property
    def sweeps(self) -> tuple[SweepInfo, ...]:
        return sweeps_of(self.contract)

    @property
    def baseline_prompts(self) -> tuple[str, ...]:
        """Distinct prompts whose chaos-free answer a ``behavior_unchanged`` cell needs."""
        seen: dict[str, None] = {}
        for cell in self.cells:
            if cell.applicable and cell.needs_baseline:
                seen.update(dict.fromkeys(cell.prompts))
        return tuple(seen)


def build_plan(contract: Contract, golden_prompts: list[str]) -> Plan:
    """Expand a contract into its cells (invariant-major, config order)."""
    cells: list[Cell] = []
    scenarios = expanded_matrix(contract)
    for invariant in contract.invariants:
        prompts = tuple(invariant.probes or golden_prompts)
        if not prompts:
            raise UsageError(
                f"invariant {invariant.id!r} has no prompts to send: "
                "add golden_prompts, or probes to the invariant"
            )
        for scenario in scenarios:
            cells.append(Cell(len(cells), invariant, scenario, prompts))
    return Plan(contract, tuple(cells), tuple(scenarios))
