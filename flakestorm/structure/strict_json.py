"""JSON read strictly where a document is evidence (a judge's verdict, a committed baseline): an
object that gives a key twice is refused, as which of its values counts would be a guess
(``json`` keeps the last one silently). Pass :func:`unique_keys` as ``object_pairs_hook``."""

from __future__ import annotations

from typing import Any


class RepeatedKey(ValueError):
    """An object gave ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of ``pairs``; :class:`RepeatedKey` when a key is given twice."""
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise RepeatedKey(key)
        document[key] = value
    return document
