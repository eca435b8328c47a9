"""What an LLM callable's reply billed (SPEC §15), read from the OpenAI and Anthropic SDKs' own
response objects: ``ChatCompletion.usage`` (``prompt_tokens``, its cached tokens apart,
``completion_tokens``), ``Response.usage`` (``input_tokens``, ``output_tokens``) and Anthropic's
``Message.usage`` (cache reads and writes apart) — or any object or dict of those shapes. A
stream is read by the agent after the call returns: its tokens are not counted here but as its
bytes pass (:func:`~flakestorm.chaos.wrappers.sdk_streams.watch_stream`, an SDK ``Stream`` or
``AsyncStream``); until then, and for the streams of the SDKs' stream helpers and raw
responses, they are ``unknown`` (a token or cost invariant over them errors its cell, never
passes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flakestorm.chaos.llm.usage import anthropic_usage, openai_usage
from flakestorm.results.usage import Counted, Usage


def _plain(value: Any) -> Any:
    """An SDK object (pydantic) as a dict; a dict as it is."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:
            return None
    return None


def sdk_usage(result: Any, streamed: bool) -> Usage | None:
    """What ``result`` (an LLM callable's return value) billed; None when it is no reply that
    states usage (nor a stream)."""
    doc = _plain(result)
    model = str((doc or {}).get("model") or getattr(result, "model", "") or "")
    if streamed:
        return Usage(model=model, counted=Counted.UNKNOWN)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("usage"), Mapping):
        return None
    usage = doc["usage"]
    if doc.get("type") == "message" or "cache_read_input_tokens" in usage:
        counts = anthropic_usage(usage)
    else:
        counts = openai_usage(usage) or {}
    return Usage(
        input=counts.get("input", 0),
        output=counts.get("output", 0),
        cache_read=counts.get("cache_read", 0),
        cache_write=counts.get("cache_write", 0),
        model=model,
    )
