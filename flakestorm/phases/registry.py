"""The phases a run can have, in report order: one registration line per phase."""

from __future__ import annotations

from flakestorm.phases.chaos import ChaosPhase
from flakestorm.phases.contract import ContractPhase
from flakestorm.phases.mutation import MutationPhase
from flakestorm.phases.phase import Phase
from flakestorm.phases.replay import ReplayPhase

PHASES: dict[str, Phase] = {}
"""Every phase by name, in the order reports show them."""


def register(phase: Phase) -> None:
    """Add ``phase`` (a new name goes last; an existing name is replaced in place)."""
    PHASES[phase.name] = phase


register(ContractPhase())
register(ChaosPhase())
register(MutationPhase())
register(ReplayPhase())
