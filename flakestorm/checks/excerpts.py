"""One safe line of untrusted text (an agent's output, a judge's reason) quoted in a verdict's
reason, inside inline code: :func:`excerpt`.

:func:`invisible` is the one test of a character that must not reach a line as it is (a
control or format character: it breaks the line, moves the cursor or reorders what a reader
sees); the excerpt shows each such character escaped, and a terminal or CI log line
(:func:`flakestorm.reporters.escape.log_line`) blanks it."""

from __future__ import annotations

import unicodedata

from flakestorm.redaction import active

EXCERPT_CHARS = 80
"""How much of the agent's output a reason quotes, at most."""

_INVISIBLE = frozenset(("Cc", "Cf", "Zl", "Zp"))
"""Control characters, format characters (bidirectional overrides, zero-width characters) and
the line and paragraph separators."""


def invisible(char: str) -> bool:
    """Whether ``char`` is a control or format character or a line or paragraph separator."""
    return unicodedata.category(char) in _INVISIBLE


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` as one safe line of at most ``limit`` characters (plus an ellipsis).

    Newlines, tabs and the other :func:`invisible` characters (bidi overrides, zero-width
    characters) are escaped as ``\\n`` / ``\\u202e``; backticks become ``'`` so the excerpt can
    sit inside inline code. Secrets are redacted before the cut
    (:func:`flakestorm.redaction.active`), so no part of one is quoted.
    """
    text = active()(text)
    out: list[str] = []
    size = 0
    for char in text:
        if char == "`":
            piece = "'"
        elif char in "\n\r\t":
            piece = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char]
        elif invisible(char):
            piece = f"\\u{ord(char):04x}"
        else:
            piece = char
        if size + len(piece) > limit:
            out.append("…")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)
