"""LLM faults that speak the providers' protocols (SPEC §4.1).

The chaos proxy calls these functions on the LLM traffic it relays; the python wrappers use the
text-level ones (:func:`truncate_text`, :func:`garbage_text`, :func:`drift_text`, ...). Nothing
here does I/O: every function maps bytes (or text) to bytes (or text), with randomness only from
the ``random.Random`` it is given.

Protocols understood: OpenAI chat completions, completions and the Responses API; Anthropic
messages — each as a whole JSON body and as server-sent events (``"stream": true``).

Where each mode acts
--------------------

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

The other modes transform the upstream reply (:func:`fault_on_reply` for a whole JSON body,
:func:`fault_on_stream` for SSE). Only the assistant's *text* changes; the reply keeps its
protocol shape (ids, roles, usage, stop frames):

- ``truncated_response``: the text is cut to ``max_tokens`` tokens (default
  :data:`DEFAULT_MAX_TOKENS`; :func:`count_tokens` defines a token), and the reply is marked as
  stopped by the limit whether or not text was cut: OpenAI ``finish_reason: "length"``,
  Anthropic ``stop_reason: "max_tokens"``, Responses API ``status: "incomplete"`` with
  ``incomplete_details.reason: "max_output_tokens"``. The budget applies per choice (OpenAI)
  or per message (Anthropic: shared by its text blocks). Usage output tokens become the
  :func:`count_tokens` of the text left.
- ``empty``: the text becomes ``""``; a finish reason of ``tool_calls``/``tool_use`` becomes
  ``stop``/``end_turn``; usage output tokens become 0.
- ``garbage``: the text is replaced by random-looking text of a similar length
  (:func:`garbage_text`).
- ``response_drift``: the text is rewritten by :func:`drift_text` with the fault's
  ``drift_type`` (when unset, one of the five is drawn from the RNG, once per reply).

Tool calls (OpenAI ``tool_calls``/``function_call``, Responses ``function_call`` items,
Anthropic ``tool_use`` blocks) stay valid in every mode: ``truncated_response`` and ``empty``
*drop* them (a model cut at its limit never finishes a call, and an empty reply has none),
``garbage`` and ``response_drift`` leave them untouched. A reply with no text left gets one
empty text part (Anthropic ``{"type": "text", "text": ""}``, OpenAI ``content: ""``), so the
usual ``content[0].text`` access keeps working. Reasoning/thinking parts are left as they are.

An upstream error reply (non-2xx) and an unparseable or unknown body pass through unchanged.

Streams
-------

:func:`fault_on_stream` is a lazy transform of the upstream SSE bytes (chunked at any
boundary) into complete SSE frames. ``empty`` and ``truncated_response`` act delta by delta;
``garbage`` and ``response_drift`` hold back each text part's deltas and send the rewritten text
as one delta just before that part ends (in a Responses API stream, a fresh
``response.output_text.delta`` event before ``response.output_text.done``, which carries the
rewritten text; later events' ``sequence_number`` move up by one, so they stay increasing).
A truncated Anthropic stream ends right after the cut (``content_block_stop``,
``message_delta`` with ``stop_reason: "max_tokens"``, ``message_stop``); a truncated OpenAI
stream sends the ``finish_reason: "length"`` chunk at the cut and then drops the choice's
remaining deltas up to upstream's ``data: [DONE]`` (so a requested usage chunk still arrives,
with adjusted counts). ``timeout`` and ``rate_limit`` never reach a stream (see above) and
pass through unchanged. A ``delay_ms`` on a content
mode is a wait before answering: :func:`fault_on_reply` returns it in ``LlmResponse.delay_ms``;
for a stream the caller applies it before sending the first frame. Responses API streams get the
text transforms on their ``response.output_text.*`` events and on the final response object,
but keep their ``function_call`` items.
"""

from __future__ import annotations

import copy
import enum
import json
import math
import random
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from flakestorm.config import DriftType, LlmFault, LlmFaultMode
from flakestorm.refusal import is_refusal

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT_MS",
    "RETRY_AFTER_S",
    "STALL_COMMENT",
    "LlmResponse",
    "Provider",
    "count_tokens",
    "drift_text",
    "error_body",
    "fault_before_upstream",
    "fault_on_reply",
    "fault_on_stream",
    "garbage_text",
    "inject_context",
    "is_llm_path",
    "is_streaming",
    "provider_of",
    "rate_limit_body",
    "truncate_text",
]

RETRY_AFTER_S = 1
"""``Retry-After`` of an injected 429 when the fault has no ``delay_ms``: short, so agents that
retry (the SDKs retry twice by default) do not slow a CI run down much."""
DEFAULT_TIMEOUT_MS = 30_000
"""How long a ``timeout`` fault holds the call when the fault has no ``delay_ms``."""
DEFAULT_MAX_TOKENS = 20
"""The ``truncated_response`` budget when the fault has no ``max_tokens``."""
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


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _dump(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (half of a pair split across deltas)
        return json.dumps(value).encode("ascii")  # escaped, as upstream sent it


def is_streaming(request_body: bytes) -> bool:
    """Whether a request body is a JSON object with ``"stream": true``."""
    doc = _json_object(request_body)
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
        return _dump(
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
    return _dump({"error": {"message": message, "type": openai_kind, "param": None, "code": code}})


def rate_limit_body(provider: Provider) -> bytes:
    """The JSON body of an injected 429, in the provider's own shape."""
    message = (
        "Rate limit reached for requests (injected by flakestorm). "
        f"Please try again in {RETRY_AFTER_S}s."
    )
    return error_body(provider, 429, message)


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


# --------------------------------------------------------------------------- text level

_TOKEN = re.compile(r"\w+|[\ud800-\udbff][\udc00-\udfff]|[^\w\s]")


def count_tokens(text: str) -> int:
    """The number of tokens in ``text``, approximated as word pieces: each run of letters,
    digits and underscores is one token, each other non-space character is one token
    (``"Hello, world!"`` is 4; a surrogate pair, as deltas that split one leave it, is one).
    Deterministic and tokenizer-free; real tokenizers give roughly the same count for English
    prose."""
    return sum(1 for _ in _TOKEN.finditer(text))


def truncate_text(text: str, max_tokens: int) -> str:
    """``text`` cut right after its ``max_tokens``-th token (see :func:`count_tokens`)."""
    if max_tokens <= 0:
        return ""
    for n, match in enumerate(_TOKEN.finditer(text), start=1):
        if n == max_tokens:
            return text[: match.end()]
    return text


_SYLLABLES = (
    "qu", "zx", "vr", "ok", "lü", "ip", "thr", "ae", "gn", "wx", "ys", "ka", "mø", "dr",
    "zz", "ept", "ul", "fy", "ç", "orb",
)  # fmt: skip
_NOISE = ("#", "%", "~", "7", "3", "0x", "¶", "§", "|", "^", "9", "@", "&", "42")


def garbage_text(rng: random.Random, like: str) -> str:
    """Random-looking text about as long as ``like`` (at least 24 characters): nonsense
    syllables, digits and symbols. Never valid JSON, never a refusal."""
    target = min(max(len(like), 24), 100_000)
    words: list[str] = []
    length = -1  # no space before the first word
    while length < target:
        pieces = [rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            pieces.insert(rng.randint(0, len(pieces)), rng.choice(_NOISE))
        word = "".join(pieces)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


# -- drift


_SYNONYMS = {
    "price": "cost",
    "cost": "price",
    "name": "title",
    "title": "name",
    "id": "identifier",
    "amount": "value",
    "value": "amount",
    "total": "sum",
    "count": "quantity",
    "quantity": "count",
    "date": "timestamp",
    "time": "timestamp",
    "source": "origin",
    "status": "state",
    "state": "status",
    "message": "msg",
    "description": "details",
    "type": "kind",
    "ticker": "symbol",
    "symbol": "ticker",
    "answer": "response",
    "result": "output",
    "output": "result",
    "error": "err",
    "data": "payload",
    "items": "entries",
    "text": "content",
    "content": "text",
    "currency": "currency_code",
    "score": "rating",
    "email": "email_address",
    "url": "link",
}


def _snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _rename_key(key: str) -> str:
    lower = key.lower()
    if lower in _SYNONYMS:
        new = _SYNONYMS[lower]
        return new.upper() if key.isupper() and len(key) > 1 else new
    if "_" in key.strip("_"):
        return _snake_to_camel(key)
    if re.search(r"[a-z0-9][A-Z]", key):
        return _camel_to_snake(key)
    return key[:1].upper() + key[1:] if key[:1].islower() else key[:1].lower() + key[1:]


def _rename_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_rename_key(str(k)): _rename_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename_keys(v) for v in value]
    return value


_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.DOTALL)


def _json_in(text: str) -> tuple[Any, str, str, bool] | None:
    """The JSON value ``text`` holds (whole, or in a fenced block): (value, before, after,
    indented)."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, (dict, list)):
            start = text.index(stripped[0])
            return value, text[:start], text[start + len(stripped) :], "\n" in stripped
    match = _FENCED_JSON.search(text)
    if match:
        try:
            value = json.loads(match.group(1))
        except ValueError:
            return None
        if isinstance(value, (dict, list)):
            before = text[: match.start(1)]
            after = text[match.end(1) :]
            return value, before, after, "\n" in match.group(1).strip()
    return None


def _dump_like(value: Any, indented: bool) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2 if indented else None)


_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:(?:_[a-z0-9]+)+|(?:[A-Z][a-z0-9]*)+)\b")


def _drift_field_rename(text: str) -> str:
    found = _json_in(text)
    if found is not None:
        value, before, after, indented = found
        return before + _dump_like(_rename_keys(value), indented) + after

    # prose: flip the identifiers it mentions (total_price <-> totalPrice)
    def flip(match: re.Match[str]) -> str:
        word = match.group(0)
        return _snake_to_camel(word) if "_" in word else _camel_to_snake(word)

    return _IDENTIFIER.sub(flip, text)


def _leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out += _leaves(v, f"{prefix} {k}".strip())
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value, start=1):
            out += _leaves(v, f"{prefix} item {i}".strip())
        return out
    return [(prefix.replace("_", " ") or "value", value)]


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def _drift_format(text: str, rng: random.Random) -> str:
    found = _json_in(text)
    if found is not None:
        pairs = _leaves(found[0])
        if not pairs:
            return "There is nothing to report."
        said = ", ".join(f"the {k} is {v}" for k, v in pairs)
        return f"In short: {said}."
    lines = [line for line in text.splitlines() if line.strip()]
    items = [m.group(1) for m in map(_LIST_ITEM.match, lines) if m]
    rows = [line for line in lines if line.strip().startswith("|")]
    if lines and (len(items) >= max(1, len(lines) // 2) or len(rows) >= max(2, len(lines) // 2)):
        # a list or table -> prose
        if rows:
            cells = [
                [c.strip() for c in row.strip().strip("|").split("|")]
                for row in rows
                if not _TABLE_RULE.match(row)
            ]
            items = ["; ".join(c for c in row if c) for row in cells]
        return " ".join(i.rstrip(".") + "." for i in items if i)
    sentences = _sentences(text) or [text.strip()]
    if rng.random() < 0.5:
        return "\n".join(f"- {s}" for s in sentences)
    table = ["| # | Point |", "|---|---|"]
    table += [f"| {i} | {s.replace('|', '/')} |" for i, s in enumerate(sentences, start=1)]
    return "\n".join(table)


_PADDING = (
    "Great question! Let me walk you through this carefully and in some detail.",
    "To put it another way, and to make sure nothing important is missed:",
    "It is also worth keeping in mind that circumstances can vary, and several caveats apply.",
    "There are a few additional considerations, which I will outline for completeness.",
    "I hope this thorough explanation helps; please let me know if anything is unclear.",
)


def _drift_verbosity(text: str, rng: random.Random) -> str:
    tokens = count_tokens(text)
    first = (_sentences(text) or [text])[0]
    short = truncate_text(first, max(4, tokens // 4))
    if rng.random() < 0.5 and tokens >= 8 and count_tokens(short) < tokens:
        return short
    body = text.strip()
    return "\n\n".join(
        [
            _PADDING[0],
            body,
            f"{_PADDING[1]} {body}",
            _PADDING[2],
            _PADDING[3],
            f"In summary: {first}",
            _PADDING[4],
        ]
    )


_REFUSALS = (
    "I'm sorry, but I can't help with that request.",
    "Unfortunately, I'm unable to assist with this.",
    "I won't be able to provide that information.",
    "That's not something I can help with, I'm afraid: I must decline to answer.",
    "I'm not able to do that. Is there something else I can help with?",
)
_SOFT_REFUSALS = (
    "I'm sorry, but I can't provide a definitive answer to that. "
    "You may want to consult an authoritative source.",
    "I'd rather not answer that directly; I'm not able to give reliable guidance here. "
    "Please check with a qualified professional.",
    "I'm unable to help with this one right now. Could you rephrase or ask something else?",
)


def _drift_refusal(text: str, rng: random.Random) -> str:
    if is_refusal(text):
        choices = [r for r in _REFUSALS if r.strip() != text.strip()]
        return rng.choice(choices)
    return rng.choice(_SOFT_REFUSALS)


_CONTRACT = (
    ("do not", "don't"),
    ("does not", "doesn't"),
    ("is not", "isn't"),
    ("are not", "aren't"),
    ("cannot", "can't"),
    ("will not", "won't"),
    ("it is", "it's"),
    ("I am", "I'm"),
    ("you are", "you're"),
    ("that is", "that's"),
)


def _swap(text: str, pairs: Iterable[tuple[str, str]]) -> str:
    for old, new in pairs:

        def replace(match: re.Match[str], new: str = new) -> str:
            return new[:1].upper() + new[1:] if match.group(0)[:1].isupper() else new

        text = re.sub(rf"\b{re.escape(old)}\b", replace, text, flags=re.IGNORECASE)
    return text


def _drift_tone(text: str, rng: random.Random) -> str:
    body = text.strip()
    if rng.random() < 0.5:
        casual = _swap(body, _CONTRACT)
        casual = casual[:1].lower() + casual[1:] if casual[:2] != "I " else casual
        return f"Hey! So basically, {casual} Hope that helps, cheers :)"
    formal = _swap(body, [(new, old) for old, new in _CONTRACT])
    return (
        "Good day. Please find below the information you requested.\n\n"
        f"{formal}\n\n"
        "Should you require any further assistance, please do not hesitate to ask. "
        "Kind regards."
    )


def drift_text(text: str, drift: DriftType, rng: random.Random) -> str:
    """``text`` rewritten the way a new model version might answer:

    - ``json_field_rename``: JSON (the whole text, or a fenced block) gets its keys renamed,
      recursively: known synonyms (``price`` -> ``cost``, ``name`` -> ``title``, ...),
      snake_case <-> camelCase, else the first letter's case flipped. Prose gets the
      snake_case/camelCase identifiers it mentions flipped.
    - ``format_change``: JSON -> one prose sentence; a list or table -> prose; prose -> a
      bullet list or a markdown table (RNG).
    - ``verbosity_shift``: much shorter (a cut first sentence) or much longer (padding and
      restatement) (RNG; always longer for texts under 8 tokens).
    - ``refusal_rephrase``: a refusal is reworded into another refusal; any other answer
      becomes a soft refusal. Both are refusals to :func:`flakestorm.refusal.is_refusal`.
    - ``tone_shift``: casual (contractions, "Hey!") or stiffly formal (RNG); the content is
      kept.
    """
    if drift is DriftType.JSON_FIELD_RENAME:
        return _drift_field_rename(text)
    if drift is DriftType.FORMAT_CHANGE:
        return _drift_format(text, rng)
    if drift is DriftType.VERBOSITY_SHIFT:
        return _drift_verbosity(text, rng)
    if drift is DriftType.REFUSAL_REPHRASE:
        return _drift_refusal(text, rng)
    return _drift_tone(text, rng)


# --------------------------------------------------------------------------- editing replies


class _Editor:
    """Applies one fault to the successive text parts of one reply (or one choice)."""

    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self.mode = fault.mode
        self.rng = rng
        self.limit = DEFAULT_MAX_TOKENS if fault.max_tokens is None else fault.max_tokens
        self.budget = self.limit
        """Tokens left for the current choice (truncation)."""
        self.drift = fault.drift_type or rng.choice(list(DriftType))
        self.old_tokens = 0
        self.new_tokens = 0

    @property
    def drops_tools(self) -> bool:
        return self.mode in (LlmFaultMode.TRUNCATED_RESPONSE, LlmFaultMode.EMPTY)

    @property
    def truncates(self) -> bool:
        return self.mode is LlmFaultMode.TRUNCATED_RESPONSE

    def text(self, text: str) -> str:
        """The new text of one whole text part."""
        new = self._rewrite(text)
        self.old_tokens += count_tokens(text)
        self.new_tokens += count_tokens(new)
        return new

    def _rewrite(self, text: str) -> str:
        if self.mode is LlmFaultMode.TRUNCATED_RESPONSE:
            kept = truncate_text(text, self.budget)
            self.budget -= count_tokens(kept)
            return kept
        if self.mode is LlmFaultMode.EMPTY:
            return ""
        if self.mode is LlmFaultMode.GARBAGE:
            return garbage_text(self.rng, text)
        if self.mode is LlmFaultMode.RESPONSE_DRIFT:
            return drift_text(text, self.drift, self.rng)
        return text

    def output_tokens(self, original: Any) -> Any:
        """Adjusted usage output tokens (``original`` unchanged if not an int)."""
        if not isinstance(original, int) or isinstance(original, bool):
            return original
        if self.drops_tools:
            return self.new_tokens
        return max(0, original - self.old_tokens) + self.new_tokens


def _set_usage(usage: Any, out_key: str, editor: _Editor) -> None:
    if not isinstance(usage, dict) or out_key not in usage:
        return
    old = usage[out_key]
    usage[out_key] = editor.output_tokens(old)
    total = usage.get("total_tokens")
    if isinstance(total, int) and isinstance(old, int) and isinstance(usage[out_key], int):
        usage["total_tokens"] = total - old + usage[out_key]


def _edit_chat(doc: dict[str, Any], editor: _Editor) -> None:
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
        elif editor.mode is LlmFaultMode.EMPTY and choice.get("finish_reason") in (
            "tool_calls",
            "function_call",
        ):
            choice["finish_reason"] = "stop"
    _set_usage(doc.get("usage"), "completion_tokens", editor)


def _edit_completion(doc: dict[str, Any], editor: _Editor) -> None:
    for choice in doc["choices"]:
        if isinstance(choice, dict) and isinstance(choice.get("text"), str):
            choice["text"] = editor.text(choice["text"])
            if editor.truncates:
                choice["finish_reason"] = "length"
                editor.budget = editor.limit
    _set_usage(doc.get("usage"), "completion_tokens", editor)


def _empty_message_item() -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_flakestorm",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "", "annotations": []}],
    }


def _edit_responses_output(output: list[Any], editor: _Editor) -> list[Any]:
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


def _edit_response(doc: dict[str, Any], editor: _Editor) -> None:
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
    _set_usage(doc.get("usage"), "output_tokens", editor)


_TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")


def _edit_message(doc: dict[str, Any], editor: _Editor) -> None:
    blocks: list[Any] = []
    has_text = False
    for block in doc["content"]:
        if isinstance(block, dict) and block.get("type") == "text":
            has_text = True
            new = editor.text(str(block.get("text", "")))
            if new != block.get("text") and block.get("citations"):
                block["citations"] = None
            block["text"] = new
        elif editor.drops_tools and isinstance(block, dict) and block.get("type") in _TOOL_BLOCKS:
            continue
        blocks.append(block)
    if editor.drops_tools and not has_text:
        blocks.append({"type": "text", "text": ""})
    doc["content"] = blocks
    if editor.truncates:
        doc["stop_reason"] = "max_tokens"
        doc["stop_sequence"] = None
    elif editor.mode is LlmFaultMode.EMPTY and doc.get("stop_reason") == "tool_use":
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


def _edit_document(doc: dict[str, Any], fault: LlmFault, rng: random.Random) -> bool:
    """Apply ``fault`` to a reply document in place; False when its shape is unknown."""
    kind = _reply_kind(doc)
    if kind is None:
        return False
    editor = _Editor(fault, rng)
    _EDITORS[kind](doc, editor)
    return True


_FRAMING = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding"})


def _header_items(headers: Any) -> tuple[tuple[str, str], ...]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(k), str(v)) for k, v in items)


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
    :func:`fault_before_upstream`. A non-2xx reply and a body that is not a known reply
    document pass through unchanged. ``delay_ms`` on other modes is a wait before answering.
    """
    if fault.mode in (LlmFaultMode.RATE_LIMIT, LlmFaultMode.TIMEOUT):
        before = fault_before_upstream(fault, provider, streaming=False)
        assert before is not None
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
    doc = _json_object(body)
    if doc is None or not _edit_document(doc, fault, rng):
        return passthrough
    kept = tuple((k, v) for k, v in items if k.lower() not in _FRAMING)
    return LlmResponse(status, kept, body=_dump(doc), delay_ms=delay_ms)


# --------------------------------------------------------------------------- streams

_FRAME_END = re.compile(rb"\r?\n\r?\n")


@dataclass
class _Frame:
    raw: bytes
    event: str | None = None
    data: str | None = None

    @classmethod
    def parse(cls, raw: bytes) -> _Frame:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return cls(raw)
        event = None
        data: list[str] = []
        for line in text.splitlines():
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        return cls(raw, event, "\n".join(data) if data else None)

    def json(self) -> dict[str, Any] | None:
        if self.data is None or self.data == "[DONE]":
            return None
        try:
            value = json.loads(self.data)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def _frames(chunks: Iterable[bytes]) -> Iterator[_Frame]:
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while True:
            match = _FRAME_END.search(buffer)
            if match is None:
                break
            raw, buffer = buffer[: match.end()], buffer[match.end() :]
            yield _Frame.parse(raw)
    if buffer.strip():
        yield _Frame.parse(buffer)


def _data_frame(value: Any) -> bytes:
    return b"data: " + _dump(value) + b"\n\n"


def _event_frame(value: dict[str, Any]) -> bytes:
    return f"event: {value['type']}\n".encode() + _data_frame(value)


class _StreamEdit:
    """Edits one SSE stream frame by frame; ``done`` = stop reading upstream."""

    done = False

    def frame(self, frame: _Frame, doc: dict[str, Any]) -> list[bytes]:
        raise NotImplementedError

    def other(self, frame: _Frame) -> list[bytes]:
        return [frame.raw]

    def end(self) -> list[bytes]:
        return []


@dataclass
class _Part:
    """One text part of a stream being edited: what upstream sent and what was sent on."""

    received: str = ""
    sent: str = ""
    finished: bool = False


def _cut(part: _Part, text: str, budget: int) -> tuple[str, bool]:
    """Feed ``text`` to a truncated part: (what to send on, whether the budget ran out)."""
    part.received += text
    allowed = truncate_text(part.received, budget)
    piece = allowed[len(part.sent) :] if len(allowed) > len(part.sent) else ""
    part.sent += piece
    return piece, count_tokens(part.received) > budget


class _OpenAIStreamEdit(_StreamEdit):
    """``chat.completion.chunk`` and ``text_completion`` streams."""

    def __init__(self, fault: LlmFault, rng: random.Random, chat: bool) -> None:
        self.editor = _Editor(fault, rng)
        self.budget = self.editor.budget
        self.chat = chat
        self.parts: dict[int, _Part] = {}
        self.template: dict[str, Any] = {}

    def _text_of(self, choice: dict[str, Any]) -> Any:
        if self.chat:
            delta = choice.get("delta")
            return delta.get("content") if isinstance(delta, dict) else None
        return choice.get("text")

    def _set_text(self, choice: dict[str, Any], text: str) -> None:
        if not self.chat:
            choice["text"] = text
            return
        delta = choice.setdefault("delta", {})
        if text or delta.get("role") is not None:
            delta["content"] = text
        else:
            delta.pop("content", None)

    def _chunk(self, index: int, text: str | None, finish: str | None) -> bytes:
        choice: dict[str, Any] = {"index": index}
        if self.chat:
            choice["delta"] = {} if text is None else {"content": text}
        else:
            choice["text"] = text or ""
        choice["logprobs"] = None
        choice["finish_reason"] = finish
        return _data_frame({**self.template, "choices": [choice]})

    def _flush(self, index: int, part: _Part) -> list[bytes]:
        """The rewritten text of a held-back part (garbage / drift)."""
        part.sent = self.editor.text(part.received)
        return [self._chunk(index, part.sent, None)] if part.sent else []

    @property
    def holds(self) -> bool:
        return self.editor.mode in (LlmFaultMode.GARBAGE, LlmFaultMode.RESPONSE_DRIFT)

    def frame(self, frame: _Frame, doc: dict[str, Any]) -> list[bytes]:
        choices = doc.get("choices")
        if not isinstance(choices, list):
            return [frame.raw]
        self.template = {k: v for k, v in doc.items() if k not in ("choices", "usage")}
        before: list[bytes] = []
        kept: list[Any] = []
        for choice in choices:
            if not isinstance(choice, dict):
                kept.append(choice)
                continue
            index = int(choice.get("index", 0))
            part = self.parts.setdefault(index, _Part())
            if part.finished:
                continue
            if kept_choice := self._choice(choice, index, part, before):
                kept.append(kept_choice)
        usage = doc.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        if not kept and choices and not isinstance(usage, dict):
            return before
        return [*before, _data_frame({**doc, "choices": kept})]

    def _choice(
        self, choice: dict[str, Any], index: int, part: _Part, before: list[bytes]
    ) -> dict[str, Any] | None:
        delta = choice.get("delta")
        if self.chat and isinstance(delta, dict) and self.editor.drops_tools:
            delta.pop("tool_calls", None)
            delta.pop("function_call", None)
        text = self._text_of(choice)
        mode = self.editor.mode
        hit = False
        if isinstance(text, str) and text:
            if mode is LlmFaultMode.TRUNCATED_RESPONSE:
                piece, hit = _cut(part, text, self.budget)
                self._set_text(choice, piece)
            else:
                part.received += text
                self._set_text(choice, "")
        finish = choice.get("finish_reason")
        if hit:
            choice["finish_reason"] = "length"
            part.finished = True
        elif finish is not None:
            part.finished = True
            if mode is LlmFaultMode.TRUNCATED_RESPONSE:
                choice["finish_reason"] = "length"
            elif mode is LlmFaultMode.EMPTY and finish in ("tool_calls", "function_call"):
                choice["finish_reason"] = "stop"
            elif self.holds:
                before += self._flush(index, part)
        delta = choice.get("delta")
        empty_delta = not self.chat or (isinstance(delta, dict) and not delta)
        if (
            choice.get("finish_reason") is None
            and empty_delta
            and not (not self.chat and choice.get("text"))
        ):
            return None
        return choice

    def _usage(self, usage: dict[str, Any]) -> None:
        editor = self.editor
        editor.old_tokens = sum(count_tokens(p.received) for p in self.parts.values())
        editor.new_tokens = sum(count_tokens(p.sent) for p in self.parts.values())
        _set_usage(usage, "completion_tokens", editor)

    def _flush_unfinished(self) -> list[bytes]:
        out: list[bytes] = []
        if self.holds:
            for index, part in self.parts.items():
                if not part.finished:
                    part.finished = True
                    out += self._flush(index, part)
        return out

    def other(self, frame: _Frame) -> list[bytes]:
        if frame.data == "[DONE]":
            return [*self._flush_unfinished(), frame.raw]
        return [frame.raw]

    def end(self) -> list[bytes]:
        return self._flush_unfinished()


@dataclass
class _Block:
    type: str
    index: int | None
    """The index sent downstream; None when the block is dropped."""
    part: _Part = field(default_factory=_Part)


class _AnthropicStreamEdit(_StreamEdit):
    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self.editor = _Editor(fault, rng)
        self.blocks: dict[int, _Block] = {}
        self.next_index = 0
        self.text_blocks = 0
        self.budget = self.editor.budget
        self.sent_tokens = 0

    def _text_tokens(self) -> tuple[int, int]:
        parts = [b.part for b in self.blocks.values() if b.type == "text"]
        return sum(count_tokens(p.received) for p in parts), sum(
            count_tokens(p.sent) for p in parts
        )

    def _usage(self, usage: dict[str, Any] | None) -> dict[str, Any]:
        old, new = self._text_tokens()
        self.editor.old_tokens, self.editor.new_tokens = old, new
        out = dict(usage or {"output_tokens": new})
        out["output_tokens"] = self.editor.output_tokens(out.get("output_tokens", new))
        return out

    def _stop(self, stop_reason: str) -> list[bytes]:
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        return [
            _event_frame({"type": "message_delta", "delta": delta, "usage": self._usage(None)}),
            _event_frame({"type": "message_stop"}),
        ]

    def _empty_text_block(self) -> list[bytes]:
        index = self.next_index
        self.next_index += 1
        self.text_blocks += 1
        return [
            _event_frame(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
            _event_frame({"type": "content_block_stop", "index": index}),
        ]

    def frame(self, frame: _Frame, doc: dict[str, Any]) -> list[bytes]:
        kind = doc.get("type")
        editor = self.editor
        if kind == "content_block_start":
            block_doc = doc.get("content_block")
            block_type = str(block_doc.get("type")) if isinstance(block_doc, dict) else ""
            index = int(doc.get("index", 0))
            if editor.drops_tools and block_type in _TOOL_BLOCKS:
                self.blocks[index] = _Block(block_type, None)
                return []
            self.blocks[index] = _Block(block_type, self.next_index)
            self.next_index += 1
            if block_type == "text":
                self.text_blocks += 1
                if isinstance(block_doc, dict) and block_doc.get("text"):
                    block_doc["text"] = ""  # initial text is always "" in practice
            return [_event_frame({**doc, "index": self.blocks[index].index})]
        if kind in ("content_block_delta", "content_block_stop"):
            block = self.blocks.get(int(doc.get("index", 0)))
            if block is None:
                return [frame.raw]
            if block.index is None:
                return []
            doc = {**doc, "index": block.index}
            if kind == "content_block_delta":
                return self._delta(block, doc)
            out: list[bytes] = []
            if block.type == "text" and editor.truncates:  # the budget is per message
                self.sent_tokens += count_tokens(block.part.sent)
            if block.type == "text" and editor.mode in (
                LlmFaultMode.GARBAGE,
                LlmFaultMode.RESPONSE_DRIFT,
            ):
                block.part.sent = editor.text(block.part.received)
                if block.part.sent:
                    out.append(_text_delta(block.index, block.part.sent))
            return [*out, _event_frame(doc)]
        if kind == "message_delta":
            out = []
            if editor.drops_tools and self.text_blocks == 0:
                out += self._empty_text_block()
            delta = doc.get("delta") if isinstance(doc.get("delta"), dict) else {}
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            if editor.truncates:
                reason = "max_tokens"
            elif editor.mode is LlmFaultMode.EMPTY and reason == "tool_use":
                reason = "end_turn"
            usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else None
            doc = {**doc, "delta": {**(delta or {}), "stop_reason": reason}}
            doc["usage"] = self._usage(usage)
            return [*out, _event_frame(doc)]
        return [frame.raw]

    def _delta(self, block: _Block, doc: dict[str, Any]) -> list[bytes]:
        delta = doc.get("delta")
        if block.type != "text" or not isinstance(delta, dict) or delta.get("type") != "text_delta":
            return [_event_frame(doc)]
        text = str(delta.get("text", ""))
        mode = self.editor.mode
        if mode is LlmFaultMode.TRUNCATED_RESPONSE:
            budget = self.budget - self.sent_tokens
            piece, hit = _cut(block.part, text, budget)
            out = [_text_delta(block.index or 0, piece)] if piece else []
            if hit:
                self.done = True
                out.append(_event_frame({"type": "content_block_stop", "index": block.index}))
                return out + self._stop("max_tokens")
            return out
        block.part.received += text
        return []

    def end(self) -> list[bytes]:
        return []


def _text_delta(index: int, text: str) -> bytes:
    return _event_frame(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }
    )


class _ResponsesStreamEdit(_StreamEdit):
    """Responses API streams (``response.*`` events): text only, see the module docstring."""

    def __init__(self, fault: LlmFault, rng: random.Random) -> None:
        self.fault = fault
        self.rng = rng
        self.editor = _Editor(fault, rng)
        self.parts: dict[tuple[Any, Any], _Part] = {}
        self.shift = 0
        """Events inserted so far: each later ``sequence_number`` moves up by this much."""

    def _part(self, doc: dict[str, Any]) -> _Part:
        return self.parts.setdefault((doc.get("output_index"), doc.get("content_index")), _Part())

    def _final(self, part: _Part) -> str:
        if not part.finished:
            part.finished = True
            if self.editor.mode is LlmFaultMode.TRUNCATED_RESPONSE:
                part.sent = truncate_text(part.received, self.editor.budget)
                self.editor.budget -= count_tokens(part.sent)
            else:
                part.sent = self.editor.text(part.received)
        return part.sent

    def frame(self, frame: _Frame, doc: dict[str, Any]) -> list[bytes]:
        number = doc.get("sequence_number")
        if self.shift and isinstance(number, int) and not isinstance(number, bool):
            doc = {**doc, "sequence_number": number + self.shift}
            frame = _Frame(_event_frame(doc))
        return self._frame(frame, doc)

    def _delta_before(self, done: dict[str, Any], text: str) -> bytes:
        """A ``response.output_text.delta`` event of ``text`` to send just before ``done``
        (which then, like every later event, gets the next sequence number)."""
        delta: dict[str, Any] = {"type": "response.output_text.delta"}
        number = done.get("sequence_number")
        if isinstance(number, int) and not isinstance(number, bool):
            delta["sequence_number"] = number
            done["sequence_number"] = number + 1
            self.shift += 1
        for key in ("item_id", "output_index", "content_index"):
            if key in done:
                delta[key] = done[key]
        return _event_frame({**delta, "delta": text, "logprobs": []})

    def _frame(self, frame: _Frame, doc: dict[str, Any]) -> list[bytes]:
        kind = str(doc.get("type", ""))
        mode = self.editor.mode
        if kind == "response.output_text.delta":
            part = self._part(doc)
            text = str(doc.get("delta", ""))
            if mode is LlmFaultMode.TRUNCATED_RESPONSE:
                remaining = self.editor.budget
                piece, _ = _cut(part, text, remaining)
                return [_event_frame({**doc, "delta": piece})] if piece else []
            part.received += text
            return []
        if kind == "response.output_text.done":
            part = self._part(doc)
            if not part.received and isinstance(doc.get("text"), str):
                part.received = doc["text"]
            sent_before = part.sent
            final = self._final(part)
            done = {**doc, "text": final}
            out = []
            if mode is not LlmFaultMode.TRUNCATED_RESPONSE and final:
                out.append(self._delta_before(done, final))
            elif final.startswith(sent_before) and final != sent_before:
                out.append(self._delta_before(done, final[len(sent_before) :]))
            return [*out, _event_frame(done)]
        if kind == "response.content_part.done" and isinstance(doc.get("part"), dict):
            part_doc = doc["part"]
            if isinstance(part_doc.get("text"), str):
                part = self._part(doc)
                part_doc = {**part_doc, "text": self._final(part), "annotations": []}
                return [_event_frame({**doc, "part": part_doc})]
        if kind == "response.output_item.done" and isinstance(doc.get("item"), dict):
            item = copy.deepcopy(doc["item"])
            self._apply(item, doc.get("output_index"))
            return [_event_frame({**doc, "item": item})]
        if kind in ("response.completed", "response.incomplete") and isinstance(
            doc.get("response"), dict
        ):
            response = copy.deepcopy(doc["response"])
            for i, item in enumerate(response.get("output") or []):
                if isinstance(item, dict):
                    self._apply(item, i)
            old = sum(count_tokens(p.received) for p in self.parts.values())
            new = sum(count_tokens(p.sent) for p in self.parts.values())
            self.editor.old_tokens, self.editor.new_tokens = old, new
            if self.editor.truncates:
                response["status"] = "incomplete"
                response["incomplete_details"] = {"reason": "max_output_tokens"}
                kind = "response.incomplete"
            _set_usage(response.get("usage"), "output_tokens", self.editor)
            return [_event_frame({**doc, "type": kind, "response": response})]
        return [frame.raw]

    def _apply(self, item: dict[str, Any], output_index: Any) -> None:
        if item.get("type") != "message":
            return
        for content_index, part_doc in enumerate(item.get("content") or []):
            if isinstance(part_doc, dict) and isinstance(part_doc.get("text"), str):
                part = self.parts.setdefault((output_index, content_index), _Part())
                if not part.received and not part.finished:
                    part.received = part_doc["text"]
                part_doc["text"] = self._final(part)
                part_doc["annotations"] = []
        if self.editor.truncates:
            item["status"] = "incomplete"


def _stream_edit(
    fault: LlmFault, provider: Provider, doc: dict[str, Any], rng: random.Random
) -> _StreamEdit | None:
    obj = doc.get("object")
    kind = str(doc.get("type", ""))
    if obj == "chat.completion.chunk":
        return _OpenAIStreamEdit(fault, rng, chat=True)
    if obj == "text_completion":
        return _OpenAIStreamEdit(fault, rng, chat=False)
    if kind.startswith("response."):
        return _ResponsesStreamEdit(fault, rng)
    if kind in ("message_start", "ping", "content_block_start"):
        return _AnthropicStreamEdit(fault, rng)
    if isinstance(doc.get("choices"), list):
        if not doc["choices"]:  # Azure's opening prompt_filter_results chunk: decide later
            return None
        chat = any(isinstance(c, dict) and "delta" in c for c in doc["choices"])
        return _OpenAIStreamEdit(fault, rng, chat=chat)
    return None


def fault_on_stream(
    fault: LlmFault, provider: Provider, chunks: Iterable[bytes], rng: random.Random
) -> Iterator[bytes]:
    """Upstream's SSE bytes (split anywhere) as the agent should see them under ``fault``: a
    lazy iterator of complete SSE frames (see the module docstring).

    When the fault has ended the stream early (Anthropic truncation), the iterator stops
    reading ``chunks``; the caller then closes the upstream connection. ``timeout`` and
    ``rate_limit`` pass through unchanged: :func:`fault_before_upstream` answers them.
    """
    if fault.mode in (LlmFaultMode.TIMEOUT, LlmFaultMode.RATE_LIMIT):
        yield from chunks
        return
    edit: _StreamEdit | None = None
    for frame in _frames(chunks):
        doc = frame.json()
        if edit is None and doc is not None:
            edit = _stream_edit(fault, provider, doc, rng)
        if edit is None:
            yield frame.raw
        elif doc is None:
            yield from edit.other(frame)
        else:
            yield from edit.frame(frame, doc)
        if edit is not None and edit.done:
            return
    if edit is not None:
        yield from edit.end()


# --------------------------------------------------------------------------- requests


def inject_context(provider: Provider, request_body: bytes, payload: str) -> bytes:
    """``request_body`` with ``payload`` placed where the model reads its instructions
    (``injection_via_context``):

    - Anthropic messages: appended to the top-level ``system`` (a string gets ``"\\n\\n" +
      payload``, a list of blocks gets a text block), or set as ``system``;
    - OpenAI chat completions: appended to the first ``system``/``developer`` message (string
      or content parts), or inserted as a first ``system`` message;
    - Responses API: appended to ``instructions``, or set as ``instructions``;
    - completions: prepended to the ``prompt`` (each prompt, when a list of strings).

    A body that is not a JSON object of one of these shapes is returned unchanged.
    """
    doc = _json_object(request_body)
    if doc is None:
        return request_body
    if provider is Provider.ANTHROPIC and isinstance(doc.get("messages"), list):
        system = doc.get("system")
        if isinstance(system, str) and system:
            doc["system"] = f"{system}\n\n{payload}"
        elif isinstance(system, list):
            doc["system"] = [*system, {"type": "text", "text": payload}]
        else:
            doc["system"] = payload
    elif isinstance(doc.get("messages"), list):
        _inject_chat(doc["messages"], payload)
    elif "input" in doc or "instructions" in doc:
        instructions = doc.get("instructions")
        doc["instructions"] = f"{instructions}\n\n{payload}" if instructions else payload
    elif isinstance(doc.get("prompt"), str):
        doc["prompt"] = f"{payload}\n\n{doc['prompt']}"
    elif isinstance(doc.get("prompt"), list) and all(isinstance(p, str) for p in doc["prompt"]):
        doc["prompt"] = [f"{payload}\n\n{p}" for p in doc["prompt"]]
    else:
        return request_body
    return _dump(doc)


def _inject_chat(messages: list[Any], payload: str) -> None:
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            content = message.get("content")
            if isinstance(content, list):
                message["content"] = [*content, {"type": "text", "text": payload}]
            elif isinstance(content, str) and content:
                message["content"] = f"{content}\n\n{payload}"
            else:
                message["content"] = payload
            return
    messages.insert(0, {"role": "system", "content": payload})
