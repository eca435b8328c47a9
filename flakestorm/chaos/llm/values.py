"""LLM faults on python values: what a wrapped ``agent.llm`` callable returns (an SDK object
such as openai's ``ChatCompletion``, a dict of the same shape, a string) and the messages it is
called with.

Replies change as the proxy changes an HTTP reply (:mod:`flakestorm.chaos.llm.replies`); the
payloads of ``injection_via_context`` go where :mod:`flakestorm.chaos.llm.injection` puts them
over HTTP.
"""

from __future__ import annotations

import copy
import inspect
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flakestorm.chaos.attacks import tool_results
from flakestorm.chaos.llm.injection import messages_with_payload, with_payload
from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.llm.replies import edit_document, edit_texts
from flakestorm.config import ContextAttack, LlmFault

_MISSING = object()

_TextGroup = tuple[list[tuple[Any, ...]], tuple[tuple[Any, ...], str] | None]
"""Text parts sharing one truncation budget (an OpenAI choice, an Anthropic message), and
where their stop reason is with the value meaning "cut"."""


def _step(value: Any, key: Any) -> Any:
    try:
        if isinstance(value, Mapping):
            return value[key]
        if isinstance(value, (list, tuple)):
            return value[key]
        return getattr(value, key)
    except (KeyError, IndexError, AttributeError, TypeError):
        return _MISSING


def _has(value: Any, key: str) -> bool:
    return key in value if isinstance(value, Mapping) else hasattr(value, key)


def _text_groups(reply: Any) -> list[_TextGroup]:
    """Where a reply's texts are: every choice's, every text block's (empty: none)."""
    if isinstance(reply, str):
        return [([()], None)]
    choices = _step(reply, "choices")
    if isinstance(choices, (list, tuple)) and choices:
        groups: list[_TextGroup] = []
        for i, choice in enumerate(choices):
            has_stop = isinstance(choice, Mapping) or _has(choice, "finish_reason")
            stop = (("choices", i, "finish_reason"), "length") if has_stop else None
            if isinstance(_step(_step(choice, "message"), "content"), str):
                groups.append(([("choices", i, "message", "content")], stop))
            elif isinstance(_step(choice, "text"), str):
                groups.append(([("choices", i, "text")], stop))
        return groups
    blocks = _step(reply, "content")
    if isinstance(blocks, (list, tuple)):
        paths: list[tuple[Any, ...]] = [
            ("content", i, "text")
            for i, block in enumerate(blocks)
            if _step(block, "type") == "text" and isinstance(_step(block, "text"), str)
        ]
        if paths:
            has_stop = isinstance(reply, Mapping) or _has(reply, "stop_reason")
            return [(paths, (("stop_reason",), "max_tokens") if has_stop else None)]
    return []


def reply_text(reply: Any) -> str | None:
    """The (first) text of an LLM callable's reply (module doc), or None when it has none."""
    groups = _text_groups(reply)
    return tool_results.get_at(reply, groups[0][0][0]) if groups else None


def transform_reply(reply: Any, fault: LlmFault, rng: random.Random) -> Any | None:
    """``reply`` with ``fault`` applied to all its texts (a copy), or None when it is no reply
    flakestorm knows (no text it can find, and not a reply document of a provider's shape,
    such as a Responses API ``Response`` or a chat completion holding only tool calls, which
    are edited as the proxy edits their JSON).

    The texts change as the proxy changes them in an HTTP reply
    (:func:`flakestorm.chaos.llm.replies.edit_texts`): the ``truncated_response`` budget per
    OpenAI choice and shared by an Anthropic message's text blocks."""
    groups = _text_groups(reply)
    unit = LLM_MODES[fault.mode]
    if unit.replaces_upstream:
        return None
    if not groups:
        return _transform_document(reply, fault, rng)
    texts = [[tool_results.get_at(reply, path) for path in paths] for paths, _ in groups]
    out = reply
    for (paths, stop), new_texts in zip(groups, edit_texts(fault, texts, rng), strict=True):
        for path, text in zip(paths, new_texts, strict=True):
            out = tool_results.replace_at(out, path, text)
        if unit.truncates and stop is not None:
            out = tool_results.replace_at(out, stop[0], stop[1])
    return out


def _transform_document(reply: Any, fault: LlmFault, rng: random.Random) -> Any | None:
    """A reply of another shape the proxy edits (a Responses API ``Response``), as a dict or
    a pydantic model: edited as its JSON document, then rebuilt (None: not such a reply)."""
    if isinstance(reply, Mapping):
        doc: Any = copy.deepcopy(dict(reply))
    elif callable(getattr(reply, "model_dump", None)):
        doc = reply.model_dump(mode="json", exclude_unset=True)  # the fields the API sent
    else:
        return None
    if not isinstance(doc, dict) or not edit_document(doc, fault, rng):
        return None
    if isinstance(reply, Mapping):
        return doc
    try:
        return type(reply).model_validate(doc)
    except ValueError:  # as the SDKs build their replies: without validation
        return type(reply).model_construct(**doc)


def _is_message(value: Any) -> bool:
    """A chat message: a ``role``/``content`` mapping, or an object with those attributes
    (an SDK message such as openai's ``ChatCompletionMessage``, a pydantic model ...)."""
    if isinstance(value, Mapping):
        return "role" in value and "content" in value
    return not isinstance(value, (str, bytes)) and _has(value, "role") and _has(value, "content")


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and all(_is_message(m) for m in value)


def takes_system(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn`` has a ``system`` parameter (Anthropic style) that this call leaves
    unset or sets by keyword."""
    try:
        signature = inspect.signature(fn)
        bound = signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return False
    return "system" in signature.parameters and ("system" in kwargs or "system" not in bound)


def inject_arguments(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    attacks: Sequence[ContextAttack],
    takes_system: bool = False,
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments with the attack payloads in the system message, or None when there is
    no recognisable ``messages`` argument (a list of messages, :func:`_is_message`). Where
    and how the payload goes is :mod:`flakestorm.chaos.llm.injection`'s rule, as over HTTP."""
    payload = "\n\n".join(a.payload for a in attacks if a.payload)
    if not payload:
        return None
    if "messages" in kwargs and _is_messages(kwargs["messages"]):
        system = kwargs.get("system")
        if isinstance(system, (str, list)):  # Anthropic style: system is separate
            return args, {**kwargs, "system": with_payload(system, payload)}
        if takes_system and not system:  # unset (None, or the SDK's NOT_GIVEN / omit)
            return args, {**kwargs, "system": payload}
        return args, {**kwargs, "messages": messages_with_payload(kwargs["messages"], payload)}
    for i, arg in enumerate(args):
        if arg and _is_messages(arg):
            return (*args[:i], messages_with_payload(arg, payload), *args[i + 1 :]), kwargs
    return None
