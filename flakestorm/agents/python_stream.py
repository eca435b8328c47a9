"""A python agent's streamed reply (SPEC §16): an endpoint that is a generator, sync or async,
yielding its answer's text as it comes.

Each item is one event, timed as it is yielded: a non-empty ``str`` (or UTF-8 ``bytes``) is
content, an empty one is not (it still counts as the first "byte"). The assembled text is the
output every other invariant checks. The generator's normal end is the stream's terminal event;
one that raises after yielding has broken off mid-answer (``raised``: still an answer, as a
connection cut mid-body is for an http agent); one that raises before yielding anything is the
agent's exception, as for a reply that is not streamed; ``agent.timeout`` errors the invocation,
the reply keeping the figures of what came before it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from flakestorm.agents.stream import StreamReader
from flakestorm.config import AgentStream, StreamFormat
from flakestorm.errors import AgentError, AgentErrorKind
from flakestorm.results.stream_timing import Ending, StreamTiming

__all__ = ["Collector", "collect", "collect_async", "utf8"]

_TEXT = AgentStream(format=StreamFormat.TEXT)
TERMINAL = "the generator's end"
"""The terminal event of a python agent's stream, as reasons name it."""


class Collector:
    """What an invocation's generator yielded, timed from ``started`` (``perf_counter``), at
    most ``cap`` bytes of text (``agent.max_response_bytes``: past it, TOO_LARGE). Thread-safe:
    once :meth:`finish` is called (the timeout), a later item stops the generator (it is not
    read on in the background)."""

    def __init__(self, started: float, endpoint: str, cap: int) -> None:
        self._started = started
        self._endpoint = endpoint
        self._cap = cap
        self._size = 0
        self._reader = StreamReader(_TEXT)
        self._lock = threading.Lock()
        self._timing: StreamTiming | None = None
        self.items = 0
        """Items yielded so far."""
        self.streamed = False
        """The endpoint handed back a generator: its reply is a stream."""

    @property
    def text(self) -> str:
        return self._reader.text

    def item(self, value: Any) -> None:
        """One yielded item, arrived now."""
        piece = self._piece(value)
        with self._lock:
            if self._timing is not None:  # timed out: stop the generator reading on
                raise AgentError(AgentErrorKind.TIMEOUT, "the stream was left at agent.timeout")
            self._size += len(piece.encode("utf-8"))
            if self._size > self._cap:
                raise AgentError(
                    AgentErrorKind.TOO_LARGE,
                    f"the streamed reply is larger than agent.max_response_bytes ({self._cap} "
                    "bytes); reading stopped there",
                )
            self.items += 1
            if piece:
                self._reader.feed(piece.encode("utf-8"), self._ms())
            else:
                self._reader.nothing(self._ms())

    def finish(self, ending: Ending) -> StreamTiming:
        """The stream's figures, ended now as ``ending`` says (the first call decides)."""
        with self._lock:
            if self._timing is None:
                timing = self._reader.finish(ending, self._ms())
                self._timing = dataclasses.replace(timing, terminal=TERMINAL)
            return self._timing

    def _piece(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):
            return utf8(value, f"{self._endpoint} yielded")
        shown = "None" if value is None else f"a {type(value).__name__}"
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"{self._endpoint} yielded {shown}; a streaming endpoint yields its text (str)",
        )

    def _ms(self) -> float:
        return (time.perf_counter() - self._started) * 1000


def utf8(value: bytes, what: str) -> str:
    """``value`` decoded; an UNPARSEABLE :class:`AgentError` saying ``what`` bytes that are not
    UTF-8 otherwise (``the agent returned``, ``m:f yielded``)."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AgentError(
            AgentErrorKind.UNPARSEABLE, f"{what} bytes that are not UTF-8 ({exc})"
        ) from exc


def collect(items: Iterator[Any], collector: Collector) -> None:
    """Read a sync generator to its end into ``collector``."""
    collector.streamed = True
    for value in items:
        collector.item(value)


async def collect_async(items: AsyncIterator[Any], collector: Collector) -> None:
    """Read an async generator to its end into ``collector``."""
    collector.streamed = True
    async for value in items:
        collector.item(value)
