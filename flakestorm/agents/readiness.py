"""Readiness: wait until the agent answers before the run starts (SPEC §2.1).

With ``agent.health_endpoint`` the agent is ready when a GET of it returns 2xx; without it, when
the endpoint's host:port accepts a TCP connection. Attempts back off from 50 ms to 500 ms until
``agent.ready_timeout``; then :class:`AgentNotReady` carries the last error and what to do.
While it waits, every ``interval_s`` (10 s) it reports :class:`Waiting` (the attempts so far,
the last error, which names what was tried, and the time spent of the budget) to
``on_waiting``, so a slow agent is never a silent wait. Python agents are ready once imported.
Time is injected (``clock``, ``sleep``) for tests.

A run that is stopping (``stop`` set: SIGINT, SIGTERM) does not wait: :func:`wait_ready` returns
at once, even from an attempt in flight, and the run reports its cells ``not_run``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from flakestorm.agents.http import network_reason
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import AgentNotReady

FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 0.5
ATTEMPT_TIMEOUT_S = 2.0
"""Longest a single attempt may take (capped by the time left)."""

PROGRESS_INTERVAL_S = 10.0
"""How often a wait reports its progress."""

Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class Waiting:
    """Progress of a wait for readiness: the attempts so far and the last error (which names
    what was tried), after ``elapsed_s`` of ``total_s`` (``agent.ready_timeout``)."""

    attempts: int
    last_error: str
    elapsed_s: float
    total_s: float
    ready: bool = False
    """The wait is over: the agent answered (sent only after some progress was)."""

    def line(self) -> str:
        tries = f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        if self.ready:
            return f"the agent is ready after {_seconds(self.elapsed_s)} ({tries})"
        return (
            f"waiting for the agent: {_seconds(self.elapsed_s)} of {_seconds(self.total_s)} "
            f"(agent.ready_timeout), {tries}, last error: {self.last_error}"
        )


def _seconds(value: float) -> str:
    """``12 s``, and ``0.3 s`` below 10 s."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def resolve_url(endpoint: str, url: str) -> str:
    """``url`` if absolute, else a path on ``endpoint``'s origin (``/reset`` or ``reset``)."""
    if urlsplit(url).scheme:
        return url
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}/{url.lstrip('/')}"


def host_port(endpoint: str) -> tuple[str, int]:
    parts = urlsplit(endpoint)
    default = 443 if parts.scheme == "https" else 80
    try:
        port = parts.port or default
    except ValueError:
        port = default
    return parts.hostname or "localhost", port


def probe(config: AgentConfig, timeout_s: float = ATTEMPT_TIMEOUT_S) -> str | None:
    """One readiness attempt: None when ready, else why not (``connection refused``, ...)."""
    if config.type is AgentType.PYTHON:
        return None
    if config.health_endpoint is not None:
        url = resolve_url(config.endpoint, config.health_endpoint)
        try:
            with requests.Session() as session:
                session.trust_env = False
                response = session.get(url, timeout=timeout_s, headers=dict(config.headers))
                response.close()
        except requests.RequestException as exc:
            return f"GET {url}: {network_reason(exc)}"
        if 200 <= response.status_code < 300:
            return None
        return f"GET {url} returned HTTP {response.status_code}"
    host, port = host_port(config.endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"TCP connect to {host}:{port}: {network_reason(exc)}"


def wait_ready(
    config: AgentConfig,
    timeout_ms: int | None = None,
    *,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    check: Callable[[], None] | None = None,
    stop: threading.Event | None = None,
    on_waiting: Callable[[Waiting], None] | None = None,
    interval_s: float | None = None,
) -> None:
    """Return once the agent is ready, or at once when ``stop`` is set; raise
    :class:`AgentNotReady` after ``timeout_ms`` (default ``agent.ready_timeout``). ``check``
    runs before each attempt and may raise to give up early (a started agent process that
    exited). ``on_waiting`` hears of the wait every ``interval_s`` (default
    :data:`PROGRESS_INTERVAL_S`), and once it has, of its end."""
    budget_s = (timeout_ms if timeout_ms is not None else config.ready_timeout) / 1000
    start = clock()
    deadline = start + budget_s
    every_s = PROGRESS_INTERVAL_S if interval_s is None else interval_s
    next_report = start + every_s
    backoff = FIRST_BACKOFF_S
    attempts = 0
    while True:
        if stop is not None and stop.is_set():
            return
        if check is not None:
            check()
        remaining = deadline - clock()
        error = _attempt(config, max(min(ATTEMPT_TIMEOUT_S, remaining), 0.05), stop)
        attempts += 1
        if error is None:
            stopping = stop is not None and stop.is_set()  # (the attempt was given up)
            if on_waiting is not None and next_report > start + every_s and not stopping:
                on_waiting(Waiting(attempts, "", clock() - start, budget_s, ready=True))
            return
        now = clock()
        remaining = deadline - now
        if remaining <= 0:
            raise AgentNotReady(not_ready_message(config, budget_s, error))
        if on_waiting is not None and now >= next_report:
            on_waiting(Waiting(attempts, error, now - start, budget_s))
            while next_report <= now:
                next_report += every_s
        sleep(min(backoff, remaining))
        backoff = min(backoff * 2, MAX_BACKOFF_S)


_POLL_S = 0.05


def _attempt(config: AgentConfig, timeout_s: float, stop: threading.Event | None) -> str | None:
    """:func:`probe`, given up (None: the caller then sees ``stop``) when ``stop`` is set."""
    if stop is None:
        return probe(config, timeout_s)
    outcome: list[str | None] = []
    thread = threading.Thread(
        target=lambda: outcome.append(probe(config, timeout_s)),
        name="flakestorm-readiness",
        daemon=True,
    )
    thread.start()
    while not outcome:
        if stop.wait(_POLL_S):
            return None
        if not thread.is_alive() and not outcome:
            return "the readiness probe failed"  # pragma: no cover - probe does not raise
    return outcome[0]


@dataclass(frozen=True)
class ReadyAgain:
    """Brings an agent flakestorm did not start back into a run after a request may have
    brought it down: :meth:`revive` waits (up to ``agent.ready_timeout``) until it answers
    again, e.g. once its supervisor restarted it."""

    config: AgentConfig
    stop: threading.Event | None = None
    on_waiting: Callable[[Waiting], None] | None = None

    def revive(self) -> bool:
        """Nothing when the agent answers (False); else a wait until it does (True)."""
        if probe(self.config) is None:
            return False
        wait_ready(self.config, stop=self.stop, on_waiting=self.on_waiting)
        return True


def not_ready_message(config: AgentConfig, budget_s: float, error: str) -> str:
    how = (
        "is the agent running and does agent.health_endpoint answer 2xx?"
        if config.health_endpoint is not None
        else "is the agent running at agent.endpoint?"
    )
    return (
        f"the agent was not ready after {budget_s * 1000:.0f} ms (agent.ready_timeout): "
        f"last error: {error}. Fix: {how} Start it first, or set agent.start to have flakestorm "
        "start it; set agent.health_endpoint to a URL that answers 2xx when the agent is ready, "
        "or raise agent.ready_timeout if it starts slowly."
    )
