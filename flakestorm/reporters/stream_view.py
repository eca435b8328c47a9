"""How a cell's replies streamed, as every report says it (SPEC §16): a line of figures per cell
(the worst first content, the longest stall, how many streams ended with their terminal
event) and, for a failed cell, the failing reply's stream as a timeline.

The texts are plain: each format escapes them with its own function of
:mod:`flakestorm.reporters.escape` (an event's excerpt is agent output, the terminal event's
name may come from the config: both untrusted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.reporters.escape import document_excerpt, document_text, text
from flakestorm.results.model import CellResult, Status
from flakestorm.results.stream_timing import TIMELINE_EDGE, Ending, StreamTiming, duration_text

__all__ = [
    "TimelineRow",
    "cell_stream",
    "failed_stream",
    "html_timeline",
    "markdown_timeline",
    "timeline",
]


def _first(streams: Sequence[StreamTiming]) -> str:
    silent = [s for s in streams if s.first_content_ms is None]
    worst = silent[0] if silent else max(streams, key=lambda s: s.first_content_ms or 0.0)
    at = worst.first_byte_ms
    byte = "no byte" if at is None else f"first byte {duration_text(at)}"
    of = f"; the slowest of {len(streams)} streams" if len(streams) > 1 else ""
    if worst.first_content_ms is None:
        return f"no content in {duration_text(worst.ended_ms)} ({byte}{of})"
    return f"first content {duration_text(worst.first_content_ms)} ({byte}{of})"


def _stall(streams: Sequence[StreamTiming]) -> str | None:
    talking = [s for s in streams if s.content_events]
    if not talking:
        return None
    worst = max(talking, key=lambda s: s.longest_gap_ms)
    where = f"chunk {worst.gap_after}" + (
        " (the last)" if worst.gap_after == worst.content_events else ""
    )
    return f"longest stall {duration_text(worst.longest_gap_ms)} after {where}"


def cell_stream(cell: CellResult) -> str | None:
    """A cell's streams on one line: ``first content 812 ms (first byte 3 ms) · longest stall
    4.01 s after chunk 3 · 2 of 3 ended with [DONE]`` (each format labels it ``stream``);
    None when none of its replies streamed. A reply several invariants judged (a replayed
    session's) is one stream, counted once."""
    streams = list(dict.fromkeys(p.stream for p in cell.prompts if p.stream is not None))
    if not streams:
        return None
    ended = (
        f"{sum(s.completed for s in streams)} of {len(streams)} ended with {streams[0].terminal}"
    )
    parts = [_first(streams), _stall(streams), ended]
    return " · ".join(p for p in parts if p)


def failed_stream(cell: CellResult) -> StreamTiming | None:
    """The stream of a failed cell's first failing reply that streamed; None otherwise."""
    if cell.status is not Status.FAILED:
        return None
    return next((p.stream for p in cell.prompts if not p.passed and p.stream is not None), None)


_ENDINGS = {
    Ending.DONE: "ended with {terminal}",
    Ending.CLOSED: "closed without {terminal}",
    Ending.CUT: "cut mid-body, without {terminal}",
    Ending.RAISED: "broke off (the generator raised)",
    Ending.TIMEOUT: "timed out (agent.timeout), without {terminal}",
}
"""How a timeline's last row says the stream ended."""


@dataclass(frozen=True)
class TimelineRow:
    """One row of a stream's timeline: its event number from 1, when it came, its kind and an
    excerpt of its text; or (``gap``) the events the timeline leaves out."""

    number: str
    at: str
    kind: str
    text: str
    gap: bool = False


def timeline(stream: StreamTiming) -> list[TimelineRow]:
    """``stream``'s timeline, its first and last events with a row for those between, then a
    last row for how it ended."""
    rows: list[TimelineRow] = []
    for index, event in enumerate(stream.timeline):
        number = index + 1
        if index >= TIMELINE_EDGE and stream.events_left_out:
            if index == TIMELINE_EDGE:
                left = stream.events_left_out
                skipped = f"{left} event{'s' if left != 1 else ''} left out"
                rows.append(TimelineRow("…", "", "", skipped, gap=True))
            number += stream.events_left_out
        rows.append(TimelineRow(str(number), duration_text(event.at_ms), event.kind, event.text))
    how = _ENDINGS[stream.ending].format(terminal=stream.terminal)
    rows.append(TimelineRow("", duration_text(stream.ended_ms), how, ""))
    return rows


def markdown_timeline(stream: StreamTiming) -> list[str]:
    """A failed reply's stream as a markdown table (each text through
    :func:`flakestorm.reporters.escape.text`), with a label line before it."""
    out = [
        "",
        "**The failing reply's stream:**",
        "",
        "| # | at | event | text |",
        "|---|---|---|---|",
    ]
    for row in timeline(stream):
        out.append(
            f"| {row.number} | {row.at} | {text(row.kind)} | {text(row.text, EVENT_CHARS)} |"
        )
    return [*out, ""]


EVENT_CHARS = 80
"""How much of an event's text a timeline quotes."""


def html_timeline(cell: CellResult) -> tuple[TimelineRow, ...]:
    """A failed cell's failing stream's timeline for report.html, each text through
    :func:`flakestorm.reporters.escape.document_excerpt` (the template escapes HTML)."""
    stream = failed_stream(cell)
    if stream is None:
        return ()
    return tuple(
        dataclasses.replace(
            row, kind=document_text(row.kind), text=document_excerpt(row.text, EVENT_CHARS)
        )
        for row in timeline(stream)
    )
