"""Cells streamed to disk as they finish, so a run's memory stays flat in its size (SPEC §9).

A phase appends each finished cell to a :class:`CellSpool` — one JSON line per cell, in an
anonymous file in the report directory (it disappears when the run's result is gone, and is
never left behind) — and its :class:`~flakestorm.results.PhaseOutcome` holds the spool's
:class:`SpooledCells`: a read-only sequence of the cells in index order that reads each cell back
from disk when it is used. Every reporter, the scores and ``results.json`` take it like a tuple,
so nothing downstream changes; only what is in use is in memory.

Cells are redacted as they are written (the run's secrets never reach the file), so the result's
final redaction leaves spooled cells as they are.
"""

from __future__ import annotations

import json
import tempfile
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, overload

from flakestorm.redaction import Redactor
from flakestorm.results import CellResult, cell_document, cell_from_document


class CellSpool:
    """Where a phase's finished cells go (thread-safe); :attr:`cells` reads them back."""

    def __init__(self, directory: Path | None = None, redactor: Redactor | None = None) -> None:
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        # closed when the cells are collected (below), not at the end of a block
        self._file: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115
            dir=directory, prefix=".flakestorm-cells-"
        )
        self._redactor = redactor if redactor else None
        self._lock = threading.Lock()
        self._where: dict[int, tuple[int, int]] = {}  # cell index -> (offset, length)
        self._end = 0
        self.cells = SpooledCells(self)
        weakref.finalize(self.cells, self._file.close)

    def add(self, cell: CellResult) -> None:
        """Write ``cell`` (a cell written again under the same index replaces it)."""
        document = cell_document(cell)
        if self._redactor is not None:
            document = _scrub(document, self._redactor)
        line = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
        with self._lock:
            self._file.seek(self._end)
            self._file.write(line)
            self._where[cell.index] = (self._end, len(line))
            self._end += len(line)

    def extend(self, cells: Sequence[CellResult]) -> None:
        for cell in cells:
            self.add(cell)

    def _indexes(self) -> list[int]:
        with self._lock:
            return sorted(self._where)

    def _read(self, index: int) -> CellResult:
        with self._lock:
            offset, length = self._where[index]
            self._file.seek(offset)
            line = self._file.read(length)
        return cell_from_document(json.loads(line.decode("utf-8", "surrogatepass")))


class SpooledCells(Sequence[CellResult]):
    """A spool's cells in index order, read from disk one at a time as they are used."""

    def __init__(self, spool: CellSpool) -> None:
        self._spool = spool

    def __len__(self) -> int:
        return len(self._spool._indexes())

    @overload
    def __getitem__(self, position: int) -> CellResult: ...

    @overload
    def __getitem__(self, position: slice) -> tuple[CellResult, ...]: ...

    def __getitem__(self, position: int | slice) -> CellResult | tuple[CellResult, ...]:
        indexes = self._spool._indexes()
        if isinstance(position, slice):
            return tuple(self._spool._read(i) for i in indexes[position])
        return self._spool._read(indexes[position])

    def __iter__(self) -> Iterator[CellResult]:
        for index in self._spool._indexes():
            yield self._spool._read(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=False))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpooledCells({len(self)} cells)"


def _scrub(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        return {k: _scrub(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redactor) for v in value]
    return value
