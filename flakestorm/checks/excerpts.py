"""One safe line of untrusted text (an agent's output, a judge's reason) for a verdict's
reason, a log line or a markdown cell."""

from __future__ import annotations

import unicodedata

from flakestorm.redaction import active

EXCERPT_CHARS = 80
"""How much of the agent's output a reason quotes, at most."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` as one safe line of at most ``limit`` characters (plus an ellipsis).

        Newlines, tabs and other control or format characters (bidi overrides, zero-width
        characters) are escaped as ``\\n`` / ``\\u202e``; backticks become ``'`` so the excerpt can
        sit inside inline code.
    Secrets are redacted before the cut
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
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            piece = f"\\u{ord(char):04x}"
        else:
            piece = char
        if size + len(piece) > limit:
            out.append("…")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)
