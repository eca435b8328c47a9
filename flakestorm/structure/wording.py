"""How config messages name values, kinds of values and likely misspellings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def kind(value: Any) -> str:
    """What sort of value ``value`` is, in YAML's words (``a mapping``, ``nothing (null)``)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if value == "" else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, bytes):
        return "binary data"
    return f"a {type(value).__name__}"


def show(value: Any) -> str:
    """A scalar as it would be written (long strings cut), a collection by its kind."""
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return kind(value)


def describe(value: Any) -> str:
    """The kind of ``value`` followed by the value itself where it says more."""
    if isinstance(value, (str, list, dict)) or value is None:
        return kind(value) + (f" {show(value)}" if isinstance(value, str) and value else "")
    return f"{kind(value)} {show(value)}"


def did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    """The choice ``word`` is most likely a misspelling of, if any."""
    import difflib  # loaded only for a word to correct

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not found:
        lowered = {c.lower(): c for c in choices}
        if word.lower() in lowered:
            return lowered[word.lower()]
    return found[0] if found else None


_GUESS = object()


def unknown_key_message(key: str, valid: Sequence[str], guess: Any = _GUESS) -> str:
    """``unknown key 'x' (did you mean 'y'?; valid keys: ...)``; ``guess`` if already made."""
    if guess is _GUESS:
        guess = did_you_mean(str(key), valid)
    hint = f"did you mean {guess!r}?; " if guess else ""
    return f"unknown key {key!r} ({hint}valid keys: {', '.join(valid)})"


MIGRATE = "; `flakestorm migrate` rewrites it"
"""Ends a message about a key or value written for flakestorm 1.x / 2.0.0: the command that
rewrites the file (SPEC §2)."""
