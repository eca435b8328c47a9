"""Agents: the system under test behind one protocol, ``invoke(prompt, call) -> Reply``.

An invocation never raises for an agent failure: the failure is in ``Reply.error`` (an
:class:`~flakestorm.errors.AgentErrorKind`) so the executor can score it as a failed prompt.

Modules: ``factory`` (``build_agent``: config -> agent), ``http`` and ``python`` (the two agent
kinds), ``extraction`` (``response_path``), ``readiness`` (waiting for the agent), ``process``
(``agent.start``), ``reset`` (``reset_endpoint`` / ``reset_function``), ``session``
(``agent.session`` conversation ids), ``source`` (a python agent's callable read from its
source, never imported), ``importer`` (importing
``module:attr`` without tracebacks), ``console`` (a python agent's prints and logging kept per
invocation), ``workers`` (daemon threads for python agent calls),
``request`` (a described HTTP request: what a request-level mutation changes), ``stream``
(a streamed reply's framing, text and figures) and ``streamed`` (an http agent's reply read
as a stream, ``agent.stream``), ``wire``
(sending such a request byte by byte) and ``closing`` (what a ``with`` block does with a
long-lived part: the agents, the agent process, the chaos proxy, wrappers and routes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from flakestorm.agents.request import RequestShape
from flakestorm.errors import AgentErrorKind
from flakestorm.results.stream_timing import StreamTiming


@dataclass(frozen=True)
class Call:
    """Who is invoking: forwarded to the agent (headers, contextvars) for fault attribution,
    and, for a request-level mutation, how the HTTP request differs (http agents only)."""

    cell_id: str = ""
    scenario: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    request: RequestShape | None = None
    context: str = ""
    """A replayed session's ``context``, for ``{context}`` in an http agent's template."""
    session: str = ""
    """The conversation this invocation belongs to (``agent.session``), or empty."""
    seed: int | None = None
    """The run seed: an http agent's ``traceparent`` derives from it and the cell id
    (:mod:`flakestorm.agents.attribution`); None sends none."""


NO_CALL = Call()
"""The default :class:`Call`: no cell, no scenario, no extra headers."""


@dataclass(frozen=True)
class Reply:
    """What one invocation produced."""

    output: str | None
    """The extracted answer text; None when the agent did not answer (see ``error``)."""
    latency_ms: float
    status: int | None = None
    """HTTP status (http agents); None for python agents and connection failures."""
    raw: str = ""
    """The raw reply body (decoded leniently, capped) for reports."""
    error: AgentErrorKind | None = None
    error_message: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    console: str = ""
    """The last lines a python agent printed or logged during the invocation (redacted;
    :mod:`flakestorm.agents.console`), "" when it wrote nothing or was not captured."""
    stream: StreamTiming | None = None
    """How the reply streamed (``agent.stream``: :mod:`flakestorm.agents.streamed`); None for a
    reply that was not streamed."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def down(self) -> bool:
        """The agent did not stay up to answer: the connection was refused or reset, no reply
        came within the timeout, or it answered 5xx. Under concurrency another request in
        flight may have caused it."""
        if self.error in _DOWN:
            return True
        return self.error is not None and self.status is not None and self.status >= 500


_DOWN = frozenset({AgentErrorKind.CONNECTION, AgentErrorKind.TIMEOUT})


class Agent(Protocol):
    """The system under test."""

    def invoke(self, prompt: str, call: Call = Call()) -> Reply: ...


class ManagedAgent(Agent, Protocol):
    """An agent flakestorm built from the config, holding resources until ``close()``."""

    def close(self) -> None: ...
