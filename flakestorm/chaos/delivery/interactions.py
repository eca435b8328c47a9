"""Interactions: every call the agent made to a tool or LLM, as flakestorm saw it.

The proxy and the python wrappers append one :class:`Interaction` per call to an
:class:`InteractionLog`; the runner reads them back per scenario to attach to each cell the
faults that actually fired, and to prove (or disprove) that every declared fault was
delivered (SPEC §4).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import threading
import weakref
from array import array
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import IO, Any

from flakestorm.chaos.faults.decisions import Target
from flakestorm.results.usage import Usage

BODY_CHARS = 16_384
"""The most of one request or response body an interaction keeps (the rest is cut, with a
note of how much)."""
RUN_BODY_CHARS = 8 * 1024 * 1024
"""The most body text the interaction log holds at once; a call logged past it keeps none
(:attr:`InteractionLog.bodies_dropped` counts them). A scenario's bodies are given back when
its interactions are forgotten (:meth:`InteractionLog.forget`: its cells carry them), so a long
run's later calls keep theirs. The log keeps its bodies on disk (its spool), so this bounds its
file, not its memory."""


_CUT = re.compile(r"…\[\d+ more characters\]\Z")


def value_text(value: Any) -> str | None:
    """A python value (a call's arguments, a tool's result) as bounded JSON text (objects
    JSON cannot hold are written with their ``repr``, less the memory address a default
    ``repr`` carries: ``<openai.Omit object>``, the same in every run)."""
    return body_text(value_json(value))


def value_json(value: Any) -> str:
    """A python value as whole JSON text, as :func:`value_text` writes it before the cut."""
    try:
        return json.dumps(value, default=_stable_repr, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return _stable_repr(value)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _stable_repr(value: Any) -> str:
    return _ADDRESS.sub("", repr(value))


def body_text(data: bytes | str | None) -> str | None:
    """``data`` as text of at most :data:`BODY_CHARS` characters (None stays None)."""
    if data is None:
        return None
    text = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
    if len(text) <= BODY_CHARS:
        return text
    return text[:BODY_CHARS] + f"…[{len(text) - BODY_CHARS} more characters]"


def was_cut(text: str) -> bool:
    """Whether ``text`` is a body :func:`body_text` cut."""
    return len(text) > BODY_CHARS and _CUT.search(text, BODY_CHARS) is not None


@dataclass(frozen=True)
class Interaction:
    seq: int
    """Order of arrival in the log (0-based)."""
    scenario: str
    cell_id: str
    """The cell the call was attributed to ("" when it could not be)."""
    target: Target
    tool: str | None
    method: str
    url: str
    call_index: int
    matched: tuple[str, ...]
    """Every declared fault that matched this call, fired or not, and could act on it."""
    fired: tuple[str, ...]
    """The faults injected into this call."""
    status: int | None
    """The status the agent received; None when the connection was dropped or (python) an
    exception was raised into the agent."""
    upstream_status: int | None = None
    upstream_error: str | None = None
    """Why the real upstream failed (unreachable, timed out): not an injected fault."""
    latency_ms: float = 0.0
    request: str | None = None
    """What the agent sent (the body, else the path and query; a python call's arguments as
    JSON), at most :data:`BODY_CHARS` characters: the arguments a replay compares."""
    response: str | None = None
    """What the agent got (a body, whole or streamed; a python call's return value as JSON),
    at most :data:`BODY_CHARS` characters: what ``replay export`` serves again. None for a
    dropped connection, or once the run's :data:`RUN_BODY_CHARS` are spent."""
    unapplied: tuple[tuple[str, str], ...] = ()
    """Faults that fired on this call but could not be applied to it, each with why (a stream
    shape flakestorm cannot edit, a reply without text): not delivered (SPEC §10)."""
    replaced: tuple[tuple[str, str], ...] = ()
    """Context attacks that matched this call while a fault answered in place of the tool or
    the LLM, each with that fault's label: nothing to poison; delivered only if another call
    let them act."""
    unscheduled: tuple[str, ...] = ()
    """Faults that matched this call outside their schedule (``calls``, ``every``,
    ``window_ms``): not a call they act on."""
    attribution: str = ""
    """Where ``cell_id`` came from (:class:`flakestorm.agents.attribution.Source`: the agent
    forwarded
    ``header``, ``baggage`` or ``trace``; ``active``: the cell the runner declared active); ""
    from the python wrappers, which attribute by context variable."""
    started_ms: float = 0.0
    """When the call began, in ms on the recorder's monotonic clock: the calls one proxy or
    one run's wrappers logged are compared by it (``retry_discipline``, SPEC §15)."""
    retry_after_s: float | None = None
    """The wait the agent was asked for (a 429 or 503 carrying ``Retry-After``, or a python
    error with ``retry_after``); None otherwise."""
    idempotency_key: str | None = None
    """The ``Idempotency-Key`` the agent sent (HTTP calls), None without one."""
    fingerprint: str = ""
    """A digest of what the agent sent — method, path and the whole body (a python call's
    arguments) — so two calls that sent the same have the same (``no_duplicate_effects``)."""
    usage: Usage | None = None
    """What an LLM call billed (SPEC §15); None for a tool call, a faulted call (an attempt
    is never billed) and a call that is no generation."""
    detail: str = ""
    """What the call was beyond its URL, for reports: a downstream A2A agent's method and what
    its reply said (``SendMessage -> TASK_STATE_FAILED``); "" for other calls."""

    def to_document(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["usage"] = None if self.usage is None else self.usage.to_document()
        doc["target"] = self.target.value
        doc["matched"] = list(self.matched)
        doc["fired"] = list(self.fired)
        doc["unapplied"] = [list(pair) for pair in self.unapplied]
        doc["replaced"] = [list(pair) for pair in self.replaced]
        doc["unscheduled"] = list(self.unscheduled)
        return doc

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Interaction:
        return cls(
            **{
                **doc,
                "target": Target(doc["target"]),
                "matched": tuple(doc["matched"]),
                "fired": tuple(doc["fired"]),
                "unapplied": tuple(
                    (str(label), str(reason)) for label, reason in doc.get("unapplied", ())
                ),
                "replaced": tuple((str(label), str(by)) for label, by in doc.get("replaced", ())),
                "unscheduled": tuple(str(label) for label in doc.get("unscheduled", ())),
                "usage": None if doc.get("usage") is None else Usage.from_document(doc["usage"]),
            }
        )


def lost_note(dropped: int, bodies_dropped: int) -> str | None:
    """The run's warning when its interaction log could not keep every call whole (None when
    it did): the log is bounded, so a long run does not grow without bound, and says so."""
    parts = []
    if dropped:
        parts.append(
            f"{dropped:,} call(s) were not logged (the log was full): their faults and calls are "
            "missing from their cells, and delivery was judged without them"
        )
    if bodies_dropped:
        parts.append(
            f"{bodies_dropped:,} call(s) were logged without their request and response bodies "
            f"(the log holds at most {RUN_BODY_CHARS // (1024 * 1024)} MiB of body text at "
            "once): "
            "`replay export` cannot serve those responses again"
        )
    if not parts:
        return None
    return "the interaction log is bounded: " + "; ".join(parts)


class InteractionLog:
    """A thread-safe, append-only log of interactions, spooled to disk so its memory stays
    flat in the calls it holds (SPEC §15): each interaction is one JSON line
    (:meth:`Interaction.to_document`) in an anonymous temporary file (readable by this user
    only, gone when the log is), and memory holds only a small index per scenario — where
    each line is, its cell and its bodies' size (about 20 bytes a call). :meth:`snapshot`
    reads a scenario's lines back; :meth:`forget` drops them from the index, and the file is
    rewritten without the forgotten lines once they outweigh the rest.

    Bounded on disk: past ``limit`` interactions held a call is not logged (:attr:`dropped`),
    past :data:`RUN_BODY_CHARS` of body text held a call is logged without its bodies
    (:attr:`bodies_dropped`); :func:`lost_note` words both for the run's warnings. What
    :meth:`forget` drops gives its room back."""

    def __init__(self, limit: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._spool = _Spool()
        self._seq = 0
        self._open = 0
        self._limit = limit
        self.dropped = 0
        self._body_chars = 0
        self.bodies_dropped = 0

    def next_seq(self) -> int:
        with self._lock:
            seq = self._seq
            self._seq += 1
            return seq

    def open(self) -> None:
        """A call began that will be logged with :meth:`close` (the proxy's calls: a reply can
        reach the agent a moment before its interaction is logged)."""
        with self._lock:
            self._open += 1

    def close(self, interaction: Interaction) -> None:
        """Log the interaction of a call begun with :meth:`open`."""
        line = _line(interaction)
        with self._lock:
            self._open = max(0, self._open - 1)
            self._add(interaction, line)
            self._settled.notify_all()

    def append(self, interaction: Interaction) -> None:
        line = _line(interaction)
        with self._lock:
            self._add(interaction, line)

    def _add(self, interaction: Interaction, line: bytes) -> None:
        if self._spool.held >= self._limit:
            self.dropped += 1
            return
        size = _body_size(interaction)
        if size and self._body_chars + size > RUN_BODY_CHARS:
            line = _line(dataclasses.replace(interaction, request=None, response=None))
            self.bodies_dropped += 1
            size = 0
        self._body_chars += size
        self._spool.add(interaction.scenario, interaction.cell_id, size, line)

    def snapshot(self, scenario: str | None = None, wait_s: float = 0.0) -> list[Interaction]:
        """The interactions (of ``scenario``) in call order; first waiting up to ``wait_s`` for
        the calls still open to be logged (a streamed reply's last bytes can reach the agent
        before its interaction is logged)."""
        with self._lock:
            if wait_s > 0:
                self._settled.wait_for(lambda: self._open == 0, timeout=wait_s)
            data = self._spool.read(scenario)
        items = [Interaction.from_document(json.loads(line)) for line in data.splitlines()]
        items.sort(key=lambda i: i.seq)
        return items

    def clear(self) -> None:
        with self._lock:
            self._spool.clear()
            self.dropped = 0
            self._body_chars = 0
            self.bodies_dropped = 0

    def forget(self, scenario: str, keep: Collection[str] = ()) -> int:
        """Drop the interactions of ``scenario`` (except those of the cells in ``keep``) once
        the runner has read them into its results, so a long run's log stays small (and under
        its limit, its bodies' room given back); return how many were dropped."""
        with self._lock:
            dropped, body_chars = self._spool.forget(scenario, set(keep))
            self._body_chars -= body_chars
            return dropped


def _line(interaction: Interaction) -> bytes:
    """An interaction as one line of the spool: its :meth:`Interaction.to_document` as ASCII
    JSON (a lone surrogate a python value carried is escaped, never an encoding error)."""
    return json.dumps(_document(interaction), separators=(",", ":")).encode() + b"\n"


_PLAIN = (str, int, float, type(None))


def _document(interaction: Interaction) -> dict[str, Any]:
    """:meth:`Interaction.to_document` as JSON writes it, made a tenth of the time when every
    field is plain (text, numbers, tuples of text, the target, the usage): every call the
    proxy serves is written, and ``to_document`` copies each value deeply. A field of any
    other kind takes ``to_document`` itself."""
    doc: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(interaction, name)
        if isinstance(value, tuple):
            if not all(
                isinstance(v, str) or (isinstance(v, tuple) and all(isinstance(w, str) for w in v))
                for v in value
            ):
                return interaction.to_document()
        elif isinstance(value, Target):
            value = value.value
        elif isinstance(value, Usage):
            value = value.to_document()
        elif not isinstance(value, _PLAIN):
            return interaction.to_document()
        doc[name] = value
    return doc


_FIELDS = tuple(field.name for field in dataclasses.fields(Interaction))


class _Entries:
    """One scenario's lines in the spool, in the order they were written: their offsets,
    lengths, cells (an index into :attr:`cells`) and body sizes, as compact arrays."""

    def __init__(self) -> None:
        self.offsets = array("q")
        self.lengths = array("i")
        self.cell_of = array("i")
        self.bodies = array("i")
        self.cells: list[str] = []
        self._cell_no: dict[str, int] = {}

    def add(self, offset: int, length: int, cell: str, body_chars: int) -> None:
        number = self._cell_no.get(cell)
        if number is None:
            number = self._cell_no[cell] = len(self.cells)
            self.cells.append(cell)
        self.offsets.append(offset)
        self.lengths.append(length)
        self.cell_of.append(number)
        self.bodies.append(body_chars)

    def __len__(self) -> int:
        return len(self.offsets)


COMPACT_BYTES = 16 * 1024 * 1024
"""Forgotten lines the spool keeps in its file before it considers rewriting it without them
(it does once they also outweigh the lines still held): a long run's file stays about the size
of what its log holds."""


class _Spool:
    """The interaction log's file and its index (not thread-safe: the log's lock guards it)."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._closer: weakref.finalize[..., Any] | None = None
        self._end = 0
        self._dead = 0
        self._scenarios: dict[str, _Entries] = {}
        self.held = 0

    def _opened(self) -> IO[bytes]:
        if self._file is None:
            self._adopt(_temporary())
        assert self._file is not None
        return self._file

    def _adopt(self, file: IO[bytes] | None) -> None:
        """Use ``file`` (None: no file) in place of the current one, which is closed; a file
        in use is closed when the spool is collected."""
        if self._closer is not None:
            self._closer()  # closes the old file, once
        self._file = file
        self._closer = None if file is None else weakref.finalize(self, file.close)

    def add(self, scenario: str, cell: str, body_chars: int, line: bytes) -> None:
        self._opened().write(line)
        entries = self._scenarios.get(scenario)
        if entries is None:
            entries = self._scenarios[scenario] = _Entries()
        entries.add(self._end, len(line), cell, body_chars)
        self._end += len(line)
        self.held += 1

    def read(self, scenario: str | None) -> bytes:
        """The lines of ``scenario`` (of every scenario for None), in the order written per
        scenario; runs of adjacent lines are read at once."""
        if self._file is None:
            return b""
        self._file.flush()
        if scenario is None:
            chosen = list(self._scenarios.values())
        else:
            chosen = [self._scenarios[scenario]] if scenario in self._scenarios else []
        parts: list[bytes] = []
        fd = self._file.fileno()
        for entries in chosen:
            for start, end in _runs(entries):
                parts.append(os.pread(fd, end - start, start))
        return b"".join(parts)

    def forget(self, scenario: str, keep: set[str]) -> tuple[int, int]:
        """Drop ``scenario``'s lines but those of the cells in ``keep``: how many were dropped
        and the body characters they held."""
        entries = self._scenarios.pop(scenario, None)
        if entries is None:
            return 0, 0
        kept = _Entries()
        dropped = body_chars = 0
        for i in range(len(entries)):
            cell = entries.cells[entries.cell_of[i]]
            if cell in keep:
                kept.add(entries.offsets[i], entries.lengths[i], cell, entries.bodies[i])
            else:
                dropped += 1
                body_chars += entries.bodies[i]
                self._dead += entries.lengths[i]
        if len(kept):
            self._scenarios[scenario] = kept
        self.held -= dropped
        if self._dead > COMPACT_BYTES and self._dead > self._end - self._dead:
            self._compact()
        return dropped, body_chars

    def _compact(self) -> None:
        """Rewrite the file with only the lines still held (scenario by scenario)."""
        assert self._file is not None
        self._file.flush()
        fd = self._file.fileno()
        new = _temporary()
        end = 0
        for name, entries in list(self._scenarios.items()):
            moved = _Entries()
            for start, stop in _runs(entries):
                new.write(os.pread(fd, stop - start, start))
            for i in range(len(entries)):
                cell = entries.cells[entries.cell_of[i]]
                moved.add(end, entries.lengths[i], cell, entries.bodies[i])
                end += entries.lengths[i]
            self._scenarios[name] = moved
        self._adopt(new)
        self._end, self._dead = end, 0

    def clear(self) -> None:
        self._adopt(None)
        self._end, self._dead, self.held = 0, 0, 0
        self._scenarios.clear()


def _temporary() -> IO[bytes]:
    """An anonymous file for the spool: readable by this user only, gone once closed."""
    return tempfile.TemporaryFile(prefix="flakestorm-interactions-")


def _runs(entries: _Entries) -> Iterator[tuple[int, int]]:
    """The byte ranges ``[start, end)`` of ``entries``' lines, adjacent lines merged."""
    start = end = -1
    for offset, length in zip(entries.offsets, entries.lengths, strict=True):
        if offset != end:
            if start >= 0:
                yield start, end
            start = offset
        end = offset + length
    if start >= 0:
        yield start, end


def _body_size(interaction: Interaction) -> int:
    """The body text an interaction holds (what counts against :data:`RUN_BODY_CHARS`)."""
    return len(interaction.request or "") + len(interaction.response or "")
