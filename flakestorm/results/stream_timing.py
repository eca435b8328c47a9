"""How a streamed reply arrived (``agent.stream``, SPEC §16): a few figures, small and fixed in
size, that the agents measure and the stream invariants (``ttft``, ``max_stall``,
``stream_completes``) judge. Every time is in milliseconds since the invocation started.

A *content event* is one that carries text of the answer: never a role-only or empty delta, a
comment frame, a keep-alive ping or the first byte. The longest stall is the longest gap
between content events, the gap from the last one to the stream's end included.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TIMELINE_EDGE = 8
"""Events kept of a stream for a report's timeline: its first and its last this many."""


def duration_text(ms: float) -> str:
    """``812 ms`` below a second, ``4.01 s`` from one: how reasons and reports say a time."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


class Ending(str, enum.Enum):
    """How a stream ended."""

    DONE = "done"
    """Its terminal event arrived (for ``text``: the body ended cleanly)."""
    CLOSED = "closed"
    """The body ended cleanly without the terminal event."""
    CUT = "cut"
    """The connection broke mid-body."""
    RAISED = "raised"
    """A python agent's generator raised after yielding part of its answer."""
    TIMEOUT = "timeout"
    """``agent.timeout`` passed first (the invocation errors)."""


@dataclass(frozen=True)
class StreamEvent:
    """One event of a stream's timeline: when it came, what it was, and an excerpt."""

    at_ms: float
    kind: str
    """``content``, ``other`` (a role-only delta, metadata, a ping), ``comment`` or ``done``."""
    text: str = ""


@dataclass(frozen=True)
class StreamTiming:
    """The figures of one streamed reply."""

    terminal: str
    """The terminal event's name, for reasons: ``[DONE]``, ``message_stop``, ``done``'s."""
    ending: Ending
    ended_ms: float
    first_byte_ms: float | None = None
    first_content_ms: float | None = None
    content_events: int = 0
    longest_gap_ms: float = 0.0
    """The longest gap between content events (the last one to the end included)."""
    gap_after: int = 0
    """The content event the longest gap followed (1-based; 0 when there was none)."""
    timeline: tuple[StreamEvent, ...] = ()
    """The first and last :data:`TIMELINE_EDGE` events."""
    events_left_out: int = 0
    """Events between those two ends that the timeline does not keep."""

    @property
    def completed(self) -> bool:
        return self.ending is Ending.DONE


def timing_from_document(d: Mapping[str, Any]) -> StreamTiming:
    """A stream's figures read back from ``results.json`` (its types checked by the reader)."""
    timeline = tuple(StreamEvent(**event) for event in d.get("timeline", ()))
    return StreamTiming(**{**d, "ending": Ending(d["ending"]), "timeline": timeline})
