"""A faulted LLM stream, fed as it comes (SPEC §4.1, §16): :class:`StreamFaulter` turns upstream's
SSE bytes (split anywhere) into complete frames with a fault applied — the text modes through the
editors of :mod:`flakestorm.chaos.llm.streams`, the stream modes by relaying upstream's frames as
they are, up to a :class:`~flakestorm.chaos.llm.cuts.Cut` and timed by a
:class:`~flakestorm.chaos.llm.pacing.Pacing` the sender applies (:meth:`StreamFaulter.wait_ms`,
:attr:`StreamFaulter.hold_ms`). :func:`fault_on_stream` is the same as a lazy iterator.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from flakestorm.chaos.llm.cuts import Cut
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.llm.pacing import Pacing
from flakestorm.chaos.llm.protocol import Provider
from flakestorm.chaos.llm.streams import Frame, FrameBuffer, StreamEdit, edited, stream_edit
from flakestorm.config import LlmFault

__all__ = ["StreamFaulter", "fault_on_stream"]


class StreamFaulter:
    """:func:`fault_on_stream` fed chunk by chunk, for a caller that reads upstream itself (an
    SDK stream read with ``async for``): :meth:`feed` each chunk and send on what it returns
    until :attr:`done`, then send :meth:`end`'s frames."""

    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self._fault = fault
        self._rng = rng
        unit = LLM_MODES[fault.mode]
        self._through = unit.answers_instead(fault)
        self._keeps = unit.keeps_frames
        self._frames = FrameBuffer()
        self._edit: StreamEdit | None = None
        self._cut = Cut.of(fault)
        self._pacing = Pacing.of(fault)
        self.done = False
        """The fault has ended the stream early: stop reading upstream."""

    @property
    def passes_through(self) -> bool:
        """The fault never acts on a stream (``rate_limit``, ``timeout``: they replace it)."""
        return self._through

    @property
    def recognised(self) -> bool:
        """Whether the stream was recognised as one the fault can act on (a protocol's)."""
        return self._edit is not None

    def wait_ms(self, frame: bytes) -> int:
        """How long the sender waits before sending ``frame`` on (``slow_stream``)."""
        return 0 if self._pacing is None or self._through else self._pacing.wait_ms(frame)

    @property
    def hold_ms(self) -> int | None:
        """Once the frames are sent: hold the stream this long, then drop it (``timeout``
        with ``after_chunks``, once it cut the stream); None: end it."""
        if self._pacing is None or self._through or not self.done:
            return None
        return self._pacing.hold_ms

    @property
    def unapplied(self) -> str | None:
        """Once the stream has ended: why the fault was not applied to it, or None."""
        if self._through:
            return None
        if not self.recognised:
            return "the stream was not an OpenAI or Anthropic server-sent event stream"
        if self._cut is not None:
            return self._cut.unapplied()
        return None if self._pacing is None else self._pacing.unapplied()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The frames to send on after upstream's next ``chunk`` (split anywhere)."""
        if self._through:
            return [chunk]
        out: list[bytes] = []
        self._frames.add(chunk)
        while not self.done and (raw := self._frames.frame()) is not None:
            out += self._frame(Frame.parse(raw))
        return out

    def end(self) -> list[bytes]:
        """The frames to send when upstream has ended."""
        if self._through or self.done:
            return []
        out: list[bytes] = []
        rest = self._frames.rest()
        if rest.strip():
            out += self._frame(Frame.parse(rest))
        if self._edit is not None and not self.done and not self._keeps:
            out += self._edit.end()
        return out

    def _frame(self, frame: Frame) -> list[bytes]:
        doc = frame.json()
        if self._edit is None and doc is not None:
            self._edit = stream_edit(self._fault, doc, self._rng)
        edit = self._edit
        if edit is None:
            return [frame.raw]
        if self._keeps:  # upstream's frames as they are (up to a cut); the sender times them
            if self._cut is None:
                return [frame.raw]
            out = self._cut.frames([frame.raw])
            self.done = self._cut.done
            return out
        out = edit.other(frame) if doc is None else edit.frame(frame, doc)
        self.done = edit.done
        return out


def fault_on_stream(
    fault: LlmFault, provider: Provider, chunks: Iterable[bytes], rng: random.Random
) -> Iterator[bytes]:
    """Upstream's SSE bytes (split anywhere) as the agent should see them under ``fault``: a
    lazy iterator of complete SSE frames (see the module docstring).

    When the fault has ended the stream early (Anthropic truncation), the iterator stops
    reading ``chunks``; the caller then closes the upstream connection. ``timeout`` and
    ``rate_limit`` pass through unchanged:
    :func:`~flakestorm.chaos.llm.modes.fault_before_upstream` answers them. ``provider``
    is not needed to tell the protocols apart: each stream says which one it speaks.
    """
    return edited(StreamFaulter(fault, rng), chunks)
