"""An A2A stream (``SendStreamingMessage``, ``SubscribeToTask``; 0.3's ``message/stream``,
``tasks/resubscribe``) under a fault (SPEC §17): server-sent events, each a JSON-RPC response
(HTTP+JSON: the response itself) holding a task, a message, a status update or an artifact
update (1.0: ``{"task": ...}``, ``{"statusUpdate": ...}``...; 0.3: ``kind: status-update``...).

:class:`StreamEdit` is fed the upstream's bytes (split anywhere) and gives the frames to send:

- ``stream_cut`` (``after_events``): the first N events, then the stream ends — before its
  terminal state;
- ``task_state``: every task and status update in the fault's state (in the version's shape),
  every artifact update dropped: the work never comes back.

It is pure; :attr:`StreamEdit.cut` and :attr:`StreamEdit.task_id` say what it did.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flakestorm.chaos.a2a.protocol import A2aCall, status_of
from flakestorm.chaos.a2a.results import text_part_of
from flakestorm.chaos.llm.streams import FrameBuffer
from flakestorm.config import A2aTaskState

__all__ = ["StreamEdit"]

_KINDS_V03 = {
    "task": "task",
    "status-update": "status",
    "artifact-update": "artifact",
    "message": "message",
}
_KINDS_V1 = (
    ("task", "task"),
    ("statusUpdate", "status"),
    ("artifactUpdate", "artifact"),
    ("message", "message"),
)


@dataclass
class StreamEdit:
    """One A2A stream's frames under a fault (see the module doc)."""

    call: A2aCall
    state: A2aTaskState | None = None
    after_events: int | None = None
    poison: Callable[[str], str] | None = None
    """A context attack's edit of the first text the stream carries."""
    poisoned: bool = False
    """``poison`` was applied to an event."""
    events: int = 0
    """Events sent on so far."""
    cut: bool = False
    """The stream was ended after ``after_events`` events."""
    task_id: str | None = None
    """The task the stream is about (from its first task or status update)."""
    _frames: FrameBuffer = field(default_factory=FrameBuffer)

    @property
    def done(self) -> bool:
        return self.cut

    def feed(self, chunk: bytes) -> list[bytes]:
        """The frames to send on after the upstream's next ``chunk``."""
        out: list[bytes] = []
        self._frames.add(chunk)
        while not self.cut and (frame := self._frames.frame()) is not None:
            out += self._frame(frame)
        return out

    def end(self) -> list[bytes]:
        """The frames to send when the upstream has ended."""
        rest = self._frames.rest()
        if self.cut or not rest.strip():
            return []
        return self._frame(rest + b"\n\n")

    def _frame(self, frame: bytes) -> list[bytes]:
        data = _data(frame)
        if data is None:  # a comment, a keep-alive: passed as it is, not an event
            return [frame]
        sent = frame
        if self.state is not None:
            kind = self._with_state(data)
            if kind == "artifact":
                return []
            if kind is not None:
                sent = b"data: " + json.dumps(data).encode() + b"\n\n"
        elif self.poison is not None and not self.poisoned:
            result = data.get("result") if self.call.jsonrpc and isinstance(data, dict) else data
            part = text_part_of(*_part(result))
            if part is not None:
                part["text"] = self.poison(part["text"])
                self.poisoned = True
                sent = b"data: " + json.dumps(data).encode() + b"\n\n"
        self.events += 1
        if self.after_events is not None and self.events >= self.after_events:
            self.cut = True
        return [sent]

    def _with_state(self, doc: Any) -> str | None:
        """Put ``doc`` (one event's JSON) in the fault's state: what it held (``task``,
        ``status``; ``artifact``: to be dropped), or None when it was left as it is."""
        result = doc.get("result") if self.call.jsonrpc and isinstance(doc, dict) else doc
        kind, part = _part(result)
        if kind == "artifact":
            return kind
        if kind not in ("task", "status") or not isinstance(part, dict):
            return None
        assert self.state is not None
        part["status"] = status_of(self.state, self.call.version)
        if kind == "task":
            part.pop("artifacts", None)
        found = part.get("id") if kind == "task" else part.get("taskId")
        if self.task_id is None and found is not None:
            self.task_id = str(found)
        return kind


def _data(frame: bytes) -> Any | None:
    """The JSON of a frame's ``data`` lines; None for a frame without any (or not JSON)."""
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = [line[5:].lstrip() for line in text.splitlines() if line.startswith("data:")]
    if not lines:
        return None
    try:
        return json.loads("\n".join(lines))
    except (ValueError, RecursionError):
        return None


def _part(result: Any) -> tuple[str | None, Any]:
    """What a stream event holds: ``task``, ``status``, ``artifact`` (or None), and it."""
    if not isinstance(result, dict):
        return None, None
    for key, kind in _KINDS_V1:
        if isinstance(result.get(key), dict):
            return kind, result[key]
    return _KINDS_V03.get(str(result.get("kind"))), result
