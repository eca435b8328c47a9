"""One data request being served (:class:`ServedCall`): its route, and the interaction it logs."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

from flakestorm.chaos import llm
from flakestorm.chaos.delivery.interactions import Interaction, InteractionLog
from flakestorm.chaos.faults.decisions import UNATTRIBUTED, Decision, Target
from flakestorm.results.usage import Usage

NOT_COUNTED = -1
"""``call_index`` of an interaction no fault could apply to (other traffic, stragglers)."""


@dataclass
class ServedCall:
    """One data request being served: its route, and what the interaction will record."""

    target: Target
    method: str
    upstream_url: str
    """Where the request goes (``mock:/v1/...`` / ``cassette:/v1/...`` for a local upstream)."""
    rel_path: str
    """The upstream-relative path (cassette key)."""
    query: str
    tool: str | None = None
    provider: llm.Provider | None = None
    local: bool = False
    """Sent to the proxy's own LLM upstream (``mock``, ``cassette:PATH``), not to a URL."""
    mcp: str | None = None
    """The MCP server (its ``proxy.mcp`` name) the request goes to: its JSON-RPC traffic is
    read by :mod:`~flakestorm.chaos.proxy.mcp_calls`; a ``tools/call`` becomes a tool call."""
    a2a: str | None = None
    """The downstream A2A agent (its ``proxy.a2a`` name) the request goes to: read by
    :mod:`~flakestorm.chaos.proxy.a2a_calls`; each of its calls is a call of that name."""
    scenario: str = ""
    cell: str = UNATTRIBUTED
    attribution: str = ""
    """Where ``cell`` came from (:class:`flakestorm.agents.attribution.Source`); "" when unset."""
    call_index: int = NOT_COUNTED
    matched: tuple[str, ...] = ()
    fired: list[str] = field(default_factory=list)
    unapplied: dict[str, str] = field(default_factory=dict)
    """Faults that fired but could not be applied to the reply, with why (SPEC §10)."""
    replaced: tuple[tuple[str, str], ...] = ()
    """Context attacks a fault answering in place of the tool or LLM left nothing to poison,
    with its label."""
    unscheduled: tuple[str, ...] = ()
    """Faults that matched the call outside their schedule."""
    status: int | None = None
    upstream_status: int | None = None
    upstream_error: str | None = None
    request: str | None = None
    response: str | None = None
    retry_after_s: float | None = None
    """The wait the reply asked the agent for (a 429 or 503 with ``Retry-After``)."""
    idempotency_key: str | None = None
    fingerprint: str = ""
    usage: Usage | None = None
    """What the reply billed (an LLM generation that reached its upstream)."""
    detail: str = ""
    """What the call was beyond its URL (an A2A call's method and its reply's state)."""
    _log: InteractionLog | None = None
    _seq: int = 0
    _started: float = 0.0

    def begin(self, log: InteractionLog, seq: int, started: float) -> None:
        self._log, self._seq, self._started = log, seq, started
        log.open()

    def decided(self, decision: Decision) -> None:
        """Take the fault book's decision's proof: the call's index, what matched it, and the
        attacks a fault answering in place of the tool or LLM left nothing to poison."""
        self.call_index, self.matched = decision.call_index, decision.matched
        self.replaced, self.unscheduled = decision.replaced, decision.unscheduled

    def not_applied(self, label: str, reason: str) -> None:
        """The fault ``label`` fired but could not be applied, because ``reason``: it is not
        delivered."""
        if label in self.fired:
            self.fired.remove(label)
        self.unapplied.setdefault(label, reason)

    def done(self, status: int | None) -> None:
        """Log the interaction with the status the agent got (once; later calls are no-ops)."""
        log, self._log = self._log, None
        if log is None:
            return
        self.status = status
        log.close(
            Interaction(
                seq=self._seq,
                scenario=self.scenario,
                cell_id=self.cell,
                target=self.target,
                tool=self.tool,
                method=self.method,
                url=self.log_url,
                call_index=self.call_index,
                matched=self.matched,
                fired=tuple(self.fired),
                status=status,
                upstream_status=self.upstream_status,
                upstream_error=self.upstream_error,
                latency_ms=round((time.perf_counter() - self._started) * 1000, 3),
                request=self.request,
                response=self.response,
                unapplied=tuple(self.unapplied.items()),
                replaced=self.replaced,
                unscheduled=self.unscheduled,
                attribution=self.attribution,
                started_ms=round(self._started * 1000, 3),
                retry_after_s=self.retry_after_s,
                idempotency_key=self.idempotency_key,
                fingerprint=self.fingerprint,
                usage=self.usage,
                detail=self.detail,
            )
        )

    @property
    def log_url(self) -> str:
        return _log_url(self.upstream_url)

    @property
    def cassette_target(self) -> str:
        """``llm`` for every call of an LLM API (generation or not), ``mcp:SERVER`` for all
        traffic of an MCP server, else ``tool:NAME``."""
        if self.mcp is not None:
            return f"mcp:{self.mcp}"
        return "llm" if self.provider is not None else f"tool:{self.tool}"

    @property
    def recorded(self) -> bool:
        """Whether the exchange goes to a cassette: LLM API, tool and MCP server calls, not
        other traffic."""
        return self.target is Target.TOOL or self.provider is not None or self.mcp is not None


@lru_cache(maxsize=1024)
def _log_url(url: str) -> str:
    """``url`` as logged: without its query string or user info (either may carry a key)."""
    parts = urlsplit(url)
    if not parts.netloc:
        return url.split("?", 1)[0]
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"
