"""What a call's record keeps for the invariants on what the agent did (SPEC §15), read the
same way by the proxy and the python wrappers: a digest of what was sent (two calls that sent
the same method, path and body have the same), the ``Idempotency-Key`` it carried, and the
wait a 429 or 503 asked for (``Retry-After``)."""

from __future__ import annotations

import email.utils
import hashlib
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

IDEMPOTENCY_HEADER = "idempotency-key"
"""The header that makes a re-sent request safe (IETF's ``Idempotency-Key``), any case."""

RETRY_STATUSES = frozenset({429, 503})
"""The statuses whose ``Retry-After`` asks the agent to wait before its next call."""


def fingerprint(method: str, path: str, body: bytes | str | None) -> str:
    """A short digest of ``method``, ``path`` (with its query) and the whole ``body``."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(method.upper().encode())
    digest.update(b"\0")
    digest.update(path.encode("utf-8", "surrogateescape"))
    digest.update(b"\0")
    if body:
        digest.update(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def idempotency_key(headers: Iterable[tuple[str, str]]) -> str | None:
    """The ``Idempotency-Key`` among ``headers`` (name, value), None without one."""
    return next((v for k, v in headers if k.lower() == IDEMPOTENCY_HEADER), None)


def retry_after_s(
    status: int | None, headers: Iterable[tuple[str, str]], now: float | None = None
) -> float | None:
    """The wait in seconds a ``status`` 429 or 503 asked for with its ``Retry-After`` header
    (delay-seconds, or an HTTP date, counted from ``now``, epoch seconds); None for another
    status, without the header, or with a value that is neither."""
    if status not in RETRY_STATUSES:
        return None
    value = next((v for k, v in headers if k.lower() == "retry-after"), None)
    if value is None:
        return None
    return parse_retry_after(value, time.time() if now is None else now)


def parse_retry_after(value: str, now: float) -> float | None:
    """``Retry-After``'s value in seconds: delay-seconds (a float is read too), or an HTTP
    date less ``now``; None when it is neither (never negative)."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - now
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def python_idempotency_key(kwargs: Mapping[str, Any]) -> str | None:
    """The idempotency key a python call carried: a keyword argument named for it
    (``idempotency_key``, any case, ``-`` or ``_``), or an ``Idempotency-Key`` among an SDK
    call's ``extra_headers``; None without one."""
    for name, value in kwargs.items():
        if name.lower().replace("-", "_") == "idempotency_key" and value is not None:
            return str(value)
    extra = kwargs.get("extra_headers")
    if isinstance(extra, Mapping):
        found = idempotency_key((str(k), str(v)) for k, v in extra.items())
        if found is not None:
            return found
    return None


def python_retry_after_s(error: BaseException) -> float | None:
    """The wait an error raised into a python agent asked for: flakestorm's own
    ``RateLimitFaultError`` (``retry_after_s``), or an SDK status error (429/503) whose
    response carries ``Retry-After``; None otherwise."""
    own = getattr(error, "retry_after_s", None)
    if isinstance(own, int | float) and not isinstance(own, bool):
        return float(own)
    status = getattr(error, "status_code", None)
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if not isinstance(status, int) or headers is None or not hasattr(headers, "items"):
        return None
    return retry_after_s(status, [(str(k), str(v)) for k, v in headers.items()])
