"""Interactions: every call the agent made to a tool or LLM, as flakestorm saw it.

The proxy and the python wrappers append one :class:`Interaction` per call to an
:class:`InteractionLog`; the runner reads them back per scenario to attach to each cell the
faults that actually fired, and to prove (or disprove) that every declared fault was
delivered (SPEC §4).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from flakestorm.chaos.faults.decisions import Target
from flakestorm.results.usage import Usage

BODY_CHARS = 16_384
"""The most of one request or response body an interaction keeps (the rest is cut, with a
note of how much)."""
RUN_BODY_CHARS = 8 * 1024 * 1024
"""The most body text the interaction log holds at once; a call logged past it keeps none
(:attr:`InteractionLog.bodies_dropped` counts them). A scenario's bodies are given back when
its interactions are forgotten (:meth:`InteractionLog.forget`: its cells carry them), so a long
run's later calls keep theirs."""


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
    """A thread-safe, append-only list of interactions with a bounded size: past ``limit``
    interactions a call is not logged (:attr:`dropped`), past :data:`RUN_BODY_CHARS` of body
    text held a call is logged without its bodies (:attr:`bodies_dropped`); :func:`lost_note`
    words both for the run's warnings. What :meth:`forget` drops gives its room back."""

    def __init__(self, limit: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._items: list[Interaction] = []
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
        with self._lock:
            self._open = max(0, self._open - 1)
            self._add(interaction)
            self._settled.notify_all()

    def append(self, interaction: Interaction) -> None:
        with self._lock:
            self._add(interaction)

    def _add(self, interaction: Interaction) -> None:
        if len(self._items) >= self._limit:
            self.dropped += 1
            return
        size = _body_size(interaction)
        if size and self._body_chars + size > RUN_BODY_CHARS:
            interaction = dataclasses.replace(interaction, request=None, response=None)
            self.bodies_dropped += 1
        else:
            self._body_chars += size
        self._items.append(interaction)

    def snapshot(self, scenario: str | None = None, wait_s: float = 0.0) -> list[Interaction]:
        """The interactions (of ``scenario``) in call order; first waiting up to ``wait_s`` for
        the calls still open to be logged (a streamed reply's last bytes can reach the agent
        before its interaction is logged)."""
        with self._lock:
            if wait_s > 0:
                self._settled.wait_for(lambda: self._open == 0, timeout=wait_s)
            items = list(self._items)
        items.sort(key=lambda i: i.seq)
        return items if scenario is None else [i for i in items if i.scenario == scenario]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.dropped = 0
            self._body_chars = 0
            self.bodies_dropped = 0

    def forget(self, scenario: str, keep: Collection[str] = ()) -> int:
        """Drop the interactions of ``scenario`` (except those of the cells in ``keep``) once
        the runner has read them into its results, so a long run's log stays small (and under
        its limit, its bodies' room given back); return how many were dropped."""
        with self._lock:
            kept: list[Interaction] = []
            for item in self._items:
                if item.scenario != scenario or item.cell_id in keep:
                    kept.append(item)
                else:
                    self._body_chars -= _body_size(item)
            dropped, self._items = len(self._items) - len(kept), kept
            return dropped


def _body_size(interaction: Interaction) -> int:
    """The body text an interaction holds (what counts against :data:`RUN_BODY_CHARS`)."""
    return len(interaction.request or "") + len(interaction.response or "")
