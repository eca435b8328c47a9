"""LLM faults on whole (non-streaming) JSON replies: OpenAI chat completions, completions and
the Responses API, Anthropic messages.

:func:`fault_on_reply` transforms the upstream reply. Only the assistant's *text* changes; the
reply keeps its protocol shape (ids, roles, usage, stop reasons):

- ``truncated_response``: the text is cut to ``max_tokens`` tokens (default
  :data:`DEFAULT_MAX_TOKENS`; :func:`~flakestorm.chaos.llm.text.count_tokens` defines a
  token), and the reply is marked as stopped by the limit whether or not text was cut: OpenAI
  ``finish_reason: "length"``, Anthropic ``stop_reason: "max_tokens"``, Responses API
  ``status: "incomplete"`` with ``incomplete_details.reason: "max_output_tokens"``. The budget
  applies per choice (OpenAI) or per message (Anthropic: shared by its text blocks). Usage
  output tokens become the token count of the text left.
- ``empty``: the text becomes ``""``; a finish reason of ``tool_calls``/``tool_use`` becomes
  ``stop``/``end_turn``; usage output tokens become 0.
- ``garbage``: the text is replaced by random-looking text of a similar length
  (:func:`~flakestorm.chaos.llm.text.garbage_text`).
- ``response_drift``: the text is rewritten by :func:`~flakestorm.chaos.llm.text.drift_text`
  with the fault's ``drift_type`` (when unset, one of the five is drawn from the RNG, once per
  reply).

Tool calls (OpenAI ``tool_calls``/``function_call``, Responses ``function_call`` items,
Anthropic ``tool_use`` blocks) stay valid in every mode: ``truncated_response`` and ``empty``
*drop* them (a model cut at its limit never finishes a call, and an empty reply has none),
``garbage`` and ``response_drift`` leave them untouched. A reply with no text left gets one
empty text part (Anthropic ``{"type": "text", "text": ""}``, OpenAI ``content: ""``), so the
usual ``content[0].text`` access keeps working. Reasoning/thinking parts are left as they are.

An upstream error reply (non-2xx) and an unparseable or unknown body pass through unchanged.
A ``delay_ms`` on a content mode is a wait before answering (``LlmResponse.delay_ms``).

:class:`TextEditor` is the one place a fault rewrites texts; the stream editors
(:mod:`flakestorm.chaos.llm.streams`) and :func:`edit_texts` (python replies) use it too.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.llm.protocol import LlmResponse, Provider, dump_json, json_object
from flakestorm.chaos.llm.text import count_tokens
from flakestorm.config import DriftType, LlmFault

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "TOOL_BLOCKS",
    "TextEditor",
    "edit_texts",
    "fault_on_reply",
    "set_usage",
]

DEFAULT_MAX_TOKENS = 20
"""The ``truncated_response`` budget when the fault has no ``max_tokens``."""
TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")
"""Anthropic content blocks that are tool calls."""


class TextEditor:
    """Applies one fault to the successive text parts of one reply (or one choice): its mode's
    :meth:`~flakestorm.chaos.llm.modes.LlmMode.rewrite`, and what else the mode changes
    (:attr:`drops_tools`, :attr:`truncates`, :attr:`rewrites_whole`).

    ``budget`` is what is left of the ``truncated_response`` budget; callers set it back to
    ``limit`` where a new budget starts (an OpenAI choice). ``old_tokens`` / ``new_tokens``
    count the texts before and after, for the usage figures (:meth:`output_tokens`).
    """

    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self.unit = LLM_MODES[fault.mode]
        self.rng = rng
        self.limit = DEFAULT_MAX_TOKENS if fault.max_tokens is None else fault.max_tokens
        self.budget = self.limit
        """Tokens left for the current choice (truncation)."""
        self.drift = fault.drift_type or rng.choice(list(DriftType))
        self.old_tokens = 0
        self.new_tokens = 0

    @property
    def drops_tools(self) -> bool:
        """Whether the fault removes tool calls (``truncated_response``, ``empty``)."""
        return self.unit.drops_tools

    @property
    def truncates(self) -> bool:
        """Whether the reply is marked as stopped by its limit (``truncated_response``)."""
        return self.unit.truncates

    @property
    def rewrites_whole(self) -> bool:
        """Whether a text part is rewritten whole (``garbage``, ``response_drift``)."""
        return self.unit.rewrites_whole

    def text(self, text: str) -> str:
        """The new text of one whole text part."""
        new = self.unit.rewrite(self, text)
        self.old_tokens += count_tokens(text)
        self.new_tokens += count_tokens(new)
        return new

    def output_tokens(self, original: Any) -> Any:
        """Adjusted usage output tokens (``original`` unchanged if not an int)."""
        if not isinstance(original, int) or isinstance(original, bool):
            return original
        if self.drops_tools:
            return self.new_tokens
        return max(0, original - self.old_tokens) + self.new_tokens


def edit_texts(
    fault: LlmFault, groups: Sequence[Sequence[str]], rng: random.Random
) -> list[list[str]]:
    """The texts of one reply rewritten by ``fault`` as :func:`fault_on_reply` rewrites them,
    for replies that are not JSON bodies (an SDK object, a python callable's return value).

    ``groups`` are the reply's texts in order, grouped by truncation budget: one group per
    OpenAI choice, one for all the text blocks of an Anthropic message, one for a plain text.
    Marking the reply as cut (``truncated_response``) is the caller's part.
    """
    editor = TextEditor(fault, rng)
    out: list[list[str]] = []
    for texts in groups:
        editor.budget = editor.limit
        out.append([editor.text(text) for text in texts])
    return out


def set_usage(usage: Any, out_key: str, editor: TextEditor) -> None:
    """Adjust a usage object's output tokens (``out_key``) and ``total_tokens`` in place."""
    if not isinstance(usage, dict) or out_key not in usage:
        return
    old = usage[out_key]
    usage[out_key] = editor.output_tokens(old)
    total = usage.get("total_tokens")
    if isinstance(total, int) and isinstance(old, int) and isinstance(usage[out_key], int):
        usage["total_tokens"] = total - old + usage[out_key]


# --------------------------------------------------------------------------- reply shapes


def _edit_chat(doc: dict[str, Any], editor: TextEditor) -> None:
    for choice in doc["choices"]:
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            continue
        message = choice["message"]
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = editor.text(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = editor.text(part["text"])
        if editor.drops_tools:
            message.pop("tool_calls", None)
            message.pop("function_call", None)
            if not isinstance(message.get("content"), (str, list)):
                message["content"] = ""
        if editor.truncates:
            choice["finish_reason"] = "length"
            editor.budget = editor.limit  # the budget is per choice
        elif editor.drops_tools and choice.get("finish_reason") in (  # tool calls dropped
            "tool_calls",
            "function_call",
        ):
            choice["finish_reason"] = "stop"
    set_usage(doc.get("usage"), "completion_tokens", editor)


def _edit_completion(doc: dict[str, Any], editor: TextEditor) -> None:
    for choice in doc["choices"]:
        if isinstance(choice, dict) and isinstance(choice.get("text"), str):
            choice["text"] = editor.text(choice["text"])
            if editor.truncates:
                choice["finish_reason"] = "length"
                editor.budget = editor.limit
    set_usage(doc.get("usage"), "completion_tokens", editor)


def _empty_message_item() -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_flakestorm",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "", "annotations": []}],
    }


def _edit_responses_output(output: list[Any], editor: TextEditor) -> list[Any]:
    kept: list[Any] = []
    has_message = False
    for item in output:
        if isinstance(item, dict) and item.get("type") == "message":
            has_message = True
            for part in item.get("content") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    new = editor.text(part["text"])
                    if new != part["text"] and part.get("annotations"):
                        part["annotations"] = []
                    part["text"] = new
            if editor.truncates:
                item["status"] = "incomplete"
        elif (
            editor.drops_tools
            and isinstance(item, dict)
            and str(item.get("type", "")).endswith("_call")
        ):
            continue
        kept.append(item)
    if editor.drops_tools and not has_message:
        kept.append(_empty_message_item())
    return kept


def _edit_response(doc: dict[str, Any], editor: TextEditor) -> None:
    doc["output"] = _edit_responses_output(doc["output"], editor)
    if editor.truncates:
        doc["status"] = "incomplete"
        doc["incomplete_details"] = {"reason": "max_output_tokens"}
    if isinstance(doc.get("output_text"), str):
        doc["output_text"] = "".join(
            part.get("text", "")
            for item in doc["output"]
            if isinstance(item, dict) and item.get("type") == "message"
            for part in item.get("content") or []
            if isinstance(part, dict) and part.get("type") == "output_text"
        )
    set_usage(doc.get("usage"), "output_tokens", editor)


def _edit_message(doc: dict[str, Any], editor: TextEditor) -> None:
    blocks: list[Any] = []
    has_text = False
    for block in doc["content"]:
        if isinstance(block, dict) and block.get("type") == "text":
            has_text = True
            new = editor.text(str(block.get("text", "")))
            if new != block.get("text") and block.get("citations"):
                block["citations"] = None
            block["text"] = new
        elif editor.drops_tools and isinstance(block, dict) and block.get("type") in TOOL_BLOCKS:
            continue
        blocks.append(block)
    if editor.drops_tools and not has_text:
        blocks.append({"type": "text", "text": ""})
    doc["content"] = blocks
    if editor.truncates:
        doc["stop_reason"] = "max_tokens"
        doc["stop_sequence"] = None
    elif editor.drops_tools and doc.get("stop_reason") == "tool_use":  # tool calls dropped
        doc["stop_reason"] = "end_turn"
    usage = doc.get("usage")
    if isinstance(usage, dict) and "output_tokens" in usage:
        usage["output_tokens"] = editor.output_tokens(usage["output_tokens"])


def _reply_kind(doc: Mapping[str, Any]) -> str | None:
    obj = doc.get("object")
    choices = doc.get("choices")
    if isinstance(choices, list):
        if obj == "text_completion" or any(
            isinstance(c, dict) and "text" in c and "message" not in c for c in choices
        ):
            return "completion"
        return "chat"
    if isinstance(doc.get("output"), list) and (obj == "response" or "status" in doc):
        return "response"
    if doc.get("type") == "message" and isinstance(doc.get("content"), list):
        return "message"
    return None


_EDITORS = {
    "chat": _edit_chat,
    "completion": _edit_completion,
    "response": _edit_response,
    "message": _edit_message,
}


def edit_document(doc: dict[str, Any], fault: LlmFault, rng: random.Random) -> bool:
    """Apply ``fault`` to a reply document in place; False when its shape is unknown."""
    kind = _reply_kind(doc)
    if kind is None:
        return False
    editor = TextEditor(fault, rng)
    _EDITORS[kind](doc, editor)
    return True


# --------------------------------------------------------------------------- the reply

_FRAMING = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding"})


def _header_items(headers: Any) -> tuple[tuple[str, str], ...]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(k), str(v)) for k, v in items)


def is_reply_document(body: bytes) -> bool:
    """Whether ``body`` is a whole reply document a content fault can act on."""
    doc = json_object(body)
    return doc is not None and _reply_kind(doc) is not None


def fault_on_reply(
    fault: LlmFault,
    provider: Provider,
    status: int,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes,
    rng: random.Random,
) -> LlmResponse:
    """The reply the agent gets instead of upstream's whole (non-streaming) reply.

    ``headers`` are upstream's; framing headers (``content-length``, ``transfer-encoding``,
    ``connection``, and ``content-encoding`` once the body is rewritten) are removed: the body
    framing is the proxy's job. ``rate_limit``/``timeout`` give the same reply as
    :func:`~flakestorm.chaos.llm.modes.fault_before_upstream`. A non-2xx reply and a body
    that is not a known reply document pass through unchanged. ``delay_ms`` on other modes is
    a wait before answering.
    """
    before = LLM_MODES[fault.mode].before_upstream(fault, provider, streaming=False)
    if before is not None:
        return before
    items = _header_items(headers)
    delay_ms = fault.delay_ms or 0
    passthrough = LlmResponse(
        status,
        tuple((k, v) for k, v in items if k.lower() not in _FRAMING - {"content-encoding"}),
        body=body,
        delay_ms=delay_ms,
    )
    if not 200 <= status < 300:
        return passthrough
    doc = json_object(body)
    if doc is None or not edit_document(doc, fault, rng):
        return passthrough
    kept = tuple((k, v) for k, v in items if k.lower() not in _FRAMING)
    return LlmResponse(status, kept, body=dump_json(doc), delay_ms=delay_ms)
