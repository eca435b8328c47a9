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
- :meth:`Redactor.pieces` — a text that comes in pieces (a streamed reply's timeline: each
  event's excerpt) redacted as one: a secret split between events is found in their joined
  text, and where a piece ends, the text before that is a secret's start (or the text after
  it a secret's end) is masked, for the piece may have been cut or the events after it left
  out. :func:`redact_data` redacts a stream's timeline so.
- :func:`redacting` / :func:`active` — the run's redactor for code that cuts texts while the run
  is going (invariant reasons quoting the reply, error messages quoting a body): the runner
  installs it with ``redacting``; those excerpt functions call ``active()(text)`` first. Worker
  threads the executor starts inherit it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "***"
MIN_SECRET_CHARS = 4
MIN_PIECE_CHARS = 3
"""The fewest characters at a piece's end taken for part of a secret cut there."""
TIMELINE_EVENT = frozenset({"at_ms", "kind", "text"})
"""The keys of a stream timeline's event in a results document (``results.stream_timing``)."""


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

    def pieces(self, pieces: Sequence[str]) -> list[str]:
        """``pieces``, adjacent parts of one text in order, each with what is a secret
        replaced by ``***``: every secret in their joined text (one split between pieces
        included: the ``***`` stands where it starts); where a piece starts or ends, the text
        before that is a secret's start, or the text after it a secret's end, of at least
        :data:`MIN_PIECE_CHARS` characters (however many pieces it runs over); and a piece
        wholly inside a secret."""
        if not self._forms:
            return list(pieces)
        joined = "".join(pieces)
        spans: list[tuple[int, int]] = []
        for form in self._forms:
            at = joined.find(form)
            while at >= 0:
                spans.append((at, at + len(form)))
                at = joined.find(form, at + 1)
        offset = 0
        for piece in pieces:
            if any(MIN_PIECE_CHARS <= len(piece) < len(f) and piece in f for f in self._forms):
                spans.append((offset, offset + len(piece)))  # wholly inside a secret
            spans += _secret_ends(joined, offset, self._forms)
            offset += len(piece)
        spans += _secret_ends(joined, offset, self._forms)
        return splice(pieces, [(a, b, REDACTED) for a, b in _merged(spans)])


def _secret_ends(joined: str, at: int, forms: Sequence[str]) -> Iterator[tuple[int, int]]:
    """Where ``joined`` may hold a secret cut at ``at`` (a piece's start or end: an excerpt cut
    there, or the events after it left out): the longest start of a form that ends there, and
    the longest end of a form that starts there, of at least :data:`MIN_PIECE_CHARS`
    characters — however many pieces they run over."""
    for form in forms:
        first, last = form[0], form[-1]
        # the longest first: the earliest start before ``at`` (the latest end after it) where
        # the form's first (last) character stands and the text from there is the form's own
        for start in range(max(0, at - len(form) + 1), at - MIN_PIECE_CHARS + 1):
            if joined[start] == first and form.startswith(joined[start:at]):
                yield start, at
                break
        for end in range(min(len(joined), at + len(form) - 1), at + MIN_PIECE_CHARS - 1, -1):
            if joined[end - 1] == last and form.endswith(joined[at:end]):
                yield at, end
                break


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` in order, those that overlap made one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def splice(pieces: Sequence[str], spans: Sequence[tuple[int, int, str]]) -> list[str]:
    """``pieces`` (adjacent parts of one text) with each span of their joined text —
    ``(start, end, replacement)``, in order and apart — replaced: the replacement in the piece
    where the span starts, what it covers of later pieces left out."""
    out: list[str] = []
    offset = 0
    for piece in pieces:
        end = offset + len(piece)
        parts: list[str] = []
        at = offset
        for start, stop, replacement in spans:
            if stop <= offset or start >= end or stop <= at:
                continue
            parts.append(piece[max(at, offset) - offset : max(start, at) - offset])
            if start >= offset:
                parts.append(replacement)
            at = min(stop, end)
        parts.append(piece[at - offset :])
        out.append("".join(parts))
        offset = end
    return out


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
    mappings' keys too unless ``keys`` is False (documents whose keys are field names). A
    stream's timeline (a list of events, :data:`TIMELINE_EVENT`) is redacted as the pieces of
    one text (:meth:`Redactor.pieces`)."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        return {
            (redactor(k) if keys else k): redact_data(v, redactor, keys) for k, v in value.items()
        }
    if isinstance(value, list):
        items = [redact_data(v, redactor, keys) for v in value]
        if (
            value
            and redactor
            and all(isinstance(v, dict) and v.keys() == TIMELINE_EVENT for v in value)
        ):
            texts = redactor.pieces([str(v["text"]) for v in value])
            items = [{**item, "text": text} for item, text in zip(items, texts, strict=True)]
        return items
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
