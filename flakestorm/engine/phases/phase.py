"""The phase seam: what every phase (pillar) of a run implements, and what it is given.

A run is a loop over phases (:mod:`flakestorm.engine.runner`). Each phase is one object registered
in
:mod:`flakestorm.engine.phases.registry`, and goes through the same four steps::

    configured(config)      is its section in the config?
    plan(loaded, request)   its work, checked before the agent starts (UsageError: exit 2)
    run(plan, context)      its work done against the agent -> PhaseOutcome (unscored)
    score(outcome, config)  its score 0–100 and critical failures -> PhaseScore (pure)

The outcome is all the reports need: they iterate :attr:`RunResult.phases` and never name a
phase, so adding a phase is one module plus one registration line.

Shards (``--shard K/N``, SPEC §9). A sharded run gives every phase the shard in
``request.shard``; a phase plans all its items in a stable order and keeps its part with one
call, ``request.deal(items)`` (item ``i`` is shard ``i mod N + 1``'s; unsharded, every item),
then runs only those. Its outcome holds only its part of the items, each with its stable
index, so ``flakestorm merge`` can put the shards' outcomes back together
(:mod:`flakestorm.engine.merge`) and score them again with ``score(outcome, config)``. Anything a
phase judges across items (like a scenario's fault delivery) must be judged again from what
the outcome stores, over all shards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from flakestorm.config import Config, Scenario
from flakestorm.config import PhaseName as PhaseName
from flakestorm.results.shards import Shard, deal

if TYPE_CHECKING:  # the engine, imported by what runs a phase (validate imports only names)
    from flakestorm.chaos.channels.channel import Channel
    from flakestorm.engine.executor import Executor
    from flakestorm.engine.run_plan import RunPlan
    from flakestorm.loader import LoadedConfig
    from flakestorm.results.model import PhaseOutcome, PhaseScore

_T = TypeVar("_T")


@dataclass(frozen=True)
class PhaseRequest:
    """What the command line asks of the phases beyond the config."""

    chaos_profile: str | None = None
    """A built-in chaos profile that replaces the top-level ``chaos`` section."""
    shard: Shard | None = None
    """The part of the run to do (``--shard K/N``); None: all of it."""
    sessions: bool | None = None
    """Whether the agent keeps a session per cell, as the run's plan says (None: not known
    before the agent is imported)."""

    def deal(self, items: Sequence[_T]) -> list[_T]:
        """This run's part of a phase's ``items``, listed in their stable order (the position
        is the item's index): all of them unsharded, else every N-th from the K-th."""
        return deal(self.shard, items)


class PhasePlan(Protocol):
    """A phase's work, known before the agent starts. A plan whose work needs the fault
    channel without declaring chaos scenarios (the replay phase serves recorded responses on
    it) also has ``needs_channel = True``."""

    @property
    def cells(self) -> Sequence[object]:
        """The units that pass or fail (progress counts them)."""
        ...

    @property
    def scenarios(self) -> Sequence[Scenario]:
        """The scenarios it activates (the runner opens a fault channel when one needs it)."""
        ...


@dataclass(frozen=True)
class PhaseContext:
    """What a phase runs with: the agent's executor and fault channel, shared by all phases."""

    loaded: LoadedConfig
    executor: Executor
    channel: Channel | None
    first: bool
    """Whether this is the first phase of the run (run-wide checks happen once)."""
    stop: threading.Event
    notice: Callable[[str], None]
    plan: RunPlan
    """The run's plan (:mod:`flakestorm.engine.run_plan`): its channel, sessions, reset, and
    how each phase's scenarios run; the phases execute it, they do not decide it again."""
    spool_dir: Path | None = None
    """Where finished cells are streamed to (:mod:`flakestorm.results.spool`): the report directory;
    None: the system's temporary directory."""


class Phase(Protocol):
    """One phase of a run; see the module docstring for the steps."""

    @property
    def name(self) -> str:
        """Its key in :attr:`RunResult.phases` and in the weights (a :class:`PhaseName`
        value for the built-in phases)."""
        ...

    def configured(self, config: Config) -> bool: ...

    def weight(self, config: Config) -> float: ...

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> PhasePlan: ...

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome: ...

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore: ...


class SectionPhase:
    """A built-in phase, turned on and weighted by its config section (:attr:`kind`)."""

    kind: PhaseName

    @property
    def name(self) -> str:
        return self.kind.value

    def configured(self, config: Config) -> bool:
        return self.kind.configured(config)

    def weight(self, config: Config) -> float:
        return self.kind.weight(config)
