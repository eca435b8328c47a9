"""Context injection (``injection_via_context``): an attack payload placed where the model reads
its instructions.

One rule for both ways a request reaches the model: :func:`inject_context` edits the JSON body
of an HTTP request (the chaos proxy); :func:`with_payload` and :func:`messages_with_payload`
edit python values (the python wrappers, :mod:`flakestorm.chaos.wrappers`, where messages may be
SDK objects). Instructions are a string or a list of content blocks:

- a non-empty string gets ``"\\n\\n" + payload`` appended;
- a list of blocks gets a text block ``{"type": "text", "text": payload}`` appended;
- anything else (empty, unset) becomes the payload;
- in a list of chat messages, the first ``system``/``developer`` message's content takes the
  payload; without one, a ``{"role": "system", "content": payload}`` message goes first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flakestorm.chaos.attacks import tool_results
from flakestorm.chaos.llm.protocol import Provider, dump_json, json_object

__all__ = ["SYSTEM_ROLES", "inject_context", "messages_with_payload", "with_payload"]

SYSTEM_ROLES = ("system", "developer")
"""The roles of a chat message that holds the model's instructions."""


def with_payload(instructions: Any, payload: str) -> Any:
    """``instructions`` (a string, a list of content blocks, or unset) with ``payload`` added
    (module doc). A list is copied, never changed in place."""
    if isinstance(instructions, list):
        return [*instructions, {"type": "text", "text": payload}]
    if isinstance(instructions, str) and instructions:
        return f"{instructions}\n\n{payload}"
    return payload


def _field(message: Any, name: str) -> Any:
    """``message[name]`` of a mapping, ``message.name`` of an object; None when it has none
    (a list or a tuple has no fields)."""
    try:
        if isinstance(message, Mapping):
            return message[name]
        if isinstance(message, (list, tuple)):
            return None
        return getattr(message, name)
    except (KeyError, IndexError, AttributeError, TypeError):
        return None


def messages_with_payload(messages: Sequence[Any], payload: str) -> list[Any]:
    """A new list of ``messages`` with ``payload`` in the first ``system``/``developer``
    message, or in a system message put first (module doc).

    Messages are ``role``/``content`` mappings or objects with those attributes (an SDK
    message, a pydantic model, a dataclass ...); the one that changes is copied (a mapping
    into a dict, an object by :func:`~flakestorm.chaos.attacks.tool_results.replace_at`), the others
    are the caller's own.
    """
    out: list[Any] = list(messages)
    for i, message in enumerate(out):
        if _field(message, "role") in SYSTEM_ROLES:
            content = with_payload(_field(message, "content"), payload)
            if isinstance(message, Mapping):
                out[i] = {**message, "content": content}
            else:  # an SDK message object: a copy (pydantic ``model_copy``, dataclass ...)
                out[i] = tool_results.replace_at(message, ("content",), content)
            return out
    return [{"role": "system", "content": payload}, *out]


def inject_context(provider: Provider, request_body: bytes, payload: str) -> bytes:
    """``request_body`` with ``payload`` placed where the model reads its instructions:

    - Anthropic messages: added to the top-level ``system`` (:func:`with_payload`);
    - OpenAI chat completions: added to the first ``system``/``developer`` message, or
      inserted as a first ``system`` message (:func:`messages_with_payload`);
    - Responses API: appended to ``instructions``, or set as ``instructions``;
    - completions: prepended to the ``prompt`` (each prompt, when a list of strings).

    A body that is not a JSON object of one of these shapes is returned unchanged.
    """
    doc = json_object(request_body)
    if doc is None:
        return request_body
    if provider is Provider.ANTHROPIC and isinstance(doc.get("messages"), list):
        doc["system"] = with_payload(doc.get("system"), payload)
    elif isinstance(doc.get("messages"), list):
        doc["messages"] = messages_with_payload(doc["messages"], payload)
    elif "input" in doc or "instructions" in doc:
        instructions = doc.get("instructions")
        doc["instructions"] = f"{instructions}\n\n{payload}" if instructions else payload
    elif isinstance(doc.get("prompt"), str):
        doc["prompt"] = f"{payload}\n\n{doc['prompt']}"
    elif isinstance(doc.get("prompt"), list) and all(isinstance(p, str) for p in doc["prompt"]):
        doc["prompt"] = [f"{payload}\n\n{p}" for p in doc["prompt"]]
    else:
        return request_body
    return dump_json(doc)
