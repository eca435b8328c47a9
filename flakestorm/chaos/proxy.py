"""The chaos proxy: faults injected into an HTTP agent's LLM and tool traffic (SPEC §4.2).

One threaded HTTP/1.1 server. Routes (the data routes never use the ``/_flakestorm/`` prefix)::

    /llm/openai/v1/...       -> llm_upstream + /v1/...   (default https://api.openai.com)
    /llm/anthropic/v1/...    -> llm_upstream + /v1/...   (default https://api.anthropic.com)
    /tools/NAME/REST?QUERY   -> tools[NAME] + /REST?QUERY (unknown NAME: 404 naming the tools)
    GET http://host/path     forward-proxy mode (HTTP_PROXY): forwarded to that URL
    CONNECT host:port        HTTPS tunnel (HTTPS_PROXY): bytes relayed as they are
    /_flakestorm/...         the control API (:mod:`flakestorm.chaos.control`)

``llm_upstream`` is a URL, ``mock`` (:func:`flakestorm.chaos.mock_llm.mock_reply`, no network)
or ``cassette:PATH`` (replay, :mod:`flakestorm.chaos.cassette`). Request headers are forwarded
(``Authorization``, ``x-api-key``, ``anthropic-version``...) except hop-by-hop headers, ``Host``,
``Accept-Encoding`` (the proxy asks for identity, so it can read and rewrite replies) and the
``X-Flakestorm-*`` headers.

What is a call of what:

- ``/llm/...``: an LLM call when the path is a generation endpoint (``is_llm_path``); other
  LLM-API paths (``GET /v1/models``) pass through untouched (no faults), but are recorded to
  and served from a cassette like LLM calls (cassette target ``llm``).
- ``/tools/NAME/...``: a call of tool ``NAME``.
- forward mode: a call of tool ``NAME`` when the URL starts with ``tools[NAME]``, or when it
  matches the ``match_url`` of a tool fault (then the tool is that fault's ``tool``); else an LLM
  call when the path ends with ``/chat/completions``, ``/completions``, ``/responses`` or
  ``/messages`` (sent to the URL itself, or to ``mock``/the cassette when ``llm_upstream`` is
  one of those); else other traffic, forwarded and logged without faults.
- ``CONNECT host:port``: the proxy cannot see inside TLS, so a tunnel is a call of a tool when
  a tool fault's ``match_url`` matches ``host:port``, ``host`` or ``https://host[:port]/`` (e.g.
  ``match_url: "api.example.com*"``), or when ``tools[NAME]`` is an ``https://`` URL on that
  host and port. A fault that fires on it acts on the tunnel: ``error`` refuses the CONNECT with
  its ``error_code`` (default 503), ``slow`` delays it and then tunnels, ``timeout`` holds it
  for ``delay_ms`` and closes without answering, ``malformed`` and ``malicious_response``
  (which cannot forge a body inside TLS) establish the tunnel and then reset it.

Attribution: the cell of a call is its ``X-Flakestorm-Cell`` header, else the
``flakestorm-cell`` entry of a W3C ``baggage`` header (percent-decoded), else the active
scenario's ``cell_id``. A call whose ``X-Flakestorm-Scenario`` names another scenario than the
active one is a straggler from an earlier scenario: it is passed through with no fault,
and logged under the scenario it names with no cell (``""``) and ``call_index`` -1, so it never
consumes the active scenario's ``after_calls`` counts nor proves one of its faults delivered.

Upstream failures are not faults: an unreachable upstream gets 502, a timed-out one 504, both
as ``{"error": {"type": "upstream_unreachable" | "upstream_timeout", "message": ...}}`` and
recorded in the interaction's ``upstream_error`` (never in ``fired``). The proxy's own errors
are JSON too (``bad_request``, ``request_too_large``, ``unknown_tool``, ``not_found``...).

Every call is logged as an :class:`~flakestorm.chaos.interactions.Interaction`; its ``url`` is
the upstream URL without query string or user info (query strings can carry API keys).
"""

from __future__ import annotations

import contextlib
import hmac
import http
import json
import logging
import random
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import HTTPError, ReadTimeoutError

from flakestorm import __version__
from flakestorm.chaos import llm, mock_llm
from flakestorm.chaos.cassette import Cassette, CassetteRecorder, RequestKey
from flakestorm.chaos.control import CONTROL_PREFIX, ScenarioDocumentError, parse_scenario
from flakestorm.chaos.faults import (
    UNATTRIBUTED,
    ActiveScenario,
    Decision,
    FaultBook,
    Target,
    attack_label,
    call_rng,
    llm_fault_label,
    tool_fault_label,
    tool_matches,
)
from flakestorm.chaos.interactions import Interaction, InteractionLog
from flakestorm.chaos.tool_modes import (
    RELAY,
    TOOL_MODES,
    ToolResponse,
    TunnelAction,
    fault_response,
    slow_delay_ms,
)
from flakestorm.chaos.tool_results import poison_body
from flakestorm.config import LlmFault, ToolFault
from flakestorm.errors import UsageError

__all__ = ["ChaosProxy", "health_check", "proxy_from_env", "serve_from_env"]

logger = logging.getLogger("flakestorm.proxy")

DEFAULT_PORT = 8080
DEFAULT_LLM_UPSTREAMS = {
    llm.Provider.OPENAI: "https://api.openai.com",
    llm.Provider.ANTHROPIC: "https://api.anthropic.com",
}
"""Where LLM calls go when ``llm_upstream`` is not set: each provider's public API."""
MOCK = "mock"
CASSETTE_PREFIX = "cassette:"

CELL_HEADER = "X-Flakestorm-Cell"
SCENARIO_HEADER = "X-Flakestorm-Scenario"
BAGGAGE_KEY = "flakestorm-cell"

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
_NOT_RETURNED = HOP_BY_HOP | {"content-length", "content-encoding"}
NOT_COUNTED = -1
"""``call_index`` of an interaction no fault could apply to (other traffic, stragglers)."""

_CHUNK = 64 * 1024
BACKGROUND_GRACE_S = 10.0
"""How long :meth:`ChaosProxy.stop` waits for recordings still reading an upstream stream."""


# --------------------------------------------------------------------------- replies


@dataclass
class Reply:
    """What the proxy sends back to the agent for one call."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    chunks: Iterator[bytes] | None = None
    """Stream these (SSE): each is flushed as it comes."""
    delay_ms: int = 0
    """Wait this long before answering."""
    drop: bool = False
    """Close the connection without answering (after ``delay_ms``)."""
    stall_after_chunks: int | None = None
    """Send this many chunks, then hold the stream for ``delay_ms`` and drop it."""
    head_length: str | None = None
    """A HEAD reply's upstream Content-Length (``""``: the upstream sent none, nor do we)."""

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")


def error_reply(status: int, kind: str, message: str, **extra: Any) -> Reply:
    """``{"error": {"type": kind, "message": message, ...}}`` with ``status``."""
    body = json.dumps({"error": {"type": kind, "message": message, **extra}}).encode()
    return Reply(status, [("Content-Type", "application/json")], body)


def json_reply(value: Any, status: int = 200) -> Reply:
    return Reply(status, [("Content-Type", "application/json")], json.dumps(value).encode())


def _pairs(headers: Any) -> list[tuple[str, str]]:
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    return [(str(k), str(v)) for k, v in items]


def _from_tool(response: ToolResponse) -> Reply:
    return Reply(
        response.status,
        _pairs(response.headers),
        response.body,
        delay_ms=response.delay_ms,
        drop=response.drop,
    )


def _from_llm(response: llm.LlmResponse) -> Reply:
    chunks = response.chunks
    return Reply(
        response.status,
        _pairs(response.headers),
        response.body or b"",
        chunks=None if chunks is None else iter(chunks),
        delay_ms=response.delay_ms,
        drop=response.drop,
        stall_after_chunks=response.stall_after_chunks,
    )


class UpstreamFailure(Exception):
    """The upstream could not answer (not a fault): becomes a 502/504 and ``upstream_error``."""

    def __init__(self, status: int, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.extra = extra

    @property
    def reply(self) -> Reply:
        return error_reply(self.status, self.kind, str(self), **self.extra)

    @property
    def summary(self) -> str:
        return f"{self.kind}: {self}"


class ClientFailure(Exception):
    """The agent's request cannot be served (too large, unreadable): answered, then closed."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


# --------------------------------------------------------------------------- routing


@dataclass
class Call:
    """One data request being served: its route, and what the interaction will record."""

    target: Target
    method: str
    upstream_url: str
    """Where the request goes (``mock:/v1/...`` / ``cassette:/v1/...`` for those)."""
    rel_path: str
    """The upstream-relative path (cassette key)."""
    query: str
    tool: str | None = None
    provider: llm.Provider | None = None
    source: str = "url"
    """``url``, ``mock`` or ``cassette``."""
    scenario: str = ""
    cell: str = UNATTRIBUTED
    stray: bool = False
    call_index: int = NOT_COUNTED
    matched: tuple[str, ...] = ()
    fired: list[str] = field(default_factory=list)
    status: int | None = None
    upstream_status: int | None = None
    upstream_error: str | None = None
    _log: InteractionLog | None = None
    _seq: int = 0
    _started: float = 0.0

    def begin(self, log: InteractionLog, seq: int, started: float) -> None:
        self._log, self._seq, self._started = log, seq, started

    def done(self, status: int | None) -> None:
        """Log the interaction with the status the agent got (once; later calls are no-ops)."""
        log, self._log = self._log, None
        if log is None:
            return
        self.status = status
        log.append(
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
            )
        )

    @property
    def log_url(self) -> str:
        parts = urlsplit(self.upstream_url)
        if not parts.netloc:
            return self.upstream_url.split("?", 1)[0]
        host = parts.netloc.rpartition("@")[2]
        return f"{parts.scheme}://{host}{parts.path}"

    @property
    def cassette_target(self) -> str:
        """``llm`` for every call of an LLM API (generation or not), else ``tool:NAME``."""
        return "llm" if self.provider is not None else f"tool:{self.tool}"

    @property
    def recorded(self) -> bool:
        """Whether the exchange goes to a cassette: LLM API and tool calls, not other traffic."""
        return self.target is Target.TOOL or self.provider is not None


def _joined(base: str, rest: str) -> str:
    return base.rstrip("/") + rest if rest else base


def _under(url: str, base: str) -> bool:
    """Whether ``url`` is ``base`` or below it (``http://a/x`` is not under ``http://a/xy``)."""
    if not url.startswith(base):
        return False
    return base.endswith("/") or len(url) == len(base) or url[len(base)] in "/?#"


def _check_url(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{what}: {value!r} is not an http(s) URL (expected e.g. https://host)")
    return value


def _baggage_cell(values: Iterable[str]) -> str | None:
    for header in values:
        for member in header.split(","):
            key, _, rest = member.partition("=")
            if key.strip() == BAGGAGE_KEY:
                value = unquote(rest.split(";", 1)[0].strip())
                if value:
                    return value
    return None


# --------------------------------------------------------------------------- the proxy


class ChaosProxy:
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
        record: str | Path | None = None,
        upstream_timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_request_bytes: int = 32 * 1024 * 1024,
        max_response_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.tools = {
            name: _check_url(url, f"proxy.tools.{name}") for name, url in (tools or {}).items()
        }
        self.token = token or None
        self.log = log if log is not None else InteractionLog()
        self.upstream_timeout_s = upstream_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.llm_upstream = llm_upstream or None
        self.cassette: Cassette | None = None
        self.mock = False
        if self.llm_upstream == MOCK:
            self.mock = True
        elif self.llm_upstream is not None and self.llm_upstream.startswith(CASSETTE_PREFIX):
            self.cassette = Cassette.load(self.llm_upstream[len(CASSETTE_PREFIX) :])
        elif self.llm_upstream is not None:
            _check_url(self.llm_upstream, "proxy.llm_upstream")
        self.recorder = CassetteRecorder(record) if record is not None else None

        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._book = FaultBook(_PASS_THROUGH)
        self._active: ActiveScenario | None = None
        self._session = _upstream_session()
        self._connections: set[socket.socket] = set()
        self._background: set[threading.Thread] = set()
        self._thread: threading.Thread | None = None
        try:
            self._server = _Server(host, port, self)
        except OSError as exc:
            if self.recorder is not None:
                self.recorder.close()
            raise UsageError(
                f"chaos proxy: cannot listen on {host}:{port} ({exc.strerror})"
            ) from exc

    # -- lifecycle

    def start(self) -> ChaosProxy:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"flakestorm-proxy-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: release held calls, close every connection and the listening socket."""
        self._stopping.set()
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
        self._session.close()
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        """Make ``active`` the scenario (None: pass-through); its fault counters start at 0."""
        with self._lock:
            self._active = active
            self._book = FaultBook(active if active is not None else _PASS_THROUGH)

    def reset(self) -> None:
        """Clear the interactions, the fault counters and the cassette's replay positions."""
        with self._lock:
            self._book = FaultBook(self._book.scenario)
        self.log.clear()
        if self.cassette is not None:
            self.cassette.rewind()

    @property
    def book(self) -> FaultBook:
        return self._book

    # -- used by the handler

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

    @property
    def open_connections(self) -> int:
        """How many agent connections are open right now."""
        with self._lock:
            return len(self._connections)

    def track(self, connection: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def tool_for_url(self, url: str) -> str | None:
        """The configured tool whose upstream ``url`` is under, else one a ``match_url`` names."""
        for name, base in self.tools.items():
            if _under(url, base):
                return name
        for fault in self._book.scenario.tool_faults:
            if fault.match_url and tool_matches(fault, None, url):
                return fault.tool
        return None

    def request_upstream(
        self, method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> requests.Response:
        """Send the request upstream; translate ``requests`` failures to UpstreamFailure.

        The request goes straight to the session's pooled adapter: no redirects followed (the
        agent sees them), no cookies kept, no environment proxies, and none of the per-call
        setting merges of ``Session.request``, which cost more than the rest of the proxy.
        """
        prepared = requests.PreparedRequest()
        try:
            prepared.prepare(method=method, url=url, headers=_combined(headers), data=body or None)
        except (requests.RequestException, ValueError) as exc:
            raise ClientFailure(400, "bad_request", f"cannot forward to {url!r}: {exc}") from None
        try:
            return self._session.get_adapter(url).send(
                prepared, stream=True, timeout=(self.connect_timeout_s, self.upstream_timeout_s)
            )
        except requests.Timeout as exc:
            raise UpstreamFailure(
                504,
                "upstream_timeout",
                f"{_origin(url)} did not answer within {self.upstream_timeout_s:g} s",
            ) from exc
        except requests.RequestException as exc:
            raise UpstreamFailure(
                502, "upstream_unreachable", f"{_origin(url)} is unreachable: {_reason(exc)}"
            ) from exc

    def read_upstream(self, response: requests.Response, url: str) -> bytes:
        """The whole (decoded) body, at most ``max_response_bytes``."""
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.max_response_bytes:
            response.close()
            raise self._too_large(url)
        data = bytearray()
        for chunk in self.iter_upstream(response, url):
            data += chunk
            if len(data) > self.max_response_bytes:
                response.close()
                raise self._too_large(url)
        return bytes(data)

    def iter_upstream(self, response: requests.Response, url: str) -> Iterator[bytes]:
        """The body's chunks as they arrive; failures mid-body become UpstreamFailure."""
        try:
            if _is_sse(response):
                yield from _sse_chunks(response)
            else:
                yield from response.iter_content(chunk_size=_CHUNK)
        except requests.RequestException as exc:
            if isinstance(exc, requests.Timeout) or (
                exc.args and isinstance(exc.args[0], ReadTimeoutError)
            ):
                raise UpstreamFailure(
                    504,
                    "upstream_timeout",
                    f"{_origin(url)} stopped sending for {self.upstream_timeout_s:g} s",
                ) from exc
            raise UpstreamFailure(
                502, "upstream_unreachable", f"{_origin(url)} broke off its reply: {_reason(exc)}"
            ) from exc
        finally:
            response.close()

    def _too_large(self, url: str) -> UpstreamFailure:
        return UpstreamFailure(
            502,
            "upstream_too_large",
            f"{_origin(url)} sent more than {self.max_response_bytes} bytes",
        )


_PASS_THROUGH = ActiveScenario(name="", seed=0)


def _upstream_session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # the proxy's own environment must not reroute agent traffic
    adapter = HTTPAdapter(pool_connections=32, pool_maxsize=64, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


_REASONS = (
    "Connection refused",
    "Name or service not known",
    "nodename nor servname",
    "Temporary failure in name resolution",
    "Connection reset",
    "No route to host",
)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in _REASONS:
        if marker in text:
            return marker.lower()
    return type(exc).__name__


def _combined(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The headers as one value per name: repeated ones joined (``, ``; ``; `` for Cookie),
    as HTTP allows, instead of all but the last being lost."""
    out: dict[str, str] = {}
    names: dict[str, str] = {}
    for name, value in headers:
        first = names.setdefault(name.lower(), name)
        if first in out:
            out[first] += ("; " if first.lower() == "cookie" else ", ") + value
        else:
            out[first] = value
    return out


def _sse_chunks(response: requests.Response) -> Iterator[bytes]:
    """An event stream's bytes as soon as each arrives. A chunked stream yields chunk by chunk
    already; one without chunked framing (close-delimited, or a Content-Length) would be read
    to its end by ``iter_content`` before yielding anything, so it is read with ``read1``."""
    raw = response.raw
    read1 = getattr(raw, "read1", None)  # urllib3 >= 2.3
    if raw.chunked or read1 is None:
        yield from response.iter_content(chunk_size=None)
        return
    while True:
        try:
            data = read1(_CHUNK)
        except (HTTPError, OSError) as exc:  # what requests' iter_content would raise
            raise requests.ConnectionError(exc) from exc
        if not data:
            return
        yield data


def _is_sse(response: requests.Response) -> bool:
    return response.headers.get("Content-Type", "").lower().startswith("text/event-stream")


def _rng(scenario: ActiveScenario, cell: str, key: str, call_index: int) -> random.Random:
    return call_rng(scenario.seed, scenario.name, cell, key, call_index)


# --------------------------------------------------------------------------- the server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, host: str, port: int, proxy: ChaosProxy) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.proxy = proxy
        super().__init__((host, port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = -1  # status line, headers and body leave in one write
    server: _Server
    _linger = False

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def version_string(self) -> str:
        return f"flakestorm-proxy/{__version__}"

    @property
    def proxy(self) -> ChaosProxy:
        return self.server.proxy

    def setup(self) -> None:
        super().setup()
        self.proxy.track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
            if self._linger:
                _drain(self.connection)
        finally:
            self.proxy.track(self.connection, add=False)

    def handle_expect_100(self) -> bool:
        super().handle_expect_100()
        self.wfile.flush()  # the buffered writer would hold the interim reply back
        return True

    # -- errors the stdlib raises while parsing (malformed request line, huge headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if self.request_version == "HTTP/0.9":  # never answer without a status line
            self.request_version = "HTTP/1.0"
        phrase = http.HTTPStatus(code).phrase if code in http.HTTPStatus._value2member_map_ else ""
        kind = {431: "headers_too_large", 414: "request_line_too_long", 501: "unsupported_method"}
        reply = error_reply(code, kind.get(code, "bad_request"), message or phrase)
        self.close_connection = True
        self._linger = True
        self._write(reply, head=False)

    # -- dispatch

    def _dispatch(self) -> None:
        try:
            if self.command == "CONNECT":
                _Tunnel(self).serve()
            elif self.path.startswith(CONTROL_PREFIX + "/") or self.path == CONTROL_PREFIX:
                self._control()
            else:
                self._data()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except ClientFailure as exc:
            self.close_connection = True
            self._linger = True
            self._write(error_reply(exc.status, exc.kind, str(exc)), head=False)
        except Exception as exc:  # a bug in the proxy: answer, log, keep serving
            logger.exception("chaos proxy: internal error on %s %s", self.command, self.path)
            self.close_connection = True
            self._write(
                error_reply(500, "proxy_internal_error", f"{type(exc).__name__}: {exc}"), False
            )

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch
    do_CONNECT = _dispatch

    # -- reading

    def read_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked(limit)
        length_text = self.headers.get("Content-Length")
        if not length_text:
            return b""
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            raise ClientFailure(400, "bad_request", f"bad Content-Length {length_text!r}") from None
        if length > limit:
            raise ClientFailure(
                413, "request_too_large", f"request body of {length} bytes (limit {limit})"
            )
        body = self.rfile.read(length)
        if len(body) < length:
            raise ConnectionResetError("client closed the connection mid-body")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        data = bytearray()
        while True:
            line = self.rfile.readline(1026)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ClientFailure(400, "bad_request", "bad chunked request body") from None
            if size == 0:
                while self.rfile.readline(1026) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(data)
            if len(data) + size > limit:
                raise ClientFailure(
                    413, "request_too_large", f"chunked request body over {limit} bytes"
                )
            chunk = self.rfile.read(size)
            if len(chunk) < size:
                raise ConnectionResetError("client closed the connection mid-body")
            data += chunk
            self.rfile.readline(3)

    def forwarded_headers(self) -> list[tuple[str, str]]:
        listed = {
            token.strip().lower()
            for value in self.headers.get_all("Connection", [])
            for token in value.split(",")
        }
        out = [
            (k, v)
            for k, v in self.headers.items()
            if (name := k.lower()) not in _NOT_FORWARDED
            and name not in listed
            and not name.startswith("x-flakestorm-")
        ]
        out.append(("Accept-Encoding", "identity"))
        return out

    def hold(self, delay_ms: int) -> bool:
        """Hold the call ``delay_ms``; False when the agent hung up or the proxy stopped first
        (a held call must not keep a thread busy for a client that is gone)."""
        deadline = time.monotonic() + delay_ms / 1000
        connection = self.connection
        while not self.proxy.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            readable, _, _ = select.select([connection], [], [], min(left, 0.1))
            if readable:
                try:
                    if not connection.recv(1, socket.MSG_PEEK):
                        return False  # the agent closed its side
                except OSError:
                    return False
                return self.proxy.wait(int(left * 1000))  # it sent more (pipelining): wait
        return False

    # -- writing

    def _write(self, reply: Reply, head: bool) -> None:
        """Send a complete (non-streamed) reply in one buffered write."""
        self.send_response_only(reply.status)
        for name, value in reply.headers:
            if name.lower() not in _NOT_RETURNED:
                self.send_header(name, value)
        no_body = reply.status in (204, 304) or reply.status < 200
        length = str(len(reply.body))
        if head and reply.head_length is not None:
            length = reply.head_length
        if not no_body and length:
            self.send_header("Content-Length", length)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head and not no_body:
            self.wfile.write(reply.body)
        self.wfile.flush()

    def send_reply(self, reply: Reply, call: Call) -> None:
        """Send ``reply`` (delays, drops, streams). The call's interaction is logged just
        before the last byte leaves, so whoever got the reply can already read it."""
        if reply.delay_ms and reply.stall_after_chunks is None and not self.hold(reply.delay_ms):
            reply.drop = True
        if reply.drop:
            call.done(None)
            self.close_connection = True
            _reset(self.connection)
        elif reply.chunks is None:
            call.done(reply.status)
            self._write(reply, head=self.command == "HEAD")
        else:
            self._stream(reply, call)

    def _stream(self, reply: Reply, call: Call) -> None:
        assert reply.chunks is not None
        chunked = self.request_version != "HTTP/1.0"
        self.send_response_only(reply.status)
        for name, value in reply.headers:
            if name.lower() not in _NOT_RETURNED:
                self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        stall = reply.stall_after_chunks
        sent = 0
        try:
            for chunk in reply.chunks:
                if stall is not None and sent >= stall:
                    break
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                    self.wfile.flush()
                    sent += 1
        except UpstreamFailure as exc:  # headers are gone: all we can do is cut the stream
            call.upstream_error = exc.summary
            call.done(reply.status)
            self.close_connection = True
            _reset(self.connection)
            return
        finally:
            close = getattr(reply.chunks, "close", None)
            if close is not None:
                close()
        call.done(reply.status)
        if stall is not None and sent >= stall:  # a stalled stream: hold it open, then drop it
            self.hold(reply.delay_ms)
            self.close_connection = True
            _reset(self.connection)
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- the control API

    def _control(self) -> None:
        proxy = self.proxy
        body = self.read_body(4 * 1024 * 1024)
        if proxy.token is not None:
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {proxy.token}".encode()):
                self._write(
                    error_reply(
                        401,
                        "unauthorized",
                        "this proxy needs `Authorization: Bearer <token>` on control calls "
                        "(the token it was started with, FLAKESTORM_PROXY_TOKEN)",
                    ),
                    head=False,
                )
                return
        parts = urlsplit(self.path)
        route = parts.path[len(CONTROL_PREFIX) :].rstrip("/")
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        handler = _CONTROL.get((self.command, route))
        if handler is None:
            allowed = sorted(m for m, r in _CONTROL if r == route)
            if allowed:
                reply = error_reply(
                    405, "method_not_allowed", f"{route} accepts {', '.join(allowed)}"
                )
                reply.headers.append(("Allow", ", ".join(allowed)))
            else:
                reply = error_reply(
                    404,
                    "not_found",
                    f"no control route {parts.path}; routes: "
                    + ", ".join(f"{m} {CONTROL_PREFIX}{r}" for m, r in _CONTROL),
                )
            self._write(reply, head=False)
            return
        self._write(handler(proxy, body, params), head=False)

    # -- data routes

    def _data(self) -> None:
        proxy = self.proxy
        started = time.perf_counter()
        seq = proxy.log.next_seq()
        body = self.read_body(proxy.max_request_bytes)
        call = self._route()
        if isinstance(call, Reply):
            self._write(call, head=self.command == "HEAD")
            return
        call.begin(proxy.log, seq, started)
        try:
            try:
                reply = self._serve(call, body)
            except UpstreamFailure as exc:
                call.upstream_error = exc.summary
                reply = exc.reply
            self.send_reply(reply, call)
        finally:
            call.done(call.status)  # when the agent hung up before its reply was ready

    def _route(self) -> Call | Reply:
        proxy = self.proxy
        method = self.command
        path = self.path
        if path.startswith(("http://", "https://")):
            return self._route_forward(path)
        rel, _, query = path.partition("?")
        for provider in llm.Provider:
            prefix = f"/llm/{provider.value}"
            if rel == prefix or rel.startswith(prefix + "/"):
                rest = rel[len(prefix) :]
                return self._llm_call(provider, rest, query, method)
        if rel.startswith("/tools/"):
            name, slash, rest = rel[len("/tools/") :].partition("/")
            name = unquote(name)
            if name not in proxy.tools:
                configured = ", ".join(sorted(proxy.tools)) or "none"
                return error_reply(
                    404,
                    "unknown_tool",
                    f"no tool {name!r} is configured on this proxy (configured: {configured}); "
                    "add it under proxy.tools or with --tool NAME=URL",
                )
            rest = slash + rest
            upstream = _joined(proxy.tools[name], rest) + (f"?{query}" if query else "")
            return Call(Target.TOOL, method, upstream, rest, query, tool=name)
        return error_reply(
            404,
            "not_found",
            f"no route for {rel}: use /llm/openai/v1/..., /llm/anthropic/v1/..., "
            "/tools/NAME/..., or this proxy as HTTP_PROXY",
        )

    def _llm_call(self, provider: llm.Provider, rest: str, query: str, method: str) -> Call:
        proxy = self.proxy
        target = Target.LLM if llm.is_llm_path(rest) else Target.OTHER
        suffix = f"?{query}" if query else ""
        if proxy.mock:
            return Call(
                target, method, f"mock:{rest}", rest, query, provider=provider, source="mock"
            )
        if proxy.cassette is not None:
            upstream = f"cassette:{rest}{suffix}"
            return Call(target, method, upstream, rest, query, provider=provider, source="cassette")
        base = proxy.llm_upstream or DEFAULT_LLM_UPSTREAMS[provider]
        return Call(target, method, _joined(base, rest) + suffix, rest, query, provider=provider)

    def _route_forward(self, url: str) -> Call:
        proxy = self.proxy
        parts = urlsplit(url)
        method = self.command
        tool = proxy.tool_for_url(url)
        if tool is not None:
            base = proxy.tools.get(tool)
            if base is not None and _under(url, base):
                rel = url[len(base.rstrip("/")) :].split("?", 1)[0]
            else:
                rel = f"{parts.scheme}://{parts.netloc}{parts.path}"
            return Call(Target.TOOL, method, url, rel, parts.query, tool=tool)
        if llm.is_llm_path(parts.path):
            provider = llm.provider_of(parts.path)
            if proxy.mock or proxy.cassette is not None:
                call = self._llm_call(provider, parts.path, parts.query, method)
                call.target = Target.LLM
                return call
            return Call(Target.LLM, method, url, parts.path, parts.query, provider=provider)
        return Call(Target.OTHER, method, url, parts.path, parts.query)

    # -- serving one call

    def _attribute(self, call: Call) -> FaultBook | None:
        """Set the call's scenario and cell; the book to decide with (None: a straggler)."""
        book = self.proxy.book
        named = self.headers.get(SCENARIO_HEADER)
        if named is not None:
            named = unquote(named)  # percent-encoded by flakestorm's http agent
        if named is not None and named != book.scenario.name:
            call.scenario, call.cell, call.stray = named, UNATTRIBUTED, True
            return None
        cell_header = self.headers.get(CELL_HEADER)
        attributed = (unquote(cell_header) if cell_header else None) or _baggage_cell(
            self.headers.get_all("baggage", [])
        )
        call.scenario = book.scenario.name
        call.cell = book.cell_of(attributed)
        return book

    def _serve(self, call: Call, body: bytes) -> Reply:
        book = self._attribute(call)
        if book is None or call.target is Target.OTHER:
            return self._upstream(call, body)
        if call.target is Target.TOOL:
            decision = book.tool_call(call.tool, call.upstream_url, call.cell)
            return self._serve_tool(call, body, book, decision)
        return self._serve_llm(call, body, book, book.llm_call(call.cell))

    def _serve_tool(self, call: Call, body: bytes, book: FaultBook, decision: Decision) -> Reply:
        call.call_index, call.matched = decision.call_index, decision.matched
        if decision.tool_fault is not None:
            index, fault = decision.tool_fault
            call.fired.append(tool_fault_label(index, fault))
            injected = fault_response(fault)
            if injected is not None:
                return _from_tool(injected)
            if not self.hold(slow_delay_ms(fault)):
                return Reply(503, [], drop=True)
            return self._upstream(call, body)
        reply = self._upstream(call, body)
        if decision.attacks and 200 <= reply.status < 300 and reply.chunks is None:
            rng = _rng(book.scenario, call.cell, f"tool:{call.tool}", decision.call_index)
            reply.body = poison_body(
                reply.body, reply.content_type, [a for _, a in decision.attacks], rng
            )
            call.fired += [attack_label(i, a) for i, a in decision.attacks]
        return reply

    def _serve_llm(self, call: Call, body: bytes, book: FaultBook, decision: Decision) -> Reply:
        call.call_index, call.matched = decision.call_index, decision.matched
        assert call.provider is not None
        provider = call.provider
        for index, attack in decision.attacks:
            if attack.payload:
                injected = llm.inject_context(provider, body, attack.payload)
                if injected != body:
                    body = injected
                    call.fired.append(attack_label(index, attack))
        if decision.llm_fault is None:
            return self._upstream(call, body)
        index, fault = decision.llm_fault
        label = llm_fault_label(index, fault)
        streaming = llm.is_streaming(body)
        before = llm.fault_before_upstream(fault, provider, streaming)
        if before is not None:
            call.fired.append(label)
            return _from_llm(before)
        reply = self._upstream(call, body)
        if not 200 <= reply.status < 300:
            return reply  # the upstream failed on its own: nothing to distort
        rng = _rng(book.scenario, call.cell, "llm", decision.call_index)
        call.fired.append(label)
        return _llm_fault_on(reply, fault, provider, rng)

    # -- upstreams: a real server, the mock LLM, a cassette

    def _upstream(self, call: Call, body: bytes) -> Reply:
        proxy = self.proxy
        if call.source == "mock":
            assert call.provider is not None
            reply = _from_llm(mock_llm.mock_reply(call.provider, call.rel_path, body))
            call.upstream_status = reply.status
            return reply
        key = RequestKey(call.cassette_target, call.method, call.rel_path, call.query, body)
        cassette = proxy.cassette
        if cassette is not None and (
            call.source == "cassette" or cassette.has_target(call.cassette_target)
        ):
            exchange = cassette.lookup(key)
            if exchange is None:
                request = key.describe()
                raise UpstreamFailure(
                    502,
                    "cassette_miss",
                    f"no recording of {call.method} {call.rel_path} in {cassette.source} "
                    "(record one with `flakestorm proxy --record PATH`)",
                    request=request,
                )
            call.upstream_status = exchange.status
            return Reply(
                exchange.status,
                list(exchange.headers),
                exchange.body,
                chunks=None if exchange.chunks is None else iter(exchange.chunks),
            )
        url = call.upstream_url
        response = proxy.request_upstream(self.command, url, self.forwarded_headers(), body)
        call.upstream_status = response.status_code
        headers = list(response.raw.headers.items())
        recorder = proxy.recorder if call.recorded else None
        if _is_sse(response):
            chunks = proxy.iter_upstream(response, url)
            if recorder is not None:
                chunks = _Recording(chunks, proxy, recorder, key, response.status_code, headers)
            return Reply(response.status_code, headers, chunks=chunks)
        data = proxy.read_upstream(response, url) if self.command != "HEAD" else b""
        if recorder is not None:
            recorder.record(key, response.status_code, headers, data)
        reply = Reply(response.status_code, headers, data)
        if self.command == "HEAD":
            response.close()
            reply.head_length = response.headers.get("Content-Length", "")
        return reply


def _llm_fault_on(
    reply: Reply, fault: LlmFault, provider: llm.Provider, rng: random.Random
) -> Reply:
    """Apply an LLM fault to a real (or mock, or replayed) 2xx reply, streamed or not."""
    if reply.chunks is not None:
        streamed = llm.fault_on_stream(fault, provider, reply.chunks, rng)
        return Reply(reply.status, reply.headers, chunks=_closing(streamed, reply.chunks))
    return _from_llm(
        llm.fault_on_reply(fault, provider, reply.status, tuple(reply.headers), reply.body, rng)
    )


def _closing(outer: Iterator[bytes], inner: Iterator[bytes]) -> Iterator[bytes]:
    """``outer``, closing ``inner`` (the upstream stream it reads) however it ends."""
    try:
        yield from outer
    finally:
        close = getattr(inner, "close", None)
        if close is not None:
            close()


class _Recording(Iterator[bytes]):
    """The upstream's chunks passed through, recorded once the stream has completed.

    Closed before its end (a ``truncated_response`` fault ended the agent's stream, or the
    agent hung up), it reads the rest of the upstream stream on another thread
    (:meth:`ChaosProxy.in_background`) and records the whole exchange then, so a later replay
    of the same request finds it and the agent's reply is not held up. A stream the upstream
    broke off is not recorded.
    """

    def __init__(
        self,
        chunks: Iterator[bytes],
        proxy: ChaosProxy,
        recorder: CassetteRecorder,
        key: RequestKey,
        status: int,
        headers: list[tuple[str, str]],
    ) -> None:
        self._chunks = chunks
        self._proxy = proxy
        self._recorder = recorder
        self._key, self._status, self._headers = key, status, headers
        self._seen: list[bytes] = []
        self._ended = False

    def __next__(self) -> bytes:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self._ended = True
            self._record()
            raise
        except BaseException:
            self._ended = True  # broken off: nothing to record
            raise
        self._seen.append(chunk)
        return chunk

    def close(self) -> None:
        if not self._ended:
            self._ended = True
            self._proxy.in_background(self._finish)

    def _finish(self) -> None:
        try:
            self._seen.extend(self._chunks)
        except Exception:  # broken off (UpstreamFailure): nothing to record
            logger.debug("upstream stream broke off while recording its rest", exc_info=True)
            return
        self._record()

    def _record(self) -> None:
        self._recorder.record(self._key, self._status, self._headers, chunks=self._seen)


def _reset(connection: socket.socket) -> None:
    """Drop the connection now (RST), as a crashed or timed-out server would."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _drain(
    connection: socket.socket, limit: int = 16 * 1024 * 1024, timeout_s: float = 1.0
) -> None:
    """Read and discard what the client is still sending, so it can read our error reply
    (closing with unread data would reset the connection under it)."""
    try:
        connection.shutdown(socket.SHUT_WR)
        connection.settimeout(timeout_s)
        while limit > 0:
            data = connection.recv(_CHUNK)
            if not data:
                return
            limit -= len(data)
    except OSError:
        pass


# --------------------------------------------------------------------------- control handlers


def _health(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> Reply:
    active = proxy.scenario
    return json_reply(
        {"status": "ok", "version": __version__, "scenario": active.name if active else None}
    )


def _put_scenario(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> Reply:
    try:
        doc = json.loads(body) if body.strip() else None
    except ValueError as exc:
        return error_reply(400, "invalid_scenario", f"scenario document: not JSON ({exc})")
    try:
        active = parse_scenario(doc)
    except ScenarioDocumentError as exc:
        return error_reply(400, "invalid_scenario", str(exc))
    has_faults = active.tool_faults or active.llm_faults or active.context_attacks
    proxy.activate(active)
    book = proxy.book
    return json_reply(
        {"scenario": active.name, "declared": list(book.declared()), "pass_through": not has_faults}
    )


def _delete_scenario(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> Reply:
    proxy.activate(None)
    return json_reply({"scenario": None})


def _reset_route(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> Reply:
    proxy.reset()
    return json_reply({"reset": True})


def _interactions(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> Reply:
    since_text = params.get("since")
    try:
        since = int(since_text) if since_text is not None else None
    except ValueError:
        return error_reply(400, "bad_request", f"since: expected an integer, got {since_text!r}")
    items = proxy.log.snapshot(params.get("scenario"))
    if since is not None:
        items = [i for i in items if i.seq >= since]
    next_seq = max((i.seq for i in items), default=(since or 0) - 1) + 1
    return json_reply(
        {
            "interactions": [i.to_document() for i in items],
            "next": next_seq,
            "dropped": proxy.log.dropped,
        }
    )


_CONTROL: dict[tuple[str, str], Callable[[ChaosProxy, bytes, Mapping[str, str]], Reply]] = {
    ("GET", "/health"): _health,
    ("PUT", "/scenario"): _put_scenario,
    ("DELETE", "/scenario"): _delete_scenario,
    ("POST", "/reset"): _reset_route,
    ("GET", "/interactions"): _interactions,
}


# --------------------------------------------------------------------------- CONNECT tunnels


class _Tunnel:
    """``CONNECT host:port``: decide, then relay bytes both ways until either side closes."""

    def __init__(self, handler: _Handler) -> None:
        self.handler = handler
        self.proxy = handler.proxy

    def serve(self) -> None:
        handler, proxy = self.handler, self.proxy
        handler.close_connection = True  # whatever happens, this connection ends with the tunnel
        started = time.perf_counter()
        seq = proxy.log.next_seq()
        host, port = _split_authority(handler.path)
        if host is None:
            message = f"CONNECT needs host:port, got {handler.path!r}"
            handler._write(error_reply(400, "bad_request", message), head=False)
            return
        tool, url = self._target(host, port)
        target = Target.TOOL if tool else Target.OTHER
        call = Call(target, "CONNECT", f"{host}:{port}", "", "", tool=tool)
        call.begin(proxy.log, seq, started)
        try:
            self._serve(call, host, port, url)
        finally:
            call.done(call.status)

    def _serve(self, call: Call, host: str, port: int, url: str) -> None:
        handler, proxy = self.handler, self.proxy
        book = handler._attribute(call)
        fault: ToolFault | None = None
        if book is not None and call.tool is not None:
            decision = book.tool_call(call.tool, url, call.cell)
            call.call_index, call.matched = decision.call_index, decision.matched
            if decision.tool_fault is not None:
                index, fault = decision.tool_fault
                call.fired.append(tool_fault_label(index, fault))
        tunnel = TOOL_MODES[fault.mode].tunnel(fault) if fault is not None else RELAY
        if fault is not None and tunnel.action is TunnelAction.REFUSE:
            message = fault.message or f"tunnel to {host}:{port} refused"
            call.done(fault.error_code)
            handler._write(error_reply(fault.error_code, "tunnel_refused", message), head=False)
            return
        if tunnel.action is TunnelAction.DROP:
            handler.hold(tunnel.delay_ms)
            call.done(None)
            _reset(handler.connection)
            return
        if tunnel.action is TunnelAction.DELAY and not handler.hold(tunnel.delay_ms):
            return
        failure: UpstreamFailure | None = None
        try:
            upstream = socket.create_connection((host, port), timeout=proxy.connect_timeout_s)
        except TimeoutError:
            failure = UpstreamFailure(504, "upstream_timeout", f"{host}:{port} did not accept")
        except OSError as exc:
            failure = UpstreamFailure(
                502, "upstream_unreachable", f"{host}:{port} is unreachable: {exc.strerror}"
            )
        if failure is not None:
            call.upstream_error = failure.summary
            call.done(failure.status)
            handler._write(failure.reply, head=False)
            return
        with upstream:
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            call.done(200)
            handler.wfile.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            handler.wfile.flush()
            if tunnel.action is TunnelAction.RESET:
                # a body cannot be forged inside TLS: the closest is a reset once established
                _reset(handler.connection)
                return
            self._relay(upstream)

    def _target(self, host: str, port: int) -> tuple[str | None, str]:
        """The tool a tunnel to host:port is a call of (see the module doc), and its URL."""
        https = f"https://{host}" if port == 443 else f"https://{host}:{port}"
        candidates = (f"{host}:{port}", host, https + "/", https)
        for fault in self.proxy.book.scenario.tool_faults:
            if fault.match_url:
                for candidate in candidates:
                    if tool_matches(fault, None, candidate):
                        return fault.tool, candidate
        for name, base in self.proxy.tools.items():
            parts = urlsplit(base)
            if parts.scheme == "https" and parts.hostname == host and (parts.port or 443) == port:
                return name, https + "/"
        return None, https + "/"

    def _relay(self, upstream: socket.socket) -> None:
        client = self.handler.connection
        # bytes the client sent right behind the CONNECT may sit in the handler's read buffer
        client.setblocking(False)
        try:
            pending = self.handler.rfile.read1(_CHUNK)
        except OSError:
            pending = b""
        finally:
            client.setblocking(True)
        if pending:
            upstream.sendall(pending)
        peers = {client: upstream, upstream: client}
        open_ = [client, upstream]
        while open_ and not self.proxy.stopping:
            readable, _, _ = select.select(open_, [], [], 0.5)
            for sock in readable:
                try:
                    data = sock.recv(_CHUNK)
                except OSError:
                    return
                if not data:
                    open_.remove(sock)
                    try:
                        peers[sock].shutdown(socket.SHUT_WR)
                    except OSError:
                        return
                    continue
                try:
                    peers[sock].sendall(data)
                except OSError:
                    return


def _split_authority(authority: str) -> tuple[str | None, int]:
    host, sep, port_text = authority.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        return None, 0
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    port = int(port_text)
    return (host, port) if 0 < port < 65536 else (None, 0)


# --------------------------------------------------------------------------- running it


def proxy_from_env(env: Mapping[str, str]) -> ChaosProxy:
    """The proxy the Docker image runs in ``FLAKESTORM_MODE=proxy`` (not started).

    ``FLAKESTORM_PROXY_PORT`` (8080), ``FLAKESTORM_LLM_UPSTREAM`` (URL, ``mock`` or
    ``cassette:PATH``), ``FLAKESTORM_TOOLS`` (``name=url,name=url``), ``FLAKESTORM_PROXY_TOKEN``,
    ``FLAKESTORM_PROXY_RECORD`` (a cassette path to record to); listens on 0.0.0.0.
    """
    port_text = env.get("FLAKESTORM_PROXY_PORT", "").strip() or str(DEFAULT_PORT)
    if not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise UsageError(f"FLAKESTORM_PROXY_PORT: {port_text!r} is not a port number (0-65535)")
    tools = parse_tools(
        [t for t in env.get("FLAKESTORM_TOOLS", "").split(",") if t.strip()], "FLAKESTORM_TOOLS"
    )
    return ChaosProxy(
        host=env.get("FLAKESTORM_PROXY_HOST", "0.0.0.0"),
        port=int(port_text),
        llm_upstream=env.get("FLAKESTORM_LLM_UPSTREAM", "").strip() or None,
        tools=tools,
        token=env.get("FLAKESTORM_PROXY_TOKEN", "").strip() or None,
        record=env.get("FLAKESTORM_PROXY_RECORD", "").strip() or None,
    )


def parse_tools(items: Iterable[str], where: str) -> dict[str, str]:
    """``["search=http://s", ...]`` -> ``{"search": "http://s"}``; a bad item is a UsageError."""
    tools = {}
    for item in items:
        name, sep, url = item.strip().partition("=")
        if not sep or not name.strip() or not url.strip():
            raise UsageError(f"{where}: {item!r} is not NAME=URL (e.g. search=http://search:8000)")
        tools[name.strip()] = _check_url(url.strip(), f"{where} {name.strip()}")
    return tools


def serve_from_env(
    env: Mapping[str, str],
    stop: threading.Event | None = None,
    on_ready: Callable[[ChaosProxy], None] | None = None,
) -> None:
    """Run :func:`proxy_from_env`'s proxy until ``stop`` is set (default: until SIGTERM or
    SIGINT, when called from the main thread)."""
    import signal

    proxy = proxy_from_env(env)
    if stop is None:
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
    with proxy:
        if on_ready is not None:
            on_ready(proxy)
        while not stop.wait(1.0):
            pass


def health_check(url: str, token: str | None = None, timeout_s: float = 3.0) -> int:
    """0 when the proxy at ``url`` answers ``/_flakestorm/health``, else 1 (a health command)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with requests.Session() as session:
            session.trust_env = False
            response = session.get(
                url.rstrip("/") + CONTROL_PREFIX + "/health", headers=headers, timeout=timeout_s
            )
            ok = response.status_code == 200 and response.json().get("status") == "ok"
    except (requests.RequestException, ValueError, AttributeError):
        return 1
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flakestorm.chaos.proxy [--health [URL]]``: the Docker image's proxy mode
    and health command (configured by environment, see :func:`proxy_from_env`)."""
    import os
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ
    if args[:1] == ["--health"]:
        port = env.get("FLAKESTORM_PROXY_PORT", "").strip() or str(DEFAULT_PORT)
        url = args[1] if len(args) > 1 else f"http://127.0.0.1:{port}"
        return health_check(url, env.get("FLAKESTORM_PROXY_TOKEN") or None)
    if args:
        sys.stderr.write("usage: python -m flakestorm.chaos.proxy [--health [URL]]\n")
        return 2

    def ready(proxy: ChaosProxy) -> None:
        sys.stdout.write(f"flakestorm proxy listening on {proxy.url}\n")
        sys.stdout.flush()

    try:
        serve_from_env(env, on_ready=ready)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return int(exc.exit_code)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
