"""Config -> cells (pure).

A contract run is a matrix: every invariant under every scenario of ``chaos_matrix``. Each
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

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        return tuple(self.contract.chaos_matrix)

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
    for invariant in contract.invariants:
        prompts = tuple(invariant.probes or golden_prompts)
        if not prompts:
            raise UsageError(
                f"invariant {invariant.id!r} has no prompts to send: "
                "add golden_prompts, or probes to the invariant"
            )
        for scenario in contract.chaos_matrix:
            cells.append(Cell(len(cells), invariant, scenario, prompts))
    return Plan(contract, tuple(cells))
