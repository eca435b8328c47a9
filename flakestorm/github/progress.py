"""The run's progress in the job's log: two collapsible groups, one open at a time.

GitHub does not nest log groups: the notices before the first cell (the proxy, the agent
starting, readiness every 10 s) go in :data:`STARTING_GROUP`, then the run's lines (a failed or
errored cell, each scenario's line) in a group titled by :func:`run_title`.
"""

from __future__ import annotations

import contextlib
import threading

from flakestorm.engine.events import CellFinished, Event, ScenarioFinished
from flakestorm.github.client import GitHub
from flakestorm.github.notes import STARTING_GROUP
from flakestorm.github.settings import Command, Settings
from flakestorm.reporters.escape import log_line
from flakestorm.reporters.public import public_cell
from flakestorm.reporters.terminal import scenario_line
from flakestorm.results.model import Status

__all__ = ["STARTING_GROUP", "Progress", "run_title"]


def run_title(settings: Settings) -> str:
    """The run's log group: ``flakestorm ci: every configured phase, shard 1/2``."""
    what = "every configured phase" if settings.command is Command.CI else "the contract"
    if settings.shard is not None:
        what += f", shard {settings.shard}"
    return f"flakestorm {settings.command.value}: {what}"


class Progress:
    """Progress lines for the log (agent output only through
    :func:`~flakestorm.reporters.escape.log_line`; with ``redact``,
    public-safe as the job summary), in collapsible groups, one open at a time: the notices
    before the first cell in :data:`STARTING_GROUP`, then the run's lines in a group titled
    ``run_title``. A context manager: leaving it ends the open group."""

    def __init__(self, gh: GitHub, run_title: str, redact: bool = True) -> None:
        self._gh = gh
        self._run_title = run_title
        self._redact = redact
        self._lock = threading.Lock()
        self._group: str | None = None
        self._groups = contextlib.ExitStack()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._groups.close()

    def _in_group(self, title: str) -> None:
        if self._group != title:
            self._groups.close()
            self._groups.enter_context(self._gh.group(title))
            self._group = title

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, (CellFinished, ScenarioFinished)):
                self._in_group(self._run_title)
            if isinstance(event, CellFinished):
                cell = public_cell(event.result) if self._redact else event.result
                if cell.status in (Status.FAILED, Status.ERRORED):
                    self._gh.log(
                        f"  {cell.status.value.upper()} {log_line(cell.id, 120)} "
                        f"[{cell.severity}]: {log_line(cell.reason, 300)}"
                    )
            elif isinstance(event, ScenarioFinished):
                self._gh.log(scenario_line(event.name, event.results))

    def notice(self, text: str) -> None:
        with self._lock:
            if self._group is None:
                self._in_group(STARTING_GROUP)
            self._gh.log(log_line(text, 1000))
