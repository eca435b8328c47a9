"""The phases a run can have, in report order: one registration line per phase.

A built-in phase is registered by name and module (:class:`Deferred`): its module is imported
when a run first plans, runs or scores it, so a command imports only the phases it runs
(``contract run`` never imports the mutation generators, the replay phase or LangSmith's
importer)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from flakestorm.config import Config, PhaseName
from flakestorm.engine.phases.phase import (
    Phase,
    PhaseContext,
    PhasePlan,
    PhaseRequest,
    SectionPhase,
)

if TYPE_CHECKING:
    from flakestorm.loader import LoadedConfig
    from flakestorm.results.model import PhaseOutcome, PhaseScore

PHASES: dict[str, Phase] = {}
"""Every phase by name, in the order reports show them."""


def register(phase: Phase) -> None:
    """Add ``phase`` (a new name goes last; an existing name is replaced in place)."""
    PHASES[phase.name] = phase


class Deferred(SectionPhase):
    """A built-in phase whose module (``module:Class``) is imported when first used: its name,
    whether its section is configured and its weight come from its :class:`PhaseName`."""

    def __init__(self, kind: PhaseName, where: str) -> None:
        self.kind = kind
        self._where = where
        self._phase: Phase | None = None

    @property
    def phase(self) -> Phase:
        """The phase itself (its module imported the first time)."""
        if self._phase is None:
            module, _, name = self._where.partition(":")
            self._phase = getattr(importlib.import_module(module), name)()
        return self._phase

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> PhasePlan:
        return self.phase.plan(loaded, request)

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome:
        return self.phase.run(plan, context)

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        return self.phase.score(outcome, config)


_PHASES = "flakestorm.engine.phases"
register(Deferred(PhaseName.CONTRACT, f"{_PHASES}.contract:ContractPhase"))
register(Deferred(PhaseName.CHAOS, f"{_PHASES}.chaos:ChaosPhase"))
register(Deferred(PhaseName.MUTATION, f"{_PHASES}.mutation:MutationPhase"))
register(Deferred(PhaseName.REPLAY, f"{_PHASES}.replay:ReplayPhase"))
