"""A ``results.json`` read as a stream, its cells and mutations one at a time (SPEC §9).

``flakestorm merge``, ``flakestorm compare``, ``flakestorm report`` and the action's baseline
read files as large as the runs that wrote them. :func:`read_document` walks the document with
an incremental reader (:class:`_Reader`: :meth:`json.JSONDecoder.raw_decode` over chunks of the
file), hands each item of a phase's ``cells`` and ``mutations`` to a callback as it is read,
and returns the rest, small, with those lists left empty. :func:`read_streamed` gives the run's
:class:`~flakestorm.results.model.RunResult` with each phase's items in a
:class:`~flakestorm.results.spool.Spool`, read back from disk as they are used — as a run's are —
so the
memory a reader takes does not grow with the file. Each item is checked as it is read
(:func:`item_of`, located ``phases.contract.cells[3].status: …``), as
:func:`~flakestorm.results.model.from_document` checks a document read whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from flakestorm.results.field_types import mistyped
from flakestorm.results.model import (
    STREAMED,
    CellResult,
    MutationResult,
    ResultsError,
    RunResult,
    cell_from_document,
    from_document,
    mutation_from_document,
    with_streamed,
)
from flakestorm.results.spool import CELLS, MUTATIONS, Codec, Spool

__all__ = ["NotJson", "item_of", "read_document", "read_streamed"]

_CHUNK = 1 << 16
_SPACE = re.compile(r"[ \t\n\r]*")
_TAIL = re.compile(r"[0-9.eE+\-]*")
"""What may follow the part of a number read so far."""

Item = CellResult | MutationResult
OnItem = Callable[[str, str, int, Any, str], None]
"""``(phase, key, position, document, text)``: an item of ``phases.PHASE.KEY``, as it is
read (``text``: its JSON)."""


def _number(value: Any) -> bool:
    return type(value) in (int, float)


class NotJson(ValueError):
    """The text is not JSON (where, what)."""


class _Reader:
    """JSON values read from a text file a chunk at a time: only the value being read (and the
    rest of its chunk) is in memory."""

    def __init__(self, file: TextIO) -> None:
        self._file = file
        self._text = ""
        self._pos = 0
        self._dropped = 0  # characters of the file before self._text
        self._eof = False
        self._decoder = json.JSONDecoder()

    def _more(self, size: int) -> bool:
        if self._eof:
            return False
        data = self._file.read(size)
        if not data:
            self._eof = True
            return False
        self._dropped += self._pos
        self._text = self._text[self._pos :] + data
        self._pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            self._pos = _SPACE.match(self._text, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._more(_CHUNK):
                return ""

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"expecting {char!r}")
        self._pos += 1

    def value(self) -> Any:
        """The next whole value."""
        return self.value_text()[0]

    def value_text(self) -> tuple[Any, str]:
        """The next whole value, and its text."""
        self.peek()
        size = _CHUNK
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if self._more(size):  # a value longer than what is read so far
                    size *= 2
                    continue
                raise self.error(exc.msg, exc.pos) from None
            if _number(value) and self._cut(end) and self._more(size):
                continue  # a number cut by the chunk (``60.`` of ``60.5``) goes on
            start, self._pos = self._pos, end
            return value, self._text[start:end]

    def _cut(self, end: int) -> bool:
        """Whether a number ending at ``end`` may go on past the text read so far."""
        tail = _TAIL.match(self._text, end)
        return tail is not None and tail.end() == len(self._text)

    def members(self) -> Iterator[str]:
        """The keys of the object whose ``{`` was taken; the caller reads each value."""
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise self.error("expecting a property name")
            self.take(":")
            yield key
            if self._closed("}"):
                return

    def elements(self) -> Iterator[int]:
        """The positions of the array whose ``[`` was taken; the caller reads each value."""
        if self.peek() == "]":
            self._pos += 1
            return
        position = 0
        while True:
            yield position
            position += 1
            if self._closed("]"):
                return

    def _closed(self, close: str) -> bool:
        """Past the ``,`` after an item (False) or the ``close`` after the last (True)."""
        char = self.peek()
        if char not in (",", close):
            raise self.error(f"expecting ',' or {close!r}")
        self._pos += 1
        return char == close

    def end(self) -> None:
        if self.peek():
            raise self.error("extra data after the document")

    def error(self, message: str, at: int | None = None) -> NotJson:
        where = self._dropped + (self._pos if at is None else at)
        return NotJson(f"{message}: character {where}")


def read_document(file: TextIO, on_item: OnItem) -> Any:
    """The JSON document in ``file``, each item of ``phases.*.cells`` and ``phases.*.mutations``
    handed to ``on_item`` as it is read and left out (those lists are empty in what is
    returned). Raises :class:`NotJson`; a UnicodeDecodeError or RecursionError as json would."""
    reader = _Reader(file)
    if reader.peek() != "{":
        document = reader.value()
        reader.end()
        return document
    reader.take("{")
    document = {}
    for key in reader.members():
        if key == "phases" and reader.peek() == "{":
            document[key] = _phases(reader, on_item)
        else:
            document[key] = reader.value()
    reader.end()
    return document


def _phases(reader: _Reader, on_item: OnItem) -> dict[str, Any]:
    reader.take("{")
    phases: dict[str, Any] = {}
    for name in reader.members():
        if reader.peek() != "{":
            phases[name] = reader.value()
            continue
        reader.take("{")
        phase: dict[str, Any] = {}
        for key in reader.members():
            if key in STREAMED and reader.peek() == "[":
                reader.take("[")
                for position in reader.elements():
                    on_item(name, key, position, *reader.value_text())
                phase[key] = []
            else:
                phase[key] = reader.value()
        phases[name] = phase
    return phases


_DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Item]] = {
    "cells": cell_from_document,
    "mutations": mutation_from_document,
}
CODECS: Mapping[str, Codec[Any]] = {"cells": CELLS, "mutations": MUTATIONS}
"""The spool codec of each streamed field."""


def item_of(phase: str, key: str, position: int, document: Any) -> Item:
    """The cell or mutation ``document`` of ``phases.PHASE.KEY[POSITION]``, checked field by
    field; raises :class:`ResultsError` naming where it is malformed."""
    where = f"phases.{phase}.{key}[{position}]"
    if not isinstance(document, dict):
        raise ResultsError(f"results document is malformed: {where}: not an object")
    try:
        item = _DECODERS[key](document)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"results document is malformed: {where}: {exc!r}") from None
    problem = mistyped(item)
    if problem is not None:
        raise ResultsError(f"results document is malformed: {where}.{problem}")
    return item


def read_streamed(file: TextIO, directory: Path | None = None) -> RunResult:
    """The run result in ``file``, each phase's cells and mutations in a spool in
    ``directory`` (the system's temporary directory when None). Raises :class:`NotJson`,
    :class:`ResultsError` (a document that is not a results document, or malformed)."""
    spools: dict[tuple[str, str], Spool[Any]] = {}

    def on_item(phase: str, key: str, position: int, document: Any, text: str) -> None:
        item = item_of(phase, key, position, document)
        spool = spools.get((phase, key))
        if spool is None:
            spool = spools[phase, key] = Spool(CODECS[key], directory)
        spool.add(item, text)

    document = read_document(file, on_item)
    if not isinstance(document, dict):
        raise ResultsError("not a results document (expected a JSON object)")
    result = from_document(document)
    phases = {
        name: with_streamed(outcome, {key: s.items for (p, key), s in spools.items() if p == name})
        for name, outcome in result.phases.items()
    }
    return replace(result, phases=phases)
