"""The providers' protocols: which calls are LLM calls, whose they are, and the replies that
stand in for the upstream call (SPEC §4.1).

``rate_limit`` and ``timeout`` replace the upstream call (:func:`fault_before_upstream`):

- ``rate_limit``: HTTP 429 with the provider's error JSON (:func:`rate_limit_body`) and a
  ``Retry-After`` header: ``delay_ms`` rounded up to whole seconds when set, else
  :data:`RETRY_AFTER_S`. A streaming request gets the same 429, before any stream starts.
- ``timeout``: no answer for ``delay_ms`` (default :data:`DEFAULT_TIMEOUT_MS`), then the
  connection is dropped. For a streaming request the stream *opens* (200 with SSE headers and
  one SSE comment frame, :data:`STALL_COMMENT`, which every SSE client ignores and which makes
  the headers leave at once) and then stalls (``stall_after_chunks=1``): the SDK has returned
  its stream object and times out reading it, which is how a stalled generation looks to an
  agent.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flakestorm.config import LlmFault, LlmFaultMode

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "JSON_HEADERS",
    "RETRY_AFTER_S",
    "SSE_HEADERS",
    "STALL_COMMENT",
    "LlmResponse",
    "Provider",
    "dump_json",
    "error_body",
    "fault_before_upstream",
    "is_llm_path",
    "is_streaming",
    "json_object",
    "provider_of",
    "rate_limit_body",
]

RETRY_AFTER_S = 1
"""``Retry-After`` of an injected 429 when the fault has no ``delay_ms``: short, so agents that
retry (the SDKs retry twice by default) do not slow a CI run down much."""
DEFAULT_TIMEOUT_MS = 30_000
"""How long a ``timeout`` fault holds the call when the fault has no ``delay_ms``."""
STALL_COMMENT = b": flakestorm stall\n\n"
"""The SSE comment frame a stalled stream sends before it stalls (ignored by SSE clients)."""

JSON_HEADERS: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
SSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-type", "text/event-stream; charset=utf-8"),
    ("cache-control", "no-cache"),
)


class Provider(str, enum.Enum):
    """Whose protocol an LLM call speaks."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"


@dataclass(frozen=True)
class LlmResponse:
    """What the proxy sends back to the agent.

    Exactly one of ``body`` and ``chunks`` is set, unless ``drop``. With ``stall_after_chunks``
    the proxy sends the headers and that many chunks, then holds the connection open until the
    client hangs up or ``delay_ms`` passes, then drops it; otherwise ``delay_ms`` is a wait
    before answering (or, with ``drop``, before dropping). ``status`` is not sent when
    ``drop`` is set.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes | None = None
    chunks: tuple[bytes, ...] | None = None
    stall_after_chunks: int | None = None
    delay_ms: int = 0
    drop: bool = False


# --------------------------------------------------------------------------- routing


_LLM_SUFFIXES = ("/chat/completions", "/completions", "/responses", "/messages")


def _clean_path(path: str) -> str:
    if "://" in path:
        path = urlsplit(path).path
    return path.split("?", 1)[0].split("#", 1)[0].rstrip("/")


def is_llm_path(path: str) -> bool:
    """Whether ``path`` (a path or a whole URL) is an LLM call: it ends with
    ``/chat/completions``, ``/completions``, ``/responses`` or ``/messages``."""
    return _clean_path(path).endswith(_LLM_SUFFIXES)


def provider_of(path: str) -> Provider:
    """The provider of a proxy route (``/llm/openai/...``, ``/llm/anthropic/...``) or, in forward
    mode, of a URL or path: ``api.anthropic.com`` or a path ending in ``/messages`` (outside
    OpenAI's ``/threads/``) is Anthropic; anything else is OpenAI."""
    host = urlsplit(path).hostname if "://" in path else None
    clean = _clean_path(path)
    if clean.startswith("/llm/anthropic"):
        return Provider.ANTHROPIC
    if clean.startswith("/llm/openai"):
        return Provider.OPENAI
    if host is not None and "anthropic" in host:
        return Provider.ANTHROPIC
    if (clean.endswith("/messages") or "/messages/" in clean) and "/threads/" not in clean:
        return Provider.ANTHROPIC
    return Provider.OPENAI


# --------------------------------------------------------------------------- JSON bodies


def json_object(body: bytes) -> dict[str, Any] | None:
    """``body`` parsed, when it is a JSON object; else None."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def dump_json(value: Any) -> bytes:
    """``value`` as UTF-8 JSON, non-ASCII text kept as it is (escaped only when it holds a lone
    surrogate, half of a pair that deltas split, as upstream sent it)."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (half of a pair split across deltas)
        return json.dumps(value).encode("ascii")  # escaped, as upstream sent it


def is_streaming(request_body: bytes) -> bool:
    """Whether a request body is a JSON object with ``"stream": true``."""
    doc = json_object(request_body)
    return doc is not None and doc.get("stream") is True


# --------------------------------------------------------------------------- errors


def error_body(provider: Provider, status: int, message: str, kind: str | None = None) -> bytes:
    """An error body in the provider's shape (OpenAI ``{"error": {...}}``, Anthropic
    ``{"type": "error", "error": {...}}``); ``kind`` defaults from the status."""
    if provider is Provider.ANTHROPIC:
        anthropic_kinds = {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            529: "overloaded_error",
        }
        return dump_json(
            {
                "type": "error",
                "error": {
                    "type": kind or anthropic_kinds.get(status, "api_error"),
                    "message": message,
                },
            }
        )
    openai_kinds = {429: "requests", 401: "invalid_request_error", 404: "invalid_request_error"}
    openai_kind = kind or openai_kinds.get(
        status, "invalid_request_error" if status < 500 else "server_error"
    )
    code = "rate_limit_exceeded" if status == 429 else None
    return dump_json(
        {"error": {"message": message, "type": openai_kind, "param": None, "code": code}}
    )


def rate_limit_body(provider: Provider) -> bytes:
    """The JSON body of an injected 429, in the provider's own shape."""
    message = (
        "Rate limit reached for requests (injected by flakestorm). "
        f"Please try again in {RETRY_AFTER_S}s."
    )
    return error_body(provider, 429, message)


# --------------------------------------------------------------------------- before upstream


def _rate_limit_response(fault: LlmFault, provider: Provider) -> LlmResponse:
    retry_after_s = RETRY_AFTER_S if fault.delay_ms is None else math.ceil(fault.delay_ms / 1000)
    headers = [*JSON_HEADERS, ("retry-after", str(retry_after_s))]
    if provider is Provider.ANTHROPIC:
        headers.append(("anthropic-ratelimit-requests-remaining", "0"))
    else:
        headers += [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", f"{retry_after_s}s"),
        ]
    return LlmResponse(429, tuple(headers), body=rate_limit_body(provider))


def _timeout_response(fault: LlmFault, streaming: bool) -> LlmResponse:
    delay_ms = DEFAULT_TIMEOUT_MS if fault.delay_ms is None else fault.delay_ms
    if streaming:
        return LlmResponse(
            200, SSE_HEADERS, chunks=(STALL_COMMENT,), stall_after_chunks=1, delay_ms=delay_ms
        )
    return LlmResponse(504, (), delay_ms=delay_ms, drop=True)


def fault_before_upstream(
    fault: LlmFault, provider: Provider, streaming: bool
) -> LlmResponse | None:
    """The reply for a fault that replaces the upstream call (``rate_limit``, ``timeout``), or
    None when the fault transforms the upstream reply instead."""
    if fault.mode is LlmFaultMode.RATE_LIMIT:
        return _rate_limit_response(fault, provider)
    if fault.mode is LlmFaultMode.TIMEOUT:
        return _timeout_response(fault, streaming)
    return None
