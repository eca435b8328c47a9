"""When a faulted LLM stream's frames leave, and how it ends (SPEC §16): ``slow_stream`` and
``timeout`` with ``after_chunks``.

A :class:`Pacing` is pure: it says how long to wait before each frame (:meth:`Pacing.wait_ms`)
and whether, once the frames run out, the stream is held open for :attr:`Pacing.hold_ms` and
then dropped. Whoever sends the frames waits: the chaos proxy on the agent's connection
(:mod:`flakestorm.chaos.proxy.framing`), a python agent's SDK stream as it is read
(:mod:`flakestorm.chaos.wrappers.sdk_streams`), sync or async.

- ``slow_stream``: ``first_token_ms`` before the first content chunk, ``chunk_delay_ms`` before
  each later one; other frames (a role-only delta, a ping, ``[DONE]``) leave when they come.
- ``timeout`` with ``after_chunks``: the stream is relayed as it comes for that many content
  chunks (:class:`~flakestorm.chaos.llm.cuts.Cut` stops it there), then held ``delay_ms``
  with nothing sent, then dropped as a crashed server would drop it.

A content chunk is one an agent reading the stream counts as one
(:func:`flakestorm.agents.stream.content_text`).
"""

from __future__ import annotations

from flakestorm.agents.stream import content_text
from flakestorm.chaos.faults.modes import DEFAULT_TIMEOUT_MS
from flakestorm.config import LlmFault, LlmFaultMode

__all__ = ["Pacing"]


class Pacing:
    """One stream's timing under a fault (see the module doc)."""

    def __init__(
        self, first_token_ms: int = 0, chunk_delay_ms: int = 0, hold_ms: int | None = None
    ) -> None:
        self.first_token_ms = first_token_ms
        self.chunk_delay_ms = chunk_delay_ms
        self.hold_ms = hold_ms
        """Hold the stream this long once its frames run out, then drop it (None: end it)."""
        self.content_chunks = 0
        """Content chunks sent on so far."""

    @classmethod
    def of(cls, fault: LlmFault) -> Pacing | None:
        """The pacing a fault gives a stream: ``slow_stream``'s, or ``timeout`` with
        ``after_chunks``'s; None for any other fault."""
        if fault.mode is LlmFaultMode.SLOW_STREAM:
            return cls(fault.first_token_ms or 0, fault.chunk_delay_ms or 0)
        if fault.mode is LlmFaultMode.TIMEOUT and fault.after_chunks is not None:
            return cls(hold_ms=DEFAULT_TIMEOUT_MS if fault.delay_ms is None else fault.delay_ms)
        return None

    def unapplied(self) -> str | None:
        """Why the waits were not applied, once the stream has ended (None: they were): no
        content chunk came to wait before (with only ``chunk_delay_ms``: no second one)."""
        if self.hold_ms is not None:
            return None  # a hold is made after its cut (Cut.unapplied)
        if self.content_chunks and (self.first_token_ms or self.content_chunks > 1):
            return None
        if self.content_chunks == 0:
            return "the stream carried no content chunk to delay"
        return "the stream carried one content chunk: none after it to delay"

    def wait_ms(self, frame: bytes) -> int:
        """How long to wait before sending ``frame`` on (one complete SSE frame)."""
        if not content_text(frame):
            return 0
        self.content_chunks += 1
        return self.first_token_ms if self.content_chunks == 1 else self.chunk_delay_ms
