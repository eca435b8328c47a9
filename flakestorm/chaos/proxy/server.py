"""The chaos proxy (:class:`ChaosProxy`): its lifecycle, the active scenario, and dispatch.

A request is a ``CONNECT`` (:mod:`~flakestorm.chaos.proxy.tunnel`), a control call under
``/_flakestorm/`` (:mod:`~flakestorm.chaos.proxy.control`), or a data call: routed
(:mod:`~flakestorm.chaos.proxy.routes`), served with its faults
(:mod:`~flakestorm.chaos.proxy.injection`) by the upstream chosen at start-up
(:mod:`~flakestorm.chaos.proxy.upstreams.registry`), and logged as an
:class:`~flakestorm.chaos.delivery.interactions.Interaction` whose ``url`` is the upstream URL
without query string or user info (query strings can carry API keys).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from flakestorm.agents.closing import Closing
from flakestorm.chaos.delivery import call_facts
from flakestorm.chaos.delivery.interactions import BODY_CHARS, InteractionLog, body_text
from flakestorm.chaos.faults.decisions import ActiveScenario, FaultBook, Target
from flakestorm.chaos.faults.flight import InFlight
from flakestorm.chaos.llm.usage import UsageMeter
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.control import MAX_BODY_BYTES, answer, is_control_path
from flakestorm.chaos.proxy.framing import FramedHandler, ThreadedServer, yield_on_wakeup
from flakestorm.chaos.proxy.injection import serve
from flakestorm.chaos.proxy.relays import KEY_HEADER, Relays, RelayUpstream, plumbing
from flakestorm.chaos.proxy.reply import ClientFailure, HttpResponse, UpstreamFailure, error_reply
from flakestorm.chaos.proxy.routes import MCP_HEADER, check_url, route
from flakestorm.chaos.proxy.tunnel import Tunnel
from flakestorm.chaos.proxy.upstreams.base import Rewindable, Upstream
from flakestorm.chaos.proxy.upstreams.cassette import (
    CassetteRecorder,
    CassetteRecording,
    redact_query,
)
from flakestorm.chaos.proxy.upstreams.connections import Connections
from flakestorm.chaos.proxy.upstreams.network import NetworkUpstream
from flakestorm.chaos.proxy.upstreams.registry import Build, local_upstream
from flakestorm.chaos.proxy.upstreams.replay import ReplayUpstream
from flakestorm.errors import UsageError

__all__ = ["ChaosProxy", "RouteConflict"]

logger = logging.getLogger("flakestorm.proxy")

BACKGROUND_GRACE_S = 10.0
"""How long :meth:`ChaosProxy.stop` waits for recordings still reading an upstream stream."""

_PASS_THROUGH = ActiveScenario(name="", seed=0)


@dataclass(frozen=True)
class RouteConflict:
    """A run's route that overrides the proxy's default for the same name with another value."""

    route: str
    """``proxy.tools.NAME`` or ``proxy.llm_upstream``."""
    default: str
    """What the proxy was started with (its environment or ``--tool``)."""
    config: str
    """What the run's config says (it wins)."""
    origin: str
    """Where proxies take that default from."""


TOOLS_ORIGIN = "FLAKESTORM_TOOLS or --tool"
LLM_ORIGIN = "FLAKESTORM_LLM_UPSTREAM or --llm-upstream"


class ChaosProxy(Closing):
    """The chaos proxy: ``with ChaosProxy(tools={"search": url}) as proxy: ...proxy.url...``.

    Binds at construction (``port=0`` picks a free port); :meth:`start` serves in daemon
    threads. The active scenario is set with :meth:`activate` in process, or over the control
    API (``PUT /_flakestorm/scenario``); without one, everything passes through (and is logged).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        llm_upstream: str | None = None,
        tools: Mapping[str, str] | None = None,
        token: str | None = None,
        log: InteractionLog | None = None,
        *,
        mcp: Mapping[str, str] | None = None,
        matches: Mapping[str, str] | None = None,
        a2a: Mapping[str, str] | None = None,
        record: str | Path | None = None,
        upstream_timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_request_bytes: int = 32 * 1024 * 1024,
        max_response_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.tools = {
            name: check_url(url, f"proxy.tools.{name}") for name, url in (tools or {}).items()
        }
        self.mcp = {name: check_url(url, f"proxy.mcp.{name}") for name, url in (mcp or {}).items()}
        """The MCP servers (streamable HTTP) by name: ``/mcp/NAME`` routes (SPEC §11)."""
        self.a2a = {name: check_url(url, f"proxy.a2a.{name}") for name, url in (a2a or {}).items()}
        """The downstream A2A agents by name: ``/a2a/NAME`` routes (SPEC §17)."""
        self.default_a2a = dict(self.a2a)
        self.matches = _checked_matches(matches, self.tools)
        """The URL a request is a call of tool NAME under, for the routes ``{match,
        forward}`` whose ``match`` is not their upstream (``tools[NAME]``): such a call is sent
        on to the upstream (SPEC §2.5)."""
        self.default_mcp = dict(self.mcp)
        self.default_tools = dict(self.tools)
        self.default_matches = dict(self.matches)
        """The routes the proxy was started with (``--tool``, ``FLAKESTORM_TOOLS``): the
        defaults that :meth:`route` layers a run's routes over."""
        self.token = token or None
        self.log = log if log is not None else InteractionLog()
        self.connect_timeout_s = connect_timeout_s
        self.max_request_bytes = max_request_bytes
        self.llm_upstream = llm_upstream or None
        self.default_llm_upstream = self.llm_upstream
        # the name of the proxy's own LLM upstream (mock, cassette), None for a URL
        self.llm_source, build = local_upstream(self.llm_upstream)
        self._recorder = CassetteRecorder(record) if record is not None else None

        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._book = FaultBook(_PASS_THROUGH)
        self._active: ActiveScenario | None = None
        self._flight: InFlight | None = None
        self._pool = Connections(connect_timeout_s, upstream_timeout_s)
        self.relays = Relays()
        """The stdio relays' requests, handed to them when they poll (:mod:`.relays`)."""
        network: Upstream = RelayUpstream(
            NetworkUpstream(self._pool, upstream_timeout_s, max_response_bytes),
            self.relays,
            upstream_timeout_s,
        )
        if self._recorder is not None:
            network = CassetteRecording(network, self._recorder, self.in_background)
        self._network = network
        self.upstream: Upstream = self._replaying(build)
        """Where every data call goes once its faults are decided."""
        self._connections: set[socket.socket] = set()
        self._background: set[threading.Thread] = set()
        self._thread: threading.Thread | None = None
        try:
            self._server = ThreadedServer(host, port, self, _Handler)
        except OSError as exc:
            if self._recorder is not None:
                self._recorder.close()
            raise UsageError(
                f"chaos proxy: cannot listen on {host}:{port} ({exc.strerror})"
            ) from exc

    # -- lifecycle

    def start(self) -> ChaosProxy:
        self._thread = threading.Thread(
            target=self._serve,
            name=f"flakestorm-proxy-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def _serve(self) -> None:
        yield_on_wakeup()  # the connection threads this thread starts inherit it
        self._server.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        """Stop serving: release held calls, close every connection and the listening socket."""
        self._stopping.set()
        self.relays.close()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        deadline = time.monotonic() + BACKGROUND_GRACE_S
        with self._lock:
            background = list(self._background)
        for thread in background:  # recordings still reading their upstream's rest
            thread.join(max(0.0, deadline - time.monotonic()))
        self._pool.close()
        if self._recorder is not None:
            self._recorder.close()

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def close(self) -> None:
        self.stop()

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The proxy's origin, connectable from this machine (``0.0.0.0`` -> ``127.0.0.1``)."""
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    # -- the active scenario

    @property
    def scenario(self) -> ActiveScenario | None:
        return self._active

    def activate(self, active: ActiveScenario | None) -> None:
        """Make ``active`` the scenario (None: pass-through); its fault counters start at 0.
        Scenarios in flight (:meth:`fly`) land."""
        with self._lock:
            self._active = active
            self._book = FaultBook(active if active is not None else _PASS_THROUGH)
            self._flight = None

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        """Put ``scenarios`` in flight together (:mod:`flakestorm.chaos.faults.flight`): a call that
        names an invocation of one of their cells (``cells``: cell id -> scenario) is decided
        by that scenario's book, its counters starting at 0; any other call by the active
        scenario's, as before. :meth:`activate` ends the flight."""
        with self._lock:
            self._flight = InFlight(scenarios, cells)

    @property
    def flight(self) -> InFlight | None:
        return self._flight

    def begin(self, invocation: str) -> None:
        """``invocation`` starts now, in the book its scenario is decided by."""
        flight = self._flight
        if flight is None or not flight.begin(invocation):
            self._book.begin(invocation)

    def active_scenarios(self) -> list[ActiveScenario]:
        """Every scenario whose faults may decide a call now: those in flight, or the active."""
        flight = self._flight
        return flight.scenarios() if flight is not None else [self._book.scenario]

    def declare_cell(self, cell_id: str) -> None:
        """The cell a call that carries no attribution is given from now on, the active
        scenario's fault counters kept (cells of it may still be running)."""
        with self._lock:
            book = self._book
            book.scenario = dataclasses.replace(book.scenario, cell_id=cell_id)
            if self._active is not None:
                self._active = book.scenario
            if cell_id:
                book.begin(cell_id)

    def reset(self) -> None:
        """Clear the interactions, the fault counters and the cassette's replay positions."""
        with self._lock:
            self._book = FaultBook(self._book.scenario)
            flight = self._flight
            if flight is not None:
                self._flight = InFlight(flight.scenarios(), flight.cells)
        self.log.clear()
        if isinstance(self.upstream, Rewindable):
            self.upstream.rewind()

    @property
    def book(self) -> FaultBook:
        return self._book

    # -- routes

    def route(
        self,
        tools: Mapping[str, str],
        llm_upstream: str | None,
        mcp: Mapping[str, str] | None = None,
        matches: Mapping[str, str] | None = None,
        a2a: Mapping[str, str] | None = None,
    ) -> list[RouteConflict]:
        """Take a run's routes (its config's ``proxy.tools``, ``proxy.mcp``, ``proxy.a2a`` and
        ``llm_upstream``, pushed over the control API) over the proxy's defaults, replacing the
        previous run's; return where they override a default with another value. Raises
        :class:`UsageError` (nothing changed) for a route the proxy cannot use."""
        checked = {name: check_url(url, f"proxy.tools.{name}") for name, url in tools.items()}
        servers = {name: check_url(url, f"proxy.mcp.{name}") for name, url in (mcp or {}).items()}
        agents = {name: check_url(url, f"proxy.a2a.{name}") for name, url in (a2a or {}).items()}
        setting = llm_upstream or self.default_llm_upstream
        source, build = local_upstream(setting)
        conflicts = [
            RouteConflict(f"proxy.tools.{name}", self.default_tools[name], url, TOOLS_ORIGIN)
            for name, url in checked.items()
            if name in self.default_tools and self.default_tools[name] != url
        ]
        conflicts += [
            RouteConflict(f"proxy.mcp.{name}", self.default_mcp[name], url, TOOLS_ORIGIN)
            for name, url in servers.items()
            if name in self.default_mcp and self.default_mcp[name] != url
        ]
        default = self.default_llm_upstream
        if llm_upstream and default is not None and default != llm_upstream:
            conflicts.append(RouteConflict("proxy.llm_upstream", default, llm_upstream, LLM_ORIGIN))
        redirected = _checked_matches(matches, checked)
        with self._lock:
            self.tools = self.default_tools | checked
            # a run's route replaces a default's match too (a plain URL is its own match)
            self.matches = {
                name: match for name, match in self.default_matches.items() if name not in checked
            } | redirected
            self.mcp = self.default_mcp | servers
            self.a2a = self.default_a2a | agents
            if setting != self.llm_upstream:
                self.llm_upstream, self.llm_source = setting, source
                self.upstream = self._replaying(build)
        return conflicts

    def _replaying(self, build: Build | None) -> Upstream:
        """The upstream ``build`` makes on the network upstream, under the replay upstream: a
        replayed session's recordings answer first."""
        chosen = build(self._network) if build is not None else self._network
        return ReplayUpstream(chosen, lambda: self._book.scenario)

    # -- used by the handlers

    def wait(self, delay_ms: int) -> bool:
        """Wait ``delay_ms``; False when the proxy stopped meanwhile."""
        return not self._stopping.wait(delay_ms / 1000) if delay_ms > 0 else True

    def in_background(self, work: Callable[[], None]) -> None:
        """Run ``work`` on a daemon thread; :meth:`stop` waits for it (at most
        :data:`BACKGROUND_GRACE_S` for all of them)."""

        def run() -> None:
            try:
                work()
            finally:
                with self._lock:
                    self._background.discard(thread)

        thread = threading.Thread(target=run, name=f"flakestorm-proxy-{self.port}-bg", daemon=True)
        with self._lock:
            self._background.add(thread)
        thread.start()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def track(self, connection: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


def _checked_matches(matches: Mapping[str, str] | None, tools: Mapping[str, str]) -> dict[str, str]:
    """``matches`` checked: a URL each, of a tool routed in ``tools``."""
    checked = {}
    for name, url in (matches or {}).items():
        if name not in tools:
            raise UsageError(f"proxy.tools.{name}.match: {name!r} has no route to forward to")
        checked[name] = check_url(url, f"proxy.tools.{name}.match")
    return checked


class _Handler(FramedHandler):
    """One agent connection: each request is a tunnel, a control call or a data call."""

    def dispatch(self) -> None:
        try:
            if self.command == "CONNECT":
                Tunnel(self).serve()
            elif is_control_path(self.path):
                self._control()
            elif (relay := plumbing(self.path)) is not None:
                self._relay(*relay)
            else:
                self._data()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except ClientFailure as exc:
            self.refuse(exc)
        except Exception as exc:  # a bug in the proxy: answer, log, keep serving
            logger.exception("chaos proxy: internal error on %s %s", self.command, self.path)
            self.close_connection = True
            self.write(
                error_reply(500, "proxy_internal_error", f"{type(exc).__name__}: {exc}"), False
            )

    def _control(self) -> None:
        body = self.read_body(MAX_BODY_BYTES)
        authorization = self.headers.get("Authorization", "")
        reply = answer(self.proxy, self.command, self.path, authorization, body)
        if reply.status == 401:
            # the agent under test (or anything else on its network) tried to change the chaos
            logger.warning(
                "chaos proxy: refused a control call without this proxy's token: %s %r from %s",
                self.command,
                self.path[:200],
                self.client_address[0],
            )
        self.write(reply, head=False)

    def _relay(self, relay: str, what: str, key: str) -> None:
        """A stdio relay's poll for its next request, or its answer to one (not calls)."""
        relays = self.proxy.relays
        if what == "next":
            got = relays.next(relay) if self.command == "GET" else None
            if got is None:
                reply = HttpResponse(204 if self.command == "GET" else 405, [])
            else:
                headers = [(KEY_HEADER, got[0]), ("Content-Type", "application/json")]
                reply = HttpResponse(200, headers, got[1])
        else:
            body = self.read_body(self.proxy.max_request_bytes)
            answered = self.command == "POST" and relays.answer(relay, key, body)
            reply = HttpResponse(204 if answered else 404, [])  # 404: no call waits for it
        self.write(reply, head=False)

    def _data(self) -> None:
        proxy = self.proxy
        started = time.perf_counter()
        seq = proxy.log.next_seq()
        body = self.read_body(proxy.max_request_bytes)
        call = route(proxy, self.command, self.path, self.headers.get(MCP_HEADER))
        if isinstance(call, HttpResponse):
            self.write(call, head=self.command == "HEAD")
            return
        call.begin(proxy.log, seq, started)
        query = f"?{redact_query(call.query)}" if call.query else ""
        call.request = body_text(body or call.rel_path + query)
        call.fingerprint = call_facts.fingerprint(self.command, self.path, body)
        call.idempotency_key = call_facts.idempotency_key(self.headers.items())
        try:
            try:
                reply = serve(self, call, body)
            except UpstreamFailure as exc:
                call.upstream_error = exc.summary
                reply = exc.reply
            call.retry_after_s = call_facts.retry_after_s(reply.status, reply.headers)
            meter = _meter(call, body, reply.chunks is not None)
            if reply.chunks is not None:
                reply.chunks = _kept(reply.chunks, call, meter)
            elif not reply.drop:
                call.response = body_text(reply.body)
                if meter is not None and call.usage is None:  # else metered before a fault
                    meter.feed(reply.body)
                    call.usage = meter.usage(finished=True)
            self.send_reply(reply, call)
        finally:
            call.done(call.status)  # when the agent hung up before its reply was ready


def _meter(call: ServedCall, body: bytes, streamed: bool) -> UsageMeter | None:
    """A meter of what an LLM call billed (SPEC §15): for a generation its upstream answered
    with a 2xx (a fault answering in place of the LLM is an attempt, never billed)."""
    status = call.upstream_status
    if call.provider is None or call.target is not Target.LLM or status is None:
        return None
    if not 200 <= status < 300:
        return None
    return UsageMeter(call.provider, body, streamed)


def _kept(
    chunks: Iterator[bytes], call: ServedCall, meter: UsageMeter | None = None
) -> Iterator[bytes]:
    """``chunks`` passed through, their first :data:`BODY_CHARS` kept as the call's
    ``response`` once the stream ends (however it ends: the inner stream is closed too), and
    what they billed read by ``meter`` (unknown when the stream did not run to its end)."""
    seen: list[bytes] = []
    size = 0
    ended = False
    try:
        for chunk in chunks:
            if size < BODY_CHARS:
                seen.append(chunk)
                size += len(chunk)
            if meter is not None:
                meter.feed(chunk)
            yield chunk
        ended = True
    finally:
        if meter is not None and call.usage is None:  # else the upstream's, before a fault
            call.usage = meter.usage(finished=ended)
        call.response = body_text(b"".join(seen))
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
