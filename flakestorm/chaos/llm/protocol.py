"""The providers' protocols: which calls are LLM calls, whose they are, and the pieces of the
replies that stand in for the upstream call (SPEC §4.1): the providers' error bodies, the SSE
headers, the comment frame a stalled stream sends. Which fault answers with which reply is its
mode's business (:mod:`flakestorm.chaos.llm.modes`).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "JSON_HEADERS",
    "RETRY_AFTER_S",
    "SSE_HEADERS",
    "STALL_COMMENT",
    "LlmResponse",
    "Provider",
    "dump_json",
    "error_body",
    "is_llm_path",
    "is_streaming",
    "json_object",
    "provider_of",
    "rate_limit_body",
]

RETRY_AFTER_S = 1
"""``Retry-After`` of an injected 429 when the fault has no ``delay_ms``: short, so agents that
retry (the SDKs retry twice by default) do not slow a CI run down much."""
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
    except (ValueError, UnicodeDecodeError, RecursionError):
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
