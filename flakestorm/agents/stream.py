"""A streamed reply read as it arrives (``agent.stream``, SPEC §16): framing, content, the end.

:class:`StreamReader` is fed the body's bytes as they come, chunked at any boundary, each
chunk with its arrival time; it assembles the answer's text (what every other invariant
checks) and measures the figures of :class:`~flakestorm.results.stream_timing.StreamTiming`.
Pure: no I/O, time is given.

Framing: ``openai``, ``anthropic`` and ``sse`` bodies are server-sent events (lines ended by
CRLF, LF or CR; a blank line ends an event; ``:`` starts a comment), ``ndjson`` is one JSON
value a line, ``text`` is the text itself (each non-empty chunk a content event, the end of
the body the end).

What is content, and what ends the stream:

- ``openai``: a chat completion chunk's ``choices[].delta.content`` (a completion's
  ``choices[].text``, a Responses API ``response.output_text.delta``), when not empty; the end
  is ``data: [DONE]`` (a Responses API stream's ``response.completed``). A role-only first
  chunk, a tool call's delta, a usage chunk are not content.
- ``anthropic``: a ``content_block_delta`` with a non-empty ``text_delta``; the end is
  ``message_stop``. ``ping``, ``message_start``, ``message_delta`` are not content.
- ``sse`` / ``ndjson``: the string at ``path`` in the event's JSON (for ``sse`` without a
  ``path``: the event's data as text), when not empty; the end is ``done``: an SSE event of
  that name, a data payload (or line) that is exactly it, or ``PATH=VALUE`` on the event's JSON
  (``type=done``, ``done=true``: a non-string value is compared as JSON text).

Text that is not UTF-8 makes the reply unparseable (:class:`~flakestorm.errors.AgentError`),
as for a reply that is not streamed.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any

from flakestorm.config import AgentStream, StreamFormat
from flakestorm.errors import AgentError, AgentErrorKind
from flakestorm.results.stream_timing import (
    TIMELINE_EDGE,
    Ending,
    StreamEvent,
    StreamTiming,
)

EXCERPT = 40
"""Characters of an event's text kept in the timeline."""

_OTHER, _CONTENT, _COMMENT, _DONE = "other", "content", "comment", "done"


class StreamReader:
    """One streamed reply: :meth:`feed` its chunks, then :meth:`finish`."""

    def __init__(self, spec: AgentStream) -> None:
        self.spec = spec
        self._pieces: list[str] = []
        self._lines = _Lines()
        self._event = _SseEvent()
        self._text = codecs.getincrementaldecoder("utf-8")("strict")
        self._timing = _Timing()
        self.done = False
        """Whether the terminal event arrived (nothing after it is read)."""

    @property
    def text(self) -> str:
        """The answer assembled so far."""
        return "".join(self._pieces)

    def feed(self, chunk: bytes, at_ms: float) -> bool:
        """Read ``chunk``, arrived ``at_ms`` into the invocation; whether the stream is done."""
        if self.done or not chunk:
            return self.done
        self._timing.byte(at_ms)
        if self.spec.format is StreamFormat.TEXT:
            self._content(_decoded(self._text, chunk), at_ms)
            return False
        for line in self._lines.feed(chunk):
            self._line(line, at_ms)
            if self.done:
                break
        return self.done

    def nothing(self, at_ms: float) -> None:
        """An event without content arrived (a python stream's empty item)."""
        self._timing.byte(at_ms)

    def finish(self, ending: Ending, at_ms: float) -> StreamTiming:
        """The figures of the stream, which ended ``at_ms`` as ``ending`` says (a ``text``
        stream's clean close, or one after the terminal event, is ``DONE``)."""
        if not self.done and ending in (Ending.DONE, Ending.CLOSED):
            for line in self._lines.rest():  # a last line without its newline
                self._line(line, at_ms)
            if not self.done and self.spec.format.framed_as_sse:
                self._line("", at_ms)  # an event the body ended without a blank line after
            if self.spec.format is StreamFormat.TEXT:
                self._content(_decoded(self._text, b"", final=True), at_ms)
                self.done = True
        if self.done:
            ending = Ending.DONE
        return self._timing.result(self.spec.format.terminal(self.spec.done), ending, at_ms)

    # -- one line of the body

    def _line(self, line: str, at_ms: float) -> None:
        if not self.spec.format.framed_as_sse:
            if line.strip():
                self._event_of("", line.strip(), at_ms)
            return
        if line == "":
            event = self._event
            self._event = _SseEvent()
            if event.data is not None:
                self._event_of(event.name, "\n".join(event.data), at_ms)
            return
        if line.startswith(":"):
            self._timing.event(StreamEvent(at_ms, _COMMENT, line[1:EXCERPT].strip()))
            return
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._event.data = [*(self._event.data or []), value]
        elif name == "event":
            self._event.name = value

    def _event_of(self, name: str, data: str, at_ms: float) -> None:
        kind, text = _READERS[self.spec.format](self.spec, name, data)
        if kind == _DONE:
            self.done = True
        if text:
            self._content(text, at_ms)
            if kind != _DONE:
                return
        self._timing.event(StreamEvent(at_ms, kind, (name or data)[:EXCERPT]))

    def _content(self, text: str, at_ms: float) -> None:
        if not text:
            return
        self._pieces.append(text)
        self._timing.content(at_ms, text[:EXCERPT])


# --------------------------------------------------------------------------- framing


class _SseEvent:
    __slots__ = ("data", "name")

    def __init__(self) -> None:
        self.name = ""
        self.data: list[str] | None = None


class _Lines:
    """UTF-8 lines out of bytes chunked anywhere, ended by CRLF, LF or CR."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> Iterator[str]:
        buffer = self._buffer + chunk
        start = 0
        while True:
            cr, lf = buffer.find(b"\r", start), buffer.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            if end == cr and end + 1 == len(buffer):
                break  # a CR last: its LF may come with the next chunk
            yield _line_text(buffer[start:end])
            start = end + (2 if end == cr and buffer[end + 1 : end + 2] == b"\n" else 1)
        self._buffer = buffer[start:]

    def rest(self) -> Iterator[str]:
        buffer, self._buffer = self._buffer, b""
        for line in buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
            if line:
                yield _line_text(line)


def _line_text(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"the streamed reply is not valid UTF-8 (byte {exc.start} of a line)",
        ) from exc


def _decoded(decoder: codecs.IncrementalDecoder, chunk: bytes, final: bool = False) -> str:
    try:
        return str(decoder.decode(chunk, final))
    except UnicodeDecodeError as exc:
        raise AgentError(
            AgentErrorKind.UNPARSEABLE, "the streamed reply is not valid UTF-8"
        ) from exc


# --------------------------------------------------------------------------- content


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _openai(spec: AgentStream, name: str, data: str) -> tuple[str, str]:
    if data.strip() == "[DONE]":
        return _DONE, ""
    doc = _json(data)
    if not isinstance(doc, dict):
        return _OTHER, ""
    kind = doc.get("type")
    if kind == "response.completed":
        return _DONE, ""
    if kind == "response.output_text.delta":
        return _OTHER, _string(doc.get("delta"))
    text = []
    for choice in doc.get("choices") or ():
        if isinstance(choice, dict):
            delta = choice.get("delta")
            found = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            text.append(_string(found))
    return _OTHER, "".join(text)


def _anthropic(spec: AgentStream, name: str, data: str) -> tuple[str, str]:
    doc = _json(data)
    if not isinstance(doc, dict):
        return _OTHER, ""
    kind = doc.get("type") or name
    if kind == "message_stop":
        return _DONE, ""
    if kind == "content_block_delta":
        delta = doc.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "text_delta":
            return _OTHER, _string(delta.get("text"))
    if kind == "content_block_start":
        block = doc.get("content_block")
        if isinstance(block, dict) and block.get("type") == "text":
            return _OTHER, _string(block.get("text"))
    return _OTHER, ""


def _generic(spec: AgentStream, name: str, data: str) -> tuple[str, str]:
    done = spec.done or ""
    doc = _json(data)
    finished = (name and name == done) or data.strip() == done or _matches(doc, done)
    kind = _DONE if finished else _OTHER
    if spec.path is None:  # sse only: the data is the text
        return kind, "" if finished else data
    found = _at(doc, spec.path)
    return kind, _string(found)


def _matches(doc: Any, done: str) -> bool:
    """Whether ``done`` is ``PATH=VALUE`` and the event's JSON has VALUE at PATH."""
    path, sign, value = done.partition("=")
    if not sign or doc is None:
        return False
    found = _at(doc, path)
    if found is _MISSING:
        return False
    return (found if isinstance(found, str) else json.dumps(found)) == value


_MISSING = object()


def _at(doc: Any, path: str) -> Any:
    node = doc
    for segment in path.split("."):
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.lstrip("-").isdigit():
            index = int(segment)
            if not -len(node) <= index < len(node):
                return _MISSING
            node = node[index]
        else:
            return _MISSING
    return node


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def content_text(frame: bytes) -> str:
    """The content of one complete SSE frame of an OpenAI or Anthropic stream ("" for a frame
    that carries none: a role-only delta, a ping, a comment): what :class:`StreamReader`
    counts as a content event, for the faults that count them (``cut_stream``)."""
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    name, data = "", []
    for line in text.splitlines():
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if not data:
        return ""
    joined = "\n".join(data)
    return _openai(_OPENAI, name, joined)[1] or _anthropic(_OPENAI, name, joined)[1]


_OPENAI = AgentStream(format=StreamFormat.OPENAI)

_READERS = {
    StreamFormat.OPENAI: _openai,
    StreamFormat.ANTHROPIC: _anthropic,
    StreamFormat.SSE: _generic,
    StreamFormat.NDJSON: _generic,
}


# --------------------------------------------------------------------------- figures


class _Timing:
    """The figures, measured as the events come."""

    def __init__(self) -> None:
        self.first_byte: float | None = None
        self.first_content: float | None = None
        self.last_content: float | None = None
        self.count = 0
        self.gap = 0.0
        self.gap_after = 0
        self.head: list[StreamEvent] = []
        self.tail: list[StreamEvent] = []
        self.left_out = 0

    def byte(self, at_ms: float) -> None:
        if self.first_byte is None:
            self.first_byte = at_ms

    def content(self, at_ms: float, excerpt: str) -> None:
        if self.first_content is None:
            self.first_content = at_ms
        else:
            self._gap(at_ms)
        self.last_content = at_ms
        self.count += 1
        self.event(StreamEvent(at_ms, _CONTENT, excerpt))

    def _gap(self, at_ms: float) -> None:
        gap = at_ms - self.last_content if self.last_content is not None else -1.0
        if gap > self.gap or (gap >= 0 and not self.gap_after):
            self.gap = gap
            self.gap_after = self.count

    def event(self, event: StreamEvent) -> None:
        if len(self.head) < TIMELINE_EDGE:
            self.head.append(event)
            return
        self.tail.append(event)
        if len(self.tail) > TIMELINE_EDGE:
            self.tail.pop(0)
            self.left_out += 1

    def result(self, terminal: str, ending: Ending, at_ms: float) -> StreamTiming:
        self._gap(at_ms)
        return StreamTiming(
            terminal=terminal,
            ending=ending,
            ended_ms=at_ms,
            first_byte_ms=self.first_byte,
            first_content_ms=self.first_content,
            content_events=self.count,
            longest_gap_ms=self.gap if self.count else at_ms,
            gap_after=self.gap_after,
            timeline=(*self.head, *self.tail),
            events_left_out=self.left_out,
        )
