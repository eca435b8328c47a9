"""LLM faults that speak the providers' protocols (SPEC §4.1).

The chaos proxy calls these functions on the LLM traffic it relays; the python wrappers
(:mod:`flakestorm.chaos.wrappers`) use the same text editing and injection on python values.
Nothing here does I/O: every function maps bytes (or text) to bytes (or text), with randomness
only from the ``random.Random`` it is given.

Protocols understood: OpenAI chat completions, completions and the Responses API; Anthropic
messages, each as a whole JSON body and as server-sent events (``"stream": true``).

==================  ===========================================================================
module              what it holds
==================  ===========================================================================
``modes``           one registered unit per LLM fault mode (:data:`LLM_MODES`): its fields,
                    label, the reply that replaces the upstream call
                    (:func:`fault_before_upstream`: ``rate_limit``, ``timeout``), its text
                    rewrite, its python plan
``protocol``        providers, which paths are LLM calls, streaming requests, the providers'
                    error bodies
``text``            public text transforms: :func:`count_tokens`, :func:`truncate_text`,
                    :func:`garbage_text`, :func:`drift_text` and their building blocks
``replies``         the content modes on whole JSON replies (:func:`fault_on_reply`) and on
                    python replies (:func:`~flakestorm.chaos.llm.replies.edit_texts`)
``streams``         the content modes' editors of SSE streams, protocol by protocol
``stream_faults``   a stream with a fault applied as it comes (:func:`fault_on_stream`,
                    :class:`StreamFaulter`): the editors, or the stream modes' cut and pacing
``cuts``            ``cut_stream`` (and ``timeout`` with ``after_chunks``): where a stream stops
``pacing``          ``slow_stream``'s waits and ``timeout``'s hold mid-stream
``usage``           what an LLM call billed, read at the wire
``injection``       ``injection_via_context``: :func:`inject_context` for request bodies, and
                    the same rule for python message lists
==================  ===========================================================================

Each name below is imported from its module when first used, so that reading a config (which
needs only :data:`LLM_MODES`) does not load the stream and reply rewriting.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flakestorm.chaos.llm.injection import inject_context
    from flakestorm.chaos.llm.modes import LLM_MODES, LlmMode, fault_before_upstream
    from flakestorm.chaos.llm.protocol import (
        JSON_HEADERS,
        RETRY_AFTER_S,
        SSE_HEADERS,
        STALL_COMMENT,
        LlmResponse,
        Provider,
        error_body,
        is_llm_path,
        is_streaming,
        provider_of,
        rate_limit_body,
    )
    from flakestorm.chaos.llm.replies import (
        DEFAULT_MAX_TOKENS,
        fault_on_reply,
        is_reply_document,
    )
    from flakestorm.chaos.llm.stream_faults import StreamFaulter, fault_on_stream
    from flakestorm.chaos.llm.text import count_tokens, drift_text, garbage_text, truncate_text

_HOME = {
    "inject_context": "injection",
    **dict.fromkeys(("LLM_MODES", "LlmMode", "fault_before_upstream"), "modes"),
    **dict.fromkeys(
        (
            "JSON_HEADERS",
            "RETRY_AFTER_S",
            "SSE_HEADERS",
            "STALL_COMMENT",
            "LlmResponse",
            "Provider",
            "error_body",
            "is_llm_path",
            "is_streaming",
            "provider_of",
            "rate_limit_body",
        ),
        "protocol",
    ),
    **dict.fromkeys(("DEFAULT_MAX_TOKENS", "fault_on_reply", "is_reply_document"), "replies"),
    **dict.fromkeys(("StreamFaulter", "fault_on_stream"), "stream_faults"),
    **dict.fromkeys(("count_tokens", "drift_text", "garbage_text", "truncate_text"), "text"),
}
"""Where each public name lives (the module table above)."""


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "JSON_HEADERS",
    "LLM_MODES",
    "RETRY_AFTER_S",
    "SSE_HEADERS",
    "STALL_COMMENT",
    "LlmMode",
    "LlmResponse",
    "Provider",
    "StreamFaulter",
    "count_tokens",
    "drift_text",
    "error_body",
    "fault_before_upstream",
    "fault_on_reply",
    "fault_on_stream",
    "garbage_text",
    "inject_context",
    "is_llm_path",
    "is_reply_document",
    "is_streaming",
    "provider_of",
    "rate_limit_body",
    "truncate_text",
]
