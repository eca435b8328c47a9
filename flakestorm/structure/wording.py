"""How config messages name values, kinds of values and likely misspellings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),  # before int: a boolean is an int to Python
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)
"""Python's types of a parsed document, in the order to test them, with their JSON type."""

_KINDS = {
    "null": "nothing (null)",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "a mapping",
}
"""Each JSON type in YAML's words."""


def json_type(value: Any) -> str | None:
    """The JSON type of a parsed value (``null``, ``boolean``, ...), None for anything else."""
    return next((name for kind, name in JSON_TYPES if isinstance(value, kind)), None)


def kind(value: Any) -> str:
    """What sort of value ``value`` is, in YAML's words (``a mapping``, ``nothing (null)``)."""
    if value == "":
        return "an empty string"
    if isinstance(value, bytes):
        return "binary data"
    name = json_type(value)
    return _KINDS[name] if name is not None else f"a {type(value).__name__}"


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
