"""Schedules: which matching calls of an invocation a fault acts on (SPEC §4.1, "Schedules").

A fault acts on a call when the call is inside every part of its schedule:

- ``calls``: the call's number among the invocation's matching calls (1-based), in one of the
  listed ranges: ``"1-2"`` (the first two: a retry that makes a third call succeeds),
  ``"3-"`` (from the third on), ``"2,4"``, ``"1-2,5"``; ``after_calls: N`` is ``"N+1-"``;
- ``every: K``: every K-th matching call (the K-th, the 2K-th, ...): an intermittent
  dependency;
- ``window_ms: [FROM, TO]``: from FROM to TO ms after the invocation started: an outage that
  heals;
- ``turns: [N, ...]``: only while those turns of a conversation run (SPEC §12): the invocation
  id of a turn ends ``.TURN`` (:func:`turn_of`), a one-message prompt is turn 1.

Pure: :class:`Schedule` is a value, :meth:`Schedule.covers` the one decision both delivery
paths take (through :class:`~flakestorm.chaos.faults.decisions.FaultBook`), and :func:`problems`
what the config's meaning checks report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d+)?)?\s*$")
_TURN = re.compile(r"#\d+\.\d+\.(\d+)$")
CALLS_EXAMPLES = '"1-2" (the first two), "3-" (from the third on), "2,4", "1-2,5"'


class ScheduleError(ValueError):
    """A ``calls`` value that does not parse, with what is valid."""


def parse_calls(text: str) -> tuple[tuple[int, int | None], ...]:
    """``"1-2,5"`` -> ``((1, 2), (5, 5))``; ``"3-"`` -> ``((3, None),)`` (1-based, inclusive)."""
    ranges: list[tuple[int, int | None]] = []
    for part in text.split(","):
        match = _RANGE.match(part)
        if not match:
            raise ScheduleError(
                f"{part.strip()!r} is not a call number or range ({CALLS_EXAMPLES})"
            )
        start = int(match[1])
        end = None if match[2] and match[3] is None else int(match[3] or match[1])
        if start < 1:
            raise ScheduleError(f"{part.strip()!r}: calls are numbered from 1 ({CALLS_EXAMPLES})")
        if end is not None and end < start:
            raise ScheduleError(
                f"{part.strip()!r}: a range goes up, from its first call to its last "
                f"({CALLS_EXAMPLES})"
            )
        ranges.append((start, end))
    return tuple(ranges)


def turn_of(invocation: str) -> int:
    """The turn an invocation is (``cell#0.4.2`` → 2); 1 for a one-message prompt's."""
    found = _TURN.search(invocation)
    return int(found[1]) if found else 1


@dataclass(frozen=True)
class Schedule:
    """Which matching calls of an invocation a fault acts on; the empty schedule: all."""

    calls: tuple[tuple[int, int | None], ...] = ()
    every: int | None = None
    window_ms: tuple[int, int] | None = None
    turns: tuple[int, ...] = ()
    """The turns of a conversation it is active in (empty: every turn)."""

    @classmethod
    def of(
        cls,
        calls: str | None = None,
        every: int | None = None,
        window_ms: Sequence[int] | None = None,
        after_calls: int = 0,
        turns: Sequence[int] | None = None,
    ) -> Schedule:
        """A fault's schedule from its fields (``calls`` already checked by the config)."""
        ranges = parse_calls(calls) if calls else ()
        if after_calls and not ranges:
            ranges = ((after_calls + 1, None),)
        window = (int(window_ms[0]), int(window_ms[1])) if window_ms else None
        return cls(ranges, every, window, tuple(turns or ()))

    def in_turn(self, invocation: str) -> bool:
        """Whether it is active during ``invocation`` (its turn one of ``turns``)."""
        return not self.turns or turn_of(invocation) in self.turns

    @property
    def timed(self) -> bool:
        """Whether it depends on when a call comes (``window_ms``)."""
        return self.window_ms is not None

    @property
    def every_call(self) -> bool:
        """Whether it covers every matching call (no ``calls``, ``every`` or ``window_ms``)."""
        return not self.calls and self.every is None and self.window_ms is None

    def covers(self, number: int, elapsed_ms: float | None = None) -> bool:
        """Whether the ``number``-th matching call of an invocation (1-based), ``elapsed_ms``
        after the invocation started, is inside the schedule."""
        if self.calls and not any(
            start <= number and (end is None or number <= end) for start, end in self.calls
        ):
            return False
        if self.every is not None and number % self.every:
            return False
        if self.window_ms is not None:
            if elapsed_ms is None:
                return False
            low, high = self.window_ms
            if not low <= elapsed_ms < high:
                return False
        return True

    def can_fire(self) -> bool:
        """Whether any call can be inside it (``calls: "1-2"`` with ``every: 3`` cannot)."""
        if self.window_ms is not None and self.window_ms[0] >= self.window_ms[1]:
            return False
        if not self.calls or self.every is None:
            return True
        for start, end in self.calls:
            if end is None:
                return True
            first = -(-start // self.every) * self.every
            if first <= end:
                return True
        return False

    def describe(self) -> str:
        """``calls 2-3, every 2nd call, 0-500 ms after the invocation started``."""
        parts = []
        if self.calls:
            shown = ",".join(
                f"{s}-" if e is None else (str(s) if s == e else f"{s}-{e}") for s, e in self.calls
            )
            parts.append(f"calls {shown}")
        if self.every is not None and self.every > 1:
            parts.append(f"every {_ordinal(self.every)} call")
        if self.window_ms is not None:
            parts.append(f"{self.window_ms[0]}-{self.window_ms[1]} ms after the invocation started")
        if self.turns:
            parts.append(
                f"turn{'s' if len(self.turns) > 1 else ''} {', '.join(map(str, self.turns))}"
            )
        return ", ".join(parts) or "every call"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
