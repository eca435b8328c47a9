"""What a run reports while it runs: the progress events the executor and the phases send to
the ``on_event`` callback (the CLI's progress bar and lines, the action's log). Data only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.results.model import CellResult


@dataclass(frozen=True)
class CellFinished:
    result: CellResult
    done: int
    total: int


@dataclass(frozen=True)
class ScenarioFinished:
    name: str
    results: Sequence[CellResult]
    """In index order (a phase's cells may be read back from disk as they are used)."""


@dataclass(frozen=True)
class RunPlanned:
    """Sent once before anything runs: how many cells the whole run has (every phase)."""

    cells: int


@dataclass(frozen=True)
class ProbeFinished:
    """A probe (one mutation) ran all its repeats: progress counts it like a cell."""

    probe_id: str
    passed: bool
    done: int
    total: int
    sent: int
    """Probes finished so far that reached the agent (a failed reset or a stop sends none)."""


Event = CellFinished | ScenarioFinished | RunPlanned | ProbeFinished
