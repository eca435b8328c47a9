"""``cut_stream`` (SPEC §16): an LLM stream cut after ``after_chunks`` content chunks.

:class:`Cut` sees the complete SSE frames a stream sends on, in order: it lets through every
frame up to and including the ``after_chunks``-th content chunk (with ``0``: every frame before
the first), then the stream ends — no finish reason, no usage, no ``[DONE]`` or
``message_stop``. A content chunk is what an agent reading the stream counts as one
(:func:`flakestorm.agents.stream.content_text`): never a role-only or empty delta, a ping or a
comment.
"""

from __future__ import annotations

from flakestorm.agents.stream import content_text
from flakestorm.config import LlmFault, LlmFaultMode


class Cut:
    """One stream's cut: :meth:`frames` each batch of frames; :attr:`done` once it is cut."""

    def __init__(self, after_chunks: int) -> None:
        self.after_chunks = after_chunks
        self.seen = 0
        self.done = False

    @classmethod
    def of(cls, fault: LlmFault) -> Cut | None:
        """The cut a ``cut_stream`` fault makes; None for any other mode."""
        if fault.mode is not LlmFaultMode.CUT_STREAM:
            return None
        return cls(fault.after_chunks or 0)

    def frames(self, frames: list[bytes]) -> list[bytes]:
        """The frames of ``frames`` that are sent before the cut."""
        out: list[bytes] = []
        for frame in frames:
            if self.done:
                break
            content = bool(content_text(frame))
            if content and self.seen >= self.after_chunks:
                self.done = True
                break
            out.append(frame)
            self.seen += content
            if content and self.seen >= self.after_chunks:
                self.done = True
        return out
