"""What the action tells the run's page, as data: the builders of ``flakestorm/github/`` return
these, and :class:`flakestorm.github.client.GitHub` writes them (workflow commands on stdout).

- :class:`Annotation`: a message the runner shows on the run page (with ``file``/``line``, on
  the diff too), of a :class:`Level`;
- :class:`Note`: a line for the log (no level) or an annotation without a place, in the order a
  builder says them (:meth:`GitHub.say`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypedDict

__all__ = ["STARTING_GROUP", "TITLE", "Annotation", "Level", "Note"]

TITLE = "flakestorm"
"""What every annotation's title starts with."""

STARTING_GROUP = "flakestorm: starting (chaos proxy, agent, readiness)"
"""The log group of what happens before the first cell: the proxy, the agent starting and,
every 10 s while it is not ready, what was tried and the last error
(:class:`flakestorm.github.progress.Progress`)."""


class Level(str, enum.Enum):
    """An annotation's kind: the workflow command that makes it."""

    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


class Where(TypedDict, total=False):
    """Where an annotation points (a file and line of the diff) and its title."""

    file: str | None
    line: int | None
    title: str | None


@dataclass(frozen=True)
class Annotation:
    """A message the runner shows on the run page (and, with ``file``/``line``, on the diff)."""

    message: str
    file: str | None = None
    line: int | None = None
    title: str | None = None


@dataclass(frozen=True)
class Note:
    """A line for the job's log (``level`` None: written as it is, so it must be text we made
    or made safe) or, with a level, an annotation titled ``title``."""

    text: str
    level: Level | None = None
    title: str | None = None
