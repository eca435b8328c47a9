"""Context attacks on a downstream A2A agent's answer (SPEC §17): what one agent tells another
is a tool result like any other, and the place a poisoned one does harm.

The attacks' text goes into the agent's answer as a client reads it: the last text part of the
reply task's last artifact that has one, else of the task's status message (a task that needs
input, or failed), else of the message the agent answered with (1.0's ``{"message": ...}``,
0.3's ``kind: message``). On a stream (:func:`text_part_of` each event) it goes into the first
event that carries the answer's text — an artifact update, a task's artifacts, or a message —
as it passes, so the caller reads it whether it keeps the first chunk or joins them all; a
status update's message (a "working on it" note) is not the answer, and carries none. A text
that holds JSON stays JSON
(:func:`~flakestorm.chaos.attacks.tool_results.try_poison_value`). The ids, states and every
other field are left as they are. An answer holding no text part carries no attack: the caller
reports it as not applied.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

from flakestorm.chaos.a2a.protocol import A2aCall, answer_of
from flakestorm.chaos.attacks.tool_results import try_poison_value
from flakestorm.config import ContextAttack

__all__ = ["poisoned", "text_part_of"]


def poisoned(
    call: A2aCall, body: bytes, attacks: Sequence[ContextAttack], rng: random.Random
) -> bytes | None:
    """The whole reply ``body`` to ``call`` with the attacks' text in its answer (see the module
    doc); None when the reply holds no text part to carry it."""
    doc, answer = answer_of(call, body)
    parts = [part for holder in _holders(answer) for part in _text_parts(holder)][:1]
    if doc is None or not parts:
        return None
    (part,) = parts
    part["text"], _ = try_poison_value(part["text"], attacks, rng)
    return json.dumps(doc).encode()


def text_part_of(kind: str | None, event: Any) -> dict[str, Any] | None:
    """The first text part of the answer a stream event of ``kind`` (``task``, ``status``,
    ``artifact``, ``message``: :mod:`flakestorm.chaos.a2a.streams` reads it) carries, to be
    edited in place: an artifact's, a task's artifacts', a message's; None for a status update
    and an event that carries none."""
    if not isinstance(event, dict):
        return None
    if kind == "artifact":
        holders: Iterator[Any] = iter((event.get("artifact"),))
    elif kind == "task":
        artifacts = event.get("artifacts")
        holders = iter(artifacts if isinstance(artifacts, list) else ())
    elif kind == "message":
        holders = iter((event,))
    else:
        return None
    for holder in holders:
        parts = _text_parts(holder)
        if parts:
            return parts[-1]  # the holder's first text part (the list is last first)
    return None


def _holders(answer: dict[str, Any] | None) -> Iterator[Any]:
    """What may hold the answer's text, in the order a client reads it for the answer: the
    task's artifacts from the last, its status message, or the message itself."""
    if answer is None:
        return
    artifacts = answer.get("artifacts")
    if isinstance(artifacts, list):
        yield from reversed(artifacts)
    status = answer.get("status")
    if isinstance(status, dict):
        yield status.get("message")
    if "parts" in answer and "artifacts" not in answer and "status" not in answer:
        yield answer  # a message


def _text_parts(holder: Any) -> list[dict[str, Any]]:
    """The text parts of an artifact or message, the last first."""
    parts = holder.get("parts") if isinstance(holder, dict) else None
    if not isinstance(parts, list):
        return []
    texts = [p for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return texts[::-1]
