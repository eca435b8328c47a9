"""Keeping secrets out of everything flakestorm writes: the one rule for every message, log
line and report.

A secret is a value the config took from the environment (``${VAR}``), or an agent header
value. Each is replaced by ``***`` wherever it appears, as it is and as ``repr`` escapes it
(a secret with a newline or a quote, quoted in an error message), and as JSON and URLs encode
it (an agent that sends its key on to a tool: the recorded bodies ``results.json`` keeps, which
``replay export`` decodes into session files). Values shorter than
:data:`MIN_SECRET_CHARS` (a port, a flag) are left alone: masking ``80`` everywhere would
garble every report and hide nothing.

Redact first, then cut. A secret cut in two (an 80-character excerpt of a reply ending in the
middle of it) can no longer be found, so every text is redacted *whole* before any excerpt of it
is taken. The entry points:

- :class:`Redactor` — the one redaction function: ``Redactor(secrets)(text)``. Results are
  redacted with it before any report renders them (``results.redact``), and the action's log
  lines (progress, errors) go through it too.
- :func:`redacting` / :func:`active` — the run's redactor for code that cuts texts while the run
  is going (invariant reasons quoting the reply, error messages quoting a body): the runner
  installs it with ``redacting``; those excerpt functions call ``active()(text)`` first. Worker
  threads the executor starts inherit it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "***"
MIN_SECRET_CHARS = 4


class Redactor:
    """``redactor(text)``: ``text`` with every secret replaced by ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        forms = {form for s in found for form in _forms(s)}
        # longest first, so a secret that contains another is replaced whole
        self._forms = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text


def _forms(secret: str) -> tuple[str, ...]:
    """``secret`` as written, as ``repr`` escapes it, in a JSON string (ASCII-escaped or not)
    and percent-encoded in a URL."""
    return (
        secret,
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
    )


def redact_data(value: Any, redactor: Redactor, keys: bool = True) -> Any:
    """``value`` (JSON data) with every secret in its strings replaced by ``***``: in its
    mappings' keys too unless ``keys`` is False (documents whose keys are field names)."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        return {
            (redactor(k) if keys else k): redact_data(v, redactor, keys) for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_data(v, redactor, keys) for v in value]
    return value


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    return Redactor(secrets)(text)


NO_SECRETS = Redactor(())

_ACTIVE: contextvars.ContextVar[Redactor] = contextvars.ContextVar(
    "flakestorm_redactor", default=NO_SECRETS
)


@contextlib.contextmanager
def redacting(redactor: Redactor) -> Iterator[Redactor]:
    """Make ``redactor`` the one :func:`active` in this context (a run) while inside."""
    token = _ACTIVE.set(redactor)
    try:
        yield redactor
    finally:
        _ACTIVE.reset(token)


def active() -> Redactor:
    """The redactor of the run in progress (one that changes nothing outside a run): call it
    on a whole text before cutting an excerpt of it."""
    return _ACTIVE.get()


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` shown as ``***@``."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def masked_url(url: str) -> str:
    """``url`` as it may be shown: any ``user:password@`` as ``***@`` and its query string (and
    fragment) as ``***`` — an API key is often passed there (``?api-key=…``)."""
    shown = without_userinfo(url)
    cut = min((i for i in (shown.find("?"), shown.find("#")) if i >= 0), default=-1)
    return shown if cut < 0 else shown[: cut + 1] + REDACTED
