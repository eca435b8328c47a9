"""Results streamed to disk as they finish, so a run's memory stays flat in its size (SPEC §9).

A phase appends each finished item — a contract cell, a mutation, a replayed session — to a
:class:`Spool`: one JSON line per item, in an anonymous file in the report directory (it
disappears when the run's result is gone, and is never left behind). Its
:class:`~flakestorm.results.model.PhaseOutcome` holds the spool's :class:`Spooled` items: a
read-only
sequence in index order that reads each item back from disk when it is used (one at a time,
or, iterated, in blocks: the file is then read front to back, each run of lines written in
index order — a merged shard's, say — side by side). Every reporter,
the scores and ``results.json`` take it like a tuple, so nothing downstream changes; only what
is in use is in memory.

What a spool holds is named by its :class:`Codec` (:data:`CELLS`, :data:`MUTATIONS`): how an
item is written and read back, as it is in ``results.json``. Items are redacted as they are
written (the run's secrets never reach the file), so the result's final redaction leaves
spooled items as they are.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Generic, Protocol, TypeVar, cast, overload

from flakestorm.redaction import Redactor, redact_data
from flakestorm.results.model import (
    CellResult,
    MutationResult,
    cell_document,
    cell_from_document,
    mutation_document,
    mutation_from_document,
)
from flakestorm.results.tally import Tally


class Indexed(Protocol):
    """An item with its stable index in its phase (the order it is read back in)."""

    @property
    def index(self) -> int: ...


T = TypeVar("T", bound=Indexed)


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How a spool writes its items and reads them back."""

    name: str
    """What the items are (``cells``, ``mutations``): the spool file's name says it."""
    encode: Callable[[T], dict[str, Any]]
    decode: Callable[[Mapping[str, Any]], T]


CELLS: Codec[CellResult] = Codec("cells", cell_document, cell_from_document)
MUTATIONS: Codec[MutationResult] = Codec("mutations", mutation_document, mutation_from_document)


_BUFFER = 1 << 20
"""Bytes of lines a spool gathers before it writes them to its file: a write lets the other
threads take the GIL, and an item is written under the executor's lock (its sink), where the
other workers wait; a write per item (or per few) made the mutation phase far slower."""

_BLOCK = 1 << 18
"""Bytes a spool reads at a time when it reads its items in order (:meth:`Spool._lines`)."""

_MAX_RUNS = 16
"""The most runs of lines in index order a spool reads in blocks, side by side; a file with
more (a run's items finished out of order) is read a line at a time."""


_DECODER = json.JSONDecoder()


def _parse(line: bytes) -> dict[str, Any]:
    """The document of a spool's line (one JSON object, as the spool wrote it: nothing before
    or after it to skip)."""
    document: dict[str, Any] = _DECODER.raw_decode(line.decode("utf-8", "surrogatepass"))[0]
    return document


class Spool(Generic[T]):
    """Where a phase's finished items go (thread-safe); :attr:`items` reads them back."""

    def __init__(
        self, codec: Codec[T], directory: Path | None = None, redactor: Redactor | None = None
    ) -> None:
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        self._codec = codec
        # closed when the items are collected (below), not at the end of a block
        self._file: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115
            dir=directory, prefix=f".flakestorm-{codec.name}-"
        )
        self._pending = bytearray()  # the last lines, not yet written to the file
        self._written = 0  # where they start
        self._redactor = redactor if redactor else None
        self._lock = threading.Lock()
        self._where: dict[int, tuple[int, int]] = {}  # item index -> (offset, length)
        self._verbatim: set[int] = set()  # the items whose line is their text as read
        self._order: list[int] | None = []  # the indexes sorted; None: to sort again
        self._end = 0
        self._runs: list[int] = []  # where each run of lines in increasing index order starts
        self._last = -1  # the index of the last line
        self.tally = Tally()
        """The items counted as they are written (:mod:`flakestorm.results.tally`)."""
        self.items: Spooled[T] = Spooled(self)
        weakref.finalize(self.items, self._file.close)

    def add(self, item: T, text: str | None = None) -> None:
        """Write ``item`` (an item written again under the same index replaces it); ``text``:
        the item's JSON as a ``results.json`` has it, when it was read from one (written as it
        is, not made again, when nothing is to be redacted)."""
        verbatim = text is not None and self._redactor is None
        if text is not None and verbatim:
            line = text.encode("utf-8", "surrogatepass") + b"\n"
        else:
            document = self._codec.encode(item) if text is None else json.loads(text)
            if self._redactor is not None:
                document = redact_data(document, self._redactor, keys=False)
                item = self._codec.decode(document)  # counted as it is read back
            line = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")
            line += b"\n"
        with self._lock:
            replaced = item.index in self._where
        # what it replaces is counted out before it is counted in (a codec holds these)
        old = cast(CellResult | MutationResult, self._read(item.index)) if replaced else None
        with self._lock:
            if old is not None:
                self.tally.add(old, -1)
            self.tally.add(cast(CellResult | MutationResult, item))
            self._pending += line
            if len(self._pending) >= _BUFFER:
                self._write_pending()
            if item.index not in self._where:
                self._order = None
            if item.index <= self._last or not self._runs:
                self._runs.append(self._end)
            self._last = item.index
            self._where[item.index] = (self._end, len(line))
            if verbatim:
                self._verbatim.add(item.index)
            else:
                self._verbatim.discard(item.index)
            self._end += len(line)

    def __contains__(self, index: object) -> bool:
        """Whether an item with ``index`` was written."""
        with self._lock:
            return index in self._where

    def extend(self, items: Sequence[T]) -> None:
        for item in items:
            self.add(item)

    def _indexes(self) -> list[int]:
        with self._lock:
            if self._order is None:
                self._order = sorted(self._where)
            return self._order

    def _line(self, index: int) -> bytes:
        """The item's line, without its newline."""
        with self._lock:
            offset, length = self._where[index]
            start = offset - self._written
            if start >= 0:
                return bytes(self._pending[start : start + length - 1])
            self._file.seek(offset)
            return self._file.read(length - 1)

    def _write_pending(self) -> None:
        """Write the lines not yet in the file after those that are (under the lock)."""
        self._file.seek(self._written)
        self._file.write(self._pending)
        self._written += len(self._pending)
        self._pending.clear()

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        """Each item's index and line (without its newline), in index order. The lines are
        read in blocks: the file is a few runs of lines in index order (a merge's shards, one
        after another; an item written again, at the end), each read front to back, side by
        side. A file of many runs (a run's items, finished out of order) is read a line at a
        time; so is a line written while the items are read."""
        with self._lock:
            if self._pending:
                self._write_pending()
            self._file.flush()
            read_to, runs = self._written, list(self._runs)
        indexes = self._indexes()
        if len(runs) > _MAX_RUNS:
            for index in indexes:
                yield index, self._line(index)
            return
        where, fd = self._where, self._file.fileno()
        blocks = [(0, b"")] * len(runs)  # each run's block: where it starts, its bytes
        for index in indexes:
            offset, length = where[index]
            if offset + length > read_to:  # written since
                yield index, self._line(index)
                continue
            run = bisect_right(runs, offset) - 1 if len(runs) > 1 else 0
            start, block = blocks[run]
            at = offset - start
            if at < 0 or at + length > len(block):
                block = os.pread(fd, max(_BLOCK, length), offset)
                blocks[run] = (offset, block)
                at = 0
            yield index, block[at : at + length - 1]

    def _document(self, index: int) -> dict[str, Any]:
        return _parse(self._line(index))

    def _read(self, index: int) -> T:
        return self._codec.decode(self._document(index))


U = TypeVar("U")


class Items(Sequence[U]):
    """A sequence of items read as they are used that equals any sequence of the same items
    (a tuple, another spool), as a tuple does; unhashable, as a list is."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=False))

    __hash__ = None  # type: ignore[assignment]

    def _at(self, position: int) -> U:
        """The item at ``position`` (0 ≤ position < len(self))."""
        raise NotImplementedError

    @overload
    def __getitem__(self, position: int) -> U: ...

    @overload
    def __getitem__(self, position: slice) -> tuple[U, ...]: ...

    def __getitem__(self, position: int | slice) -> U | tuple[U, ...]:
        if isinstance(position, slice):
            return tuple(self._at(i) for i in range(*position.indices(len(self))))
        size = len(self)
        if not -size <= position < size:
            raise IndexError(position)
        return self._at(position % size)


class Spooled(Items[T]):
    """A spool's items in index order, read from disk one at a time as they are used."""

    def __init__(self, spool: Spool[T]) -> None:
        self._spool = spool

    def __len__(self) -> int:
        return len(self._spool._indexes())

    def _at(self, position: int) -> T:
        return self._spool._read(self._spool._indexes()[position])

    def __iter__(self) -> Iterator[T]:
        decode = self._spool._codec.decode
        for _, line in self._spool._lines():
            yield decode(_parse(line))

    @property
    def tally(self) -> Tally:
        """The items' counts, kept as they were written (:mod:`flakestorm.results.tally`)."""
        return self._spool.tally

    def at(self, index: int) -> T:
        """The item with ``index`` (not a position), read from disk alone."""
        return self._spool._read(index)

    def written(self) -> Iterator[str | dict[str, Any]]:
        """Each item as :meth:`documents` gives it, or, when it was added with its text as
        read from a ``results.json`` (and nothing redacted), that text: written out again as it
        was, not parsed and made again."""
        verbatim = self._spool._verbatim
        for index, line in self._spool._lines():
            yield line.decode("utf-8", "surrogatepass") if index in verbatim else _parse(line)

    def documents(self) -> Iterator[dict[str, Any]]:
        """The items as they are in ``results.json`` (as written: not read into results)."""
        for _, line in self._spool._lines():
            yield _parse(line)

    def __repr__(self) -> str:
        return f"Spooled({len(self)} {self._spool._codec.name})"


class Mapped(Items[U]):
    """``items`` seen through ``function``, one item at a time as they are used (a spooled
    phase's items made public, say, without holding them all)."""

    def __init__(self, items: Sequence[Any], function: Callable[[Any], U]) -> None:
        self._items = items
        self._function = function

    def __len__(self) -> int:
        return len(self._items)

    def _at(self, position: int) -> U:
        return self._function(self._items[position])

    def __iter__(self) -> Iterator[U]:
        return map(self._function, self._items)


class Remade(Mapped[T]):
    """A spool's items each made anew by ``function`` as they are used (made public, say),
    where ``function`` keeps all that the spool's tally counts (statuses, ids, types, weights):
    the tally and :meth:`at` serve them as the spool's serve its items."""

    def __init__(self, items: Spooled[T], function: Callable[[T], T]) -> None:
        super().__init__(items, function)
        self._spooled = items

    @property
    def tally(self) -> Tally:
        return self._spooled.tally

    def at(self, index: int) -> T:
        return self._function(self._spooled.at(index))


class Joined(Items[U]):
    """``parts`` one after another, as one sequence (each part's items read as they are
    used)."""

    def __init__(self, parts: Sequence[Sequence[U]]) -> None:
        self._parts = parts

    def __len__(self) -> int:
        return sum(len(part) for part in self._parts)

    def _at(self, position: int) -> U:
        for part in self._parts:
            if position < len(part):
                return part[position]
            position -= len(part)
        raise IndexError(position)

    def __iter__(self) -> Iterator[U]:
        for part in self._parts:
            yield from part
