"""Edits of a real MCP response: context attacks on a tool result's text content, and tools
hidden from ``tools/list`` (SPEC §11)."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from typing import Any

from flakestorm.chaos.attacks.tool_results import try_poison_value
from flakestorm.chaos.mcp.protocol import Message
from flakestorm.config import ContextAttack


def poisoned(message: Message, attacks: Sequence[ContextAttack], rng: random.Random) -> Message:
    """A ``tools/call`` response with the attacks' text inserted in its last text content item
    (into its JSON when the text is JSON, so it still parses), or in a text item added; its
    ``structuredContent`` poisoned alike. An error response is left as it is."""
    result = message.get("result")
    if not isinstance(result, dict):
        return message
    content = result.get("content")
    items: list[Any] = list(content) if isinstance(content, list) else []
    texts = [i for i, item in enumerate(items) if _is_text(item)]
    if texts:
        at = texts[-1]
        text, _ = try_poison_value(items[at]["text"], attacks, rng)
        items[at] = {**items[at], "text": text}
    else:
        text, _ = try_poison_value("", attacks, rng)
        items.append({"type": "text", "text": text})
    edited = {**result, "content": items}
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        edited["structuredContent"], _ = try_poison_value(structured, attacks, rng)
    return {**message, "result": edited}


def _is_text(item: Any) -> bool:
    return (
        isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str)
    )


def without_tools(message: Message, names: Collection[str]) -> Message:
    """A ``tools/list`` response without the tools named ``names``."""
    result = message.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return message
    kept = [t for t in result["tools"] if not (isinstance(t, dict) and t.get("name") in names)]
    return {**message, "result": {**result, "tools": kept}}


def listed_tools(message: Message) -> tuple[str, ...]:
    """The names a ``tools/list`` response lists."""
    result = message.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return ()
    return tuple(t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str))
