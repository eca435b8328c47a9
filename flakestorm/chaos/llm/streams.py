"""LLM faults on server-sent event streams (``"stream": true``) of OpenAI chat completions,
completions and the Responses API, and of Anthropic messages.

:func:`fault_on_stream` is a lazy transform of the upstream SSE bytes (chunked at any
boundary) into complete SSE frames, with the modes of :mod:`flakestorm.chaos.llm.modes`
applied to the text (the same :class:`~flakestorm.chaos.llm.replies.TextEditor`).
``empty`` and ``truncated_response`` act delta by delta; ``garbage`` and ``response_drift``
hold back each text part's deltas and send the rewritten text as one delta just before that
part ends (in a Responses API stream, a fresh ``response.output_text.delta`` event before
``response.output_text.done``, which carries the rewritten text; later events'
``sequence_number`` move up by one, so they stay increasing). A truncated Anthropic stream
ends right after the cut (``content_block_stop``, ``message_delta`` with ``stop_reason:
"max_tokens"``, ``message_stop``); a truncated OpenAI stream sends the ``finish_reason:
"length"`` chunk at the cut and then drops the choice's remaining deltas up to upstream's
``data: [DONE]`` (so a requested usage chunk still arrives, with adjusted counts). Tool calls
are dropped by ``truncated_response`` and ``empty`` and kept by the others, as in whole
replies. ``timeout`` and ``rate_limit`` never reach a stream (they replace the upstream call)
and pass through unchanged. A ``delay_ms`` on a content mode is a wait the caller applies
before sending the first frame. Responses API streams get the text transforms on their
``response.output_text.*`` events and on the final response object, but keep their
``function_call`` items.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from flakestorm.chaos.llm.protocol import dump_json
from flakestorm.chaos.llm.replies import TOOL_BLOCKS, TextEditor, set_usage
from flakestorm.chaos.llm.text import count_tokens, truncate_text
from flakestorm.config import LlmFault

__all__ = [
    "FRAME_END",
    "Frame",
    "FrameBuffer",
    "FrameEditor",
    "StreamEdit",
    "edited",
    "stream_edit",
]

# --------------------------------------------------------------------------- SSE frames

FRAME_END = re.compile(rb"\r?\n\r?\n")


class FrameBuffer:
    """An SSE stream's bytes, added as they come (split anywhere), taken back a whole frame
    (its blank line included) at a time."""

    def __init__(self) -> None:
        self._buffer = b""

    def add(self, chunk: bytes) -> None:
        self._buffer += chunk

    def frame(self) -> bytes | None:
        """The next whole frame, or None until one has come."""
        match = FRAME_END.search(self._buffer)
        if match is None:
            return None
        frame, self._buffer = self._buffer[: match.end()], self._buffer[match.end() :]
        return frame

    def rest(self) -> bytes:
        """What came after the last whole frame (the buffer is emptied)."""
        rest, self._buffer = self._buffer, b""
        return rest


class FrameEditor(Protocol):
    """Edits a stream's frames as its bytes come: :meth:`feed` each chunk and send on what it
    returns until :attr:`done`, then :meth:`end`'s frames."""

    @property
    def done(self) -> bool: ...
    def feed(self, chunk: bytes) -> list[bytes]: ...
    def end(self) -> list[bytes]: ...


def edited(editor: FrameEditor, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` through ``editor``, lazily: reading stops once the editor is done."""
    for chunk in chunks:
        yield from editor.feed(chunk)
        if editor.done:
            return
    yield from editor.end()


@dataclass
class Frame:
    """One SSE frame as upstream sent it, and its ``data`` lines joined."""

    raw: bytes
    data: str | None = None

    @classmethod
    def parse(cls, raw: bytes) -> Frame:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return cls(raw)
        data: list[str] = []
        for line in text.splitlines():
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
        return cls(raw, "\n".join(data) if data else None)

    def json(self) -> dict[str, Any] | None:
        if self.data is None or self.data == "[DONE]":
            return None
        try:
            value = json.loads(self.data)
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None


def _data_frame(value: Any) -> bytes:
    return b"data: " + dump_json(value) + b"\n\n"


def _event_frame(value: dict[str, Any]) -> bytes:
    return f"event: {value['type']}\n".encode() + _data_frame(value)


class StreamEdit:
    """Edits one SSE stream frame by frame; ``done`` = stop reading upstream."""

    done = False

    def frame(self, frame: Frame, doc: dict[str, Any]) -> list[bytes]:
        raise NotImplementedError

    def other(self, frame: Frame) -> list[bytes]:
        return [frame.raw]

    def end(self) -> list[bytes]:
        return []


@dataclass
class _Part:
    """One text part of a stream being edited: what upstream sent and what was sent on."""

    received: str = ""
    sent: str = ""
    finished: bool = False


def _cut(part: _Part, text: str, budget: int) -> tuple[str, bool]:
    """Feed ``text`` to a truncated part: (what to send on, whether the budget ran out)."""
    part.received += text
    allowed = truncate_text(part.received, budget)
    piece = allowed[len(part.sent) :] if len(allowed) > len(part.sent) else ""
    part.sent += piece
    return piece, count_tokens(part.received) > budget


class _OpenAIStreamEdit(StreamEdit):
    """``chat.completion.chunk`` and ``text_completion`` streams."""

    def __init__(self, fault: LlmFault, rng: random.Random, chat: bool) -> None:
        self.editor = TextEditor(fault, rng)
        self.budget = self.editor.budget
        self.chat = chat
        self.parts: dict[int, _Part] = {}
        self.template: dict[str, Any] = {}

    def _text_of(self, choice: dict[str, Any]) -> Any:
        if self.chat:
            delta = choice.get("delta")
            return delta.get("content") if isinstance(delta, dict) else None
        return choice.get("text")

    def _set_text(self, choice: dict[str, Any], text: str) -> None:
        if not self.chat:
            choice["text"] = text
            return
        delta = choice.setdefault("delta", {})
        if text or delta.get("role") is not None:
            delta["content"] = text
        else:
            delta.pop("content", None)

    def _chunk(self, index: int, text: str | None, finish: str | None) -> bytes:
        choice: dict[str, Any] = {"index": index}
        if self.chat:
            choice["delta"] = {} if text is None else {"content": text}
        else:
            choice["text"] = text or ""
        choice["logprobs"] = None
        choice["finish_reason"] = finish
        return _data_frame({**self.template, "choices": [choice]})

    def _flush(self, index: int, part: _Part) -> list[bytes]:
        """The rewritten text of a held-back part (garbage / drift)."""
        part.sent = self.editor.text(part.received)
        return [self._chunk(index, part.sent, None)] if part.sent else []

    @property
    def holds(self) -> bool:
        return self.editor.rewrites_whole

    def frame(self, frame: Frame, doc: dict[str, Any]) -> list[bytes]:
        choices = doc.get("choices")
        if not isinstance(choices, list):
            return [frame.raw]
        self.template = {k: v for k, v in doc.items() if k not in ("choices", "usage")}
        before: list[bytes] = []
        kept: list[Any] = []
        for choice in choices:
            if not isinstance(choice, dict):
                kept.append(choice)
                continue
            index = int(choice.get("index", 0))
            part = self.parts.setdefault(index, _Part())
            if part.finished:
                continue
            if kept_choice := self._choice(choice, index, part, before):
                kept.append(kept_choice)
        usage = doc.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        if not kept and choices and not isinstance(usage, dict):
            return before
        return [*before, _data_frame({**doc, "choices": kept})]

    def _choice(
        self, choice: dict[str, Any], index: int, part: _Part, before: list[bytes]
    ) -> dict[str, Any] | None:
        delta = choice.get("delta")
        if self.chat and isinstance(delta, dict) and self.editor.drops_tools:
            delta.pop("tool_calls", None)
            delta.pop("function_call", None)
        text = self._text_of(choice)
        hit = False
        if isinstance(text, str) and text:
            if self.editor.truncates:
                piece, hit = _cut(part, text, self.budget)
                self._set_text(choice, piece)
            else:
                part.received += text
                self._set_text(choice, "")
        finish = choice.get("finish_reason")
        if hit:
            choice["finish_reason"] = "length"
            part.finished = True
        elif finish is not None:
            part.finished = True
            if self.editor.truncates:
                choice["finish_reason"] = "length"
            elif self.editor.drops_tools and finish in ("tool_calls", "function_call"):
                choice["finish_reason"] = "stop"
            elif self.holds:
                before += self._flush(index, part)
        delta = choice.get("delta")
        empty_delta = not self.chat or (isinstance(delta, dict) and not delta)
        if (
            choice.get("finish_reason") is None
            and empty_delta
            and not (not self.chat and choice.get("text"))
        ):
            return None
        return choice

    def _usage(self, usage: dict[str, Any]) -> None:
        editor = self.editor
        editor.old_tokens = sum(count_tokens(p.received) for p in self.parts.values())
        editor.new_tokens = sum(count_tokens(p.sent) for p in self.parts.values())
        set_usage(usage, "completion_tokens", editor)

    def _flush_unfinished(self) -> list[bytes]:
        out: list[bytes] = []
        if self.holds:
            for index, part in self.parts.items():
                if not part.finished:
                    part.finished = True
                    out += self._flush(index, part)
        return out

    def other(self, frame: Frame) -> list[bytes]:
        if frame.data == "[DONE]":
            return [*self._flush_unfinished(), frame.raw]
        return [frame.raw]

    def end(self) -> list[bytes]:
        return self._flush_unfinished()


@dataclass
class _Block:
    type: str
    index: int | None
    """The index sent downstream; None when the block is dropped."""
    part: _Part = field(default_factory=_Part)


class _AnthropicStreamEdit(StreamEdit):
    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self.editor = TextEditor(fault, rng)
        self.blocks: dict[int, _Block] = {}
        self.next_index = 0
        self.text_blocks = 0
        self.budget = self.editor.budget
        self.sent_tokens = 0

    def _text_tokens(self) -> tuple[int, int]:
        parts = [b.part for b in self.blocks.values() if b.type == "text"]
        return sum(count_tokens(p.received) for p in parts), sum(
            count_tokens(p.sent) for p in parts
        )

    def _usage(self, usage: dict[str, Any] | None) -> dict[str, Any]:
        old, new = self._text_tokens()
        self.editor.old_tokens, self.editor.new_tokens = old, new
        out = dict(usage or {"output_tokens": new})
        out["output_tokens"] = self.editor.output_tokens(out.get("output_tokens", new))
        return out

    def _stop(self, stop_reason: str) -> list[bytes]:
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        return [
            _event_frame({"type": "message_delta", "delta": delta, "usage": self._usage(None)}),
            _event_frame({"type": "message_stop"}),
        ]

    def _empty_text_block(self) -> list[bytes]:
        index = self.next_index
        self.next_index += 1
        self.text_blocks += 1
        return [
            _event_frame(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
            _event_frame({"type": "content_block_stop", "index": index}),
        ]

    def frame(self, frame: Frame, doc: dict[str, Any]) -> list[bytes]:
        kind = doc.get("type")
        editor = self.editor
        if kind == "content_block_start":
            block_doc = doc.get("content_block")
            block_type = str(block_doc.get("type")) if isinstance(block_doc, dict) else ""
            index = int(doc.get("index", 0))
            if editor.drops_tools and block_type in TOOL_BLOCKS:
                self.blocks[index] = _Block(block_type, None)
                return []
            self.blocks[index] = _Block(block_type, self.next_index)
            self.next_index += 1
            if block_type == "text":
                self.text_blocks += 1
                if isinstance(block_doc, dict) and block_doc.get("text"):
                    block_doc["text"] = ""  # initial text is always "" in practice
            return [_event_frame({**doc, "index": self.blocks[index].index})]
        if kind in ("content_block_delta", "content_block_stop"):
            block = self.blocks.get(int(doc.get("index", 0)))
            if block is None:
                return [frame.raw]
            if block.index is None:
                return []
            doc = {**doc, "index": block.index}
            if kind == "content_block_delta":
                return self._delta(block, doc)
            out: list[bytes] = []
            if block.type == "text" and editor.truncates:  # the budget is per message
                self.sent_tokens += count_tokens(block.part.sent)
            if block.type == "text" and editor.rewrites_whole:
                block.part.sent = editor.text(block.part.received)
                if block.part.sent:
                    out.append(_text_delta(block.index, block.part.sent))
            return [*out, _event_frame(doc)]
        if kind == "message_delta":
            out = []
            if editor.drops_tools and self.text_blocks == 0:
                out += self._empty_text_block()
            delta = doc.get("delta") if isinstance(doc.get("delta"), dict) else {}
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            if editor.truncates:
                reason = "max_tokens"
            elif editor.drops_tools and reason == "tool_use":  # tool calls dropped
                reason = "end_turn"
            usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else None
            doc = {**doc, "delta": {**(delta or {}), "stop_reason": reason}}
            doc["usage"] = self._usage(usage)
            return [*out, _event_frame(doc)]
        return [frame.raw]

    def _delta(self, block: _Block, doc: dict[str, Any]) -> list[bytes]:
        delta = doc.get("delta")
        if block.type != "text" or not isinstance(delta, dict) or delta.get("type") != "text_delta":
            return [_event_frame(doc)]
        text = str(delta.get("text", ""))
        if self.editor.truncates:
            budget = self.budget - self.sent_tokens
            piece, hit = _cut(block.part, text, budget)
            out = [_text_delta(block.index or 0, piece)] if piece else []
            if hit:
                self.done = True
                out.append(_event_frame({"type": "content_block_stop", "index": block.index}))
                return out + self._stop("max_tokens")
            return out
        block.part.received += text
        return []


def _text_delta(index: int, text: str) -> bytes:
    return _event_frame(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }
    )


class _ResponsesStreamEdit(StreamEdit):
    """Responses API streams (``response.*`` events): text only, see the module docstring."""

    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self.editor = TextEditor(fault, rng)
        self.parts: dict[tuple[Any, Any], _Part] = {}
        self.shift = 0
        """Events inserted so far: each later ``sequence_number`` moves up by this much."""

    def _part(self, doc: dict[str, Any]) -> _Part:
        return self.parts.setdefault((doc.get("output_index"), doc.get("content_index")), _Part())

    def _final(self, part: _Part) -> str:
        if not part.finished:
            part.finished = True
            if self.editor.truncates:
                part.sent = truncate_text(part.received, self.editor.budget)
                self.editor.budget -= count_tokens(part.sent)
            else:
                part.sent = self.editor.text(part.received)
        return part.sent

    def frame(self, frame: Frame, doc: dict[str, Any]) -> list[bytes]:
        number = doc.get("sequence_number")
        if self.shift and isinstance(number, int) and not isinstance(number, bool):
            doc = {**doc, "sequence_number": number + self.shift}
            frame = Frame(_event_frame(doc))
        return self._frame(frame, doc)

    def _delta_before(self, done: dict[str, Any], text: str) -> bytes:
        """A ``response.output_text.delta`` event of ``text`` to send just before ``done``
        (which then, like every later event, gets the next sequence number)."""
        delta: dict[str, Any] = {"type": "response.output_text.delta"}
        number = done.get("sequence_number")
        if isinstance(number, int) and not isinstance(number, bool):
            delta["sequence_number"] = number
            done["sequence_number"] = number + 1
            self.shift += 1
        for key in ("item_id", "output_index", "content_index"):
            if key in done:
                delta[key] = done[key]
        return _event_frame({**delta, "delta": text, "logprobs": []})

    def _frame(self, frame: Frame, doc: dict[str, Any]) -> list[bytes]:
        kind = str(doc.get("type", ""))
        truncates = self.editor.truncates
        if kind == "response.output_text.delta":
            part = self._part(doc)
            text = str(doc.get("delta", ""))
            if truncates:
                remaining = self.editor.budget
                piece, _ = _cut(part, text, remaining)
                return [_event_frame({**doc, "delta": piece})] if piece else []
            part.received += text
            return []
        if kind == "response.output_text.done":
            part = self._part(doc)
            if not part.received and isinstance(doc.get("text"), str):
                part.received = doc["text"]
            sent_before = part.sent
            final = self._final(part)
            done = {**doc, "text": final}
            out = []
            if not truncates and final:
                out.append(self._delta_before(done, final))
            elif final.startswith(sent_before) and final != sent_before:
                out.append(self._delta_before(done, final[len(sent_before) :]))
            return [*out, _event_frame(done)]
        if kind == "response.content_part.done" and isinstance(doc.get("part"), dict):
            part_doc = doc["part"]
            if isinstance(part_doc.get("text"), str):
                part = self._part(doc)
                part_doc = {**part_doc, "text": self._final(part), "annotations": []}
                return [_event_frame({**doc, "part": part_doc})]
        if kind == "response.output_item.done" and isinstance(doc.get("item"), dict):
            item = copy.deepcopy(doc["item"])
            self._apply(item, doc.get("output_index"))
            return [_event_frame({**doc, "item": item})]
        if kind in ("response.completed", "response.incomplete") and isinstance(
            doc.get("response"), dict
        ):
            response = copy.deepcopy(doc["response"])
            for i, item in enumerate(response.get("output") or []):
                if isinstance(item, dict):
                    self._apply(item, i)
            old = sum(count_tokens(p.received) for p in self.parts.values())
            new = sum(count_tokens(p.sent) for p in self.parts.values())
            self.editor.old_tokens, self.editor.new_tokens = old, new
            if self.editor.truncates:
                response["status"] = "incomplete"
                response["incomplete_details"] = {"reason": "max_output_tokens"}
                kind = "response.incomplete"
            set_usage(response.get("usage"), "output_tokens", self.editor)
            return [_event_frame({**doc, "type": kind, "response": response})]
        return [frame.raw]

    def _apply(self, item: dict[str, Any], output_index: Any) -> None:
        if item.get("type") != "message":
            return
        for content_index, part_doc in enumerate(item.get("content") or []):
            if isinstance(part_doc, dict) and isinstance(part_doc.get("text"), str):
                part = self.parts.setdefault((output_index, content_index), _Part())
                if not part.received and not part.finished:
                    part.received = part_doc["text"]
                part_doc["text"] = self._final(part)
                part_doc["annotations"] = []
        if self.editor.truncates:
            item["status"] = "incomplete"


def stream_edit(fault: LlmFault, doc: dict[str, Any], rng: random.Random) -> StreamEdit | None:
    """The editor for a stream whose first JSON frame is ``doc``; None: not known (yet)."""
    obj = doc.get("object")
    kind = str(doc.get("type", ""))
    if obj == "chat.completion.chunk":
        return _OpenAIStreamEdit(fault, rng, chat=True)
    if obj == "text_completion":
        return _OpenAIStreamEdit(fault, rng, chat=False)
    if kind.startswith("response."):
        return _ResponsesStreamEdit(fault, rng)
    if kind in ("message_start", "ping", "content_block_start"):
        return _AnthropicStreamEdit(fault, rng)
    if isinstance(doc.get("choices"), list):
        if not doc["choices"]:  # Azure's opening prompt_filter_results chunk: decide later
            return None
        chat = any(isinstance(c, dict) and "delta" in c for c in doc["choices"])
        return _OpenAIStreamEdit(fault, rng, chat=chat)
    return None
