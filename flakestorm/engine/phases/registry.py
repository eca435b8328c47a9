"""The phases a run can have, in report order: one registration line per phase."""

from __future__ import annotations

from flakestorm.engine.phases.chaos import ChaosPhase
from flakestorm.engine.phases.contract import ContractPhase
from flakestorm.engine.phases.mutation import MutationPhase
from flakestorm.engine.phases.phase import Phase
from flakestorm.engine.phases.replay import ReplayPhase

PHASES: dict[str, Phase] = {}
"""Every phase by name, in the order reports show them."""


def register(phase: Phase) -> None:
    """Add ``phase`` (a new name goes last; an existing name is replaced in place)."""
    PHASES[phase.name] = phase


register(ContractPhase())
register(ChaosPhase())
register(MutationPhase())
register(ReplayPhase())
