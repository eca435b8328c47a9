"""What an LLM reply billed, read from the wire as it passes (SPEC §15): OpenAI chat completions
and the Responses API, Anthropic messages, each whole (JSON) or streamed (server-sent events).

- OpenAI chat: ``usage.prompt_tokens`` (its ``prompt_tokens_details.cached_tokens`` counted
  apart as cache reads) and ``completion_tokens``; streamed, the chunk that carries ``usage``
  (``stream_options.include_usage``).
- Responses API: ``usage.input_tokens`` (``input_tokens_details.cached_tokens`` apart) and
  ``output_tokens``; streamed, the ``response.completed`` event's response.
- Anthropic: ``usage.input_tokens`` (cache reads and writes already apart:
  ``cache_read_input_tokens``, ``cache_creation_input_tokens``) and ``output_tokens``; streamed,
  ``message_start``'s message usage, then each ``message_delta``'s (cumulative: the latest of
  each count wins).

A reply that finished without usage is **estimated** (:func:`estimate`: the request's message
text and the reply's text, one token per word piece,
:func:`~flakestorm.chaos.llm.text.count_tokens`); a stream that ended before its usage is
**unknown**. A :class:`UsageMeter` keeps only the numbers
and the unfinished frame of a stream, never its body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flakestorm.chaos.llm.protocol import Provider, json_object
from flakestorm.chaos.llm.text import count_tokens
from flakestorm.results.usage import Counted, Usage

MAX_JSON_BYTES = 16 * 1024 * 1024
"""The most of a whole (not streamed) reply a meter holds to read its usage."""
MAX_FRAME_BYTES = 1024 * 1024
"""The most of one unfinished SSE frame a meter holds (a longer one is skipped)."""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _cached(doc: Mapping[str, Any], details: str) -> int:
    found = doc.get(details)
    return _int(found.get("cached_tokens")) if isinstance(found, Mapping) else 0


def openai_usage(doc: Mapping[str, Any]) -> dict[str, int] | None:
    """The counts of an OpenAI ``usage`` object (chat or Responses), None when it is none."""
    if "prompt_tokens" in doc or "completion_tokens" in doc:
        prompt, cached = _int(doc.get("prompt_tokens")), _cached(doc, "prompt_tokens_details")
        output = _int(doc.get("completion_tokens"))
    elif "input_tokens" in doc or "output_tokens" in doc:
        prompt, cached = _int(doc.get("input_tokens")), _cached(doc, "input_tokens_details")
        output = _int(doc.get("output_tokens"))
    else:
        return None
    cached = min(cached, prompt)
    return {"input": prompt - cached, "cache_read": cached, "output": output}


def anthropic_usage(doc: Mapping[str, Any]) -> dict[str, int]:
    """The counts an Anthropic ``usage`` object states (only those it states)."""
    names = {
        "input_tokens": "input",
        "output_tokens": "output",
        "cache_read_input_tokens": "cache_read",
        "cache_creation_input_tokens": "cache_write",
    }
    return {
        ours: _int(doc[theirs]) for theirs, ours in names.items() if doc.get(theirs) is not None
    }


def _texts(value: Any) -> list[str]:
    """Every string under the keys that hold message or reply text, anywhere in ``value``."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("content", "text", "input", "instructions", "system") and isinstance(
                item, str
            ):
                out.append(item)
            else:
                out += _texts(item)
    elif isinstance(value, list):
        for item in value:
            out += _texts(item)
    return out


def estimate(request: Mapping[str, Any] | None, reply_text: str, model: str) -> Usage:
    """The documented estimate of a reply without usage: the request's message text (its
    ``messages``, ``input``, ``system``) and the reply's text in word pieces."""
    sent = " ".join(_texts({k: v for k, v in (request or {}).items() if k != "model"}))
    return Usage(
        input=count_tokens(sent),
        output=count_tokens(reply_text),
        model=model,
        counted=Counted.ESTIMATED,
    )


class UsageMeter:
    """Reads one LLM reply's usage as it passes: :meth:`feed` each piece of the body, then
    :meth:`usage`."""

    def __init__(self, provider: Provider, request_body: bytes, streamed: bool) -> None:
        self.provider = provider
        self.request = json_object(request_body)
        self.streamed = streamed
        self.model = str((self.request or {}).get("model") or "")
        self._counts: dict[str, int] = {}
        self._reported = False
        self._text: list[str] = []
        self._text_chars = 0
        self._pending = b""
        self._whole: list[bytes] = []
        self._size = 0
        self._done = False

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            self._size += len(chunk)
            if self._size <= MAX_JSON_BYTES:
                self._whole.append(chunk)
            return
        self._pending += chunk
        while True:
            cut = _frame_end(self._pending)
            if cut is None:
                break
            frame, self._pending = self._pending[: cut[0]], self._pending[cut[1] :]
            self._frame(frame)
        if len(self._pending) > MAX_FRAME_BYTES:
            self._pending = b""

    def usage(self, finished: bool) -> Usage:
        """What the reply billed: reported when it is complete — its whole body read
        (``finished``), a stream's terminal event come — else unknown (with what was known);
        estimated when it is complete without usage."""
        if not self.streamed and finished:
            self._read_whole()
        complete = finished and self._done
        if not complete:
            return self._made(Counted.UNKNOWN)
        if self._reported:
            return self._made(Counted.REPORTED)
        return estimate(self.request, "".join(self._text), self.model)

    def _made(self, counted: Counted) -> Usage:
        c = self._counts
        return Usage(
            input=c.get("input", 0),
            output=c.get("output", 0),
            cache_read=c.get("cache_read", 0),
            cache_write=c.get("cache_write", 0),
            model=self.model,
            counted=counted,
        )

    def _read_whole(self) -> None:
        if self._size > MAX_JSON_BYTES:
            return
        doc = json_object(b"".join(self._whole))
        self._done = True  # the whole body came: without usage in it, it is estimated
        if doc is not None:
            self._event(doc)

    def _frame(self, frame: bytes) -> None:
        data = [line[5:].strip() for line in frame.splitlines() if line.startswith(b"data:")]
        payload = b"\n".join(data)
        if not payload:
            return
        if payload == b"[DONE]":
            self._done = True
            return
        try:
            doc = json.loads(payload)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return
        if isinstance(doc, dict):
            self._event(doc)

    def _event(self, doc: Mapping[str, Any]) -> None:
        kind = doc.get("type")
        if isinstance(doc.get("model"), str) and doc["model"]:
            self.model = doc["model"]
        if self.provider is Provider.ANTHROPIC:
            self._anthropic(doc, kind)
        else:
            self._openai(doc, kind)

    def _openai(self, doc: Mapping[str, Any], kind: Any) -> None:
        if kind in ("response.completed", "response.incomplete"):
            self._done = True
            doc = doc.get("response") or {}
            if isinstance(doc.get("model"), str):
                self.model = doc["model"]
        if kind == "response.output_text.delta" and isinstance(doc.get("delta"), str):
            self._keep(doc["delta"])
        usage = doc.get("usage")
        if isinstance(usage, Mapping):
            counts = openai_usage(usage)
            if counts is not None:
                self._counts, self._reported = counts, True
        for choice in doc.get("choices") or ():
            if not isinstance(choice, Mapping):
                continue
            for key in ("delta", "message"):
                part = choice.get(key)
                if isinstance(part, Mapping) and isinstance(part.get("content"), str):
                    self._keep(part["content"])
        if kind is None and doc.get("object") == "response":
            self._keep(" ".join(_texts(doc.get("output"))))

    def _anthropic(self, doc: Mapping[str, Any], kind: Any) -> None:
        message = doc.get("message") if kind == "message_start" else doc
        if isinstance(message, Mapping):
            if isinstance(message.get("model"), str) and message["model"]:
                self.model = message["model"]
            usage = message.get("usage")
            if isinstance(usage, Mapping):
                self._counts.update(anthropic_usage(usage))
                self._reported = True
        if kind == "message_delta" and isinstance(doc.get("usage"), Mapping):
            self._counts.update(anthropic_usage(doc["usage"]))
            self._reported = True
        if kind == "message_stop":
            self._done = True
        if kind == "content_block_delta":
            delta = doc.get("delta")
            if isinstance(delta, Mapping) and isinstance(delta.get("text"), str):
                self._keep(delta["text"])
        if kind is None or kind == "message":
            for block in doc.get("content") or ():
                if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                    self._keep(block["text"])

    def _keep(self, text: str) -> None:
        """The reply's text, for an estimate (bounded: a long reply's first million)."""
        if self._text_chars < 1_000_000:
            self._text.append(text)
            self._text_chars += len(text)


def _frame_end(data: bytes) -> tuple[int, int] | None:
    """Where the first complete SSE frame of ``data`` ends and the next begins."""
    ends = [(data.find(sep), len(sep)) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r")]
    found = [(at, at + size) for at, size in ends if at >= 0]
    return min(found) if found else None
