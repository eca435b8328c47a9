"""``cut_stream`` (SPEC §16): an LLM stream cut after ``after_chunks`` content chunks (and
``timeout`` with ``after_chunks``, which then holds it: :mod:`flakestorm.chaos.llm.pacing`).

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
        """The cut a ``cut_stream`` fault makes, or a ``timeout`` with ``after_chunks`` (which
        then holds the stream); None for any other fault."""
        if fault.mode is LlmFaultMode.CUT_STREAM or (
            fault.mode is LlmFaultMode.TIMEOUT and fault.after_chunks is not None
        ):
            return cls(fault.after_chunks or 0)
        return None

    def unapplied(self) -> str | None:
        """Why the cut was not made, once the stream has ended (None: it was)."""
        if self.done:
            return None
        return (
            f"the stream ended after {self.seen} content chunks, before the cut after "
            f"{self.after_chunks}"
        )

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
