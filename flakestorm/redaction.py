"""Keeping secrets out of everything flakestorm writes: the one rule for every message, log
line and report.

A secret is a value the config took from the environment (``${VAR}``), or an agent header
value. Each is replaced by ``***`` wherever it appears, as it is and as ``repr`` escapes it
(a secret with a newline or a quote, quoted in an error message). Values shorter than
:data:`MIN_SECRET_CHARS` (a port, a flag) are left alone: masking ``80`` everywhere would
garble every report and hide nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "***"
MIN_SECRET_CHARS = 4


class Redactor:
    """``redactor(text)``: ``text`` with every secret replaced by ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        forms = {form for s in found for form in (s, repr(s)[1:-1])}
        # longest first, so a secret that contains another is replaced whole
        self._forms = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    return Redactor(secrets)(text)
