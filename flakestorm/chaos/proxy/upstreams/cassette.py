"""Cassettes: real upstream exchanges recorded by the proxy and served back (SPEC §4.2).

``ChaosProxy(..., record=PATH)`` writes every exchange it has with a *real* upstream (LLM API
calls, model listings included, and tools; not mock replies, not injected faults: the reply as
the upstream sent it, also when a fault ended the agent's stream early) to ``PATH``;
``llm_upstream: cassette:PATH`` serves LLM calls from it, and serves a tool from it when the
cassette holds exchanges of that tool. A CI run then needs no LLM key and is deterministic.

The file is JSON lines: a header line ``{"flakestorm_cassette": 1}``, then one exchange per
line::

    {"key": "<sha256>", "target": "llm", "request": {"method": "POST",
     "path": "/v1/chat/completions", "query": "", "body": "<excerpt>"},
     "response": {"status": 200, "headers": [["Content-Type", "application/json"]],
                  "body": "..."}}

``body`` is text when the bytes are UTF-8, else ``body_b64``; a streamed reply is ``chunks``
(a list of the same) and is replayed as a stream, chunk by chunk.

Matching. An exchange is found by a hash of the normalised request:

- the target (``llm`` for any LLM API path, or ``tool:NAME``), the method, the
  upstream-relative path (``/v1/messages``, or the part after ``/tools/NAME``) and the query
  string with its parameters sorted;
- the body: JSON is canonicalised (keys sorted, no whitespace); in an LLM request its top-level
  ``user`` and ``metadata`` fields are dropped, because they carry per-user or per-run
  identifiers that do not change the answer (in a tool request they are kept: there ``user``
  is often what is asked about); ``stream`` and ``stream_options`` are kept, because they
  change the reply's shape. Other bodies are taken byte for byte;
- an MCP server's request (target ``mcp:SERVER``, SPEC §11) is matched without its JSON-RPC
  ``id`` and ``params._meta`` (they change with every client), and its recorded response is
  served answering the request's own ``id``; its GET stream is neither recorded nor served
  (405);
- headers are excluded (they carry keys, dates and request ids).

Request headers are never written to the file; the values of credential-like query parameters
(``apikey=``, ``access_token=`` ...) are written as ``REDACTED`` (:func:`redact_query`).

The key is taken on the request as it was sent upstream (after any ``injection_via_context``),
since that is what the recorded reply answers. When the same request was recorded several times,
the n-th identical request is served the n-th recording (the last one repeats), so an agent that
retries sees the same sequence as when it was recorded; :meth:`Cassette.rewind` starts over.

As upstreams: :class:`CassetteReplay` serves a cassette (``cassette:PATH``), and
:class:`CassetteRecording` records what the network upstream exchanges (``record=PATH``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode

from flakestorm.chaos import mcp
from flakestorm.chaos.proxy.reply import HttpResponse, UpstreamFailure
from flakestorm.chaos.proxy.upstreams.base import Upstream, UpstreamRequest
from flakestorm.errors import UsageError

logger = logging.getLogger("flakestorm.proxy")

CASSETTE_PREFIX = "cassette:"
"""``llm_upstream: cassette:PATH`` replays the cassette at PATH."""


def resolve_cassette(upstream: str | None, base_dir: Path) -> str | None:
    """``llm_upstream`` with a relative ``cassette:PATH`` made relative to ``base_dir`` (the
    config's directory); any other value as it is."""
    if upstream is None or not upstream.startswith(CASSETTE_PREFIX):
        return upstream
    path = Path(upstream[len(CASSETTE_PREFIX) :])
    return upstream if path.is_absolute() else f"{CASSETTE_PREFIX}{base_dir / path}"


MCP_TARGET = "mcp:"
"""How an MCP server's exchanges are keyed: ``mcp:SERVER``."""
FORMAT_VERSION = 1
VOLATILE_FIELDS = frozenset({"user", "metadata"})
"""Top-level JSON body fields ignored when matching a request."""
EXCERPT_CHARS = 500
CREDENTIAL_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|^code$", re.I)
"""Query parameters whose values a cassette does not store (see :func:`redact_query`)."""
REDACTED = "REDACTED"


UNRECORDED_HEADERS = frozenset(
    {
        "set-cookie",
        "authorization",
        "proxy-authorization",
        "openai-organization",
        "openai-project",
        "anthropic-organization-id",
        "x-request-id",
        "request-id",
        "cf-ray",
        "date",
    }
)
"""Response headers never written to a cassette: credentials, account ids and per-request
noise (a cassette is meant to be committed)."""


class CassetteError(UsageError):
    """A cassette file cannot be read or written."""


@dataclass(frozen=True)
class RequestKey:
    """The parts of a request that identify it in a cassette."""

    target: str
    """``llm``, ``tool:NAME`` or ``mcp:SERVER``."""
    method: str
    path: str
    query: str
    body: bytes

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (self.target, self.method.upper(), self.path, _sorted_query(self.query)):
            h.update(part.encode("utf-8") + b"\x00")
        if self.target.startswith(MCP_TARGET):
            h.update(_canonical_body(mcp.keyed(self.body), volatile=False))
        else:
            h.update(_canonical_body(self.body, volatile=self.target == "llm"))
        return h.hexdigest()

    def describe(self) -> dict[str, str]:
        """What a cassette miss shows: method, path, query and a body excerpt."""
        return {
            "target": self.target,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "body": excerpt(self.body),
        }


@dataclass(frozen=True)
class Exchange:
    """One recorded exchange: a request's key and the upstream's reply."""

    request: RequestKey
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    chunks: tuple[bytes, ...] | None = None
    """The reply's chunks when it was streamed (then ``body`` is empty)."""

    def to_document(self) -> dict[str, Any]:
        response: dict[str, Any] = {
            "status": self.status,
            "headers": [list(h) for h in self.headers],
        }
        if self.chunks is not None:
            response["chunks"] = [_encode(c) for c in self.chunks]
        else:
            response.update(_encode_field("body", self.body))
        request = self.request.describe()
        request.pop("target")
        request["query"] = redact_query(request["query"])
        return {
            "key": self.request.digest,
            "target": self.request.target,
            "request": request,
            "response": response,
        }

    @staticmethod
    def from_document(doc: Any) -> tuple[str, Exchange]:
        """``(key, exchange)`` from one cassette line (the request body is not kept)."""
        request, response = doc["request"], doc["response"]
        key = RequestKey(
            str(doc["target"]),
            str(request["method"]),
            str(request["path"]),
            str(request.get("query", "")),
            b"",
        )
        chunks = response.get("chunks")
        exchange = Exchange(
            key,
            int(response["status"]),
            tuple((str(k), str(v)) for k, v in response.get("headers", [])),
            _decode_field("body", response),
            None if chunks is None else tuple(_decode(c) for c in chunks),
        )
        return str(doc["key"]), exchange


def excerpt(body: bytes, limit: int = EXCERPT_CHARS) -> str:
    text = body.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + f"... ({len(body)} bytes)"


def redact_query(query: str) -> str:
    """``query`` with the values of credential-like parameters (``apikey``, ``access_token``,
    ``sig`` ...) replaced: a cassette is meant to be committed. Matching uses the digest of the
    real query, so a redacted cassette still replays."""
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(CREDENTIAL_PARAM.search(name) for name, _ in pairs):
        return query
    return urlencode(
        [(name, REDACTED if CREDENTIAL_PARAM.search(name) else value) for name, value in pairs]
    )


def _sorted_query(query: str) -> str:
    return urlencode(sorted(parse_qsl(query, keep_blank_values=True)))


def _canonical_body(body: bytes, volatile: bool) -> bytes:
    """The body as matched; ``volatile``: drop :data:`VOLATILE_FIELDS` (LLM requests)."""
    if not body:
        return b""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if volatile and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in VOLATILE_FIELDS}
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _encode(data: bytes) -> str | dict[str, str]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def _decode(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return base64.b64decode(value["b64"])


def _encode_field(name: str, data: bytes) -> dict[str, str]:
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(data).decode("ascii")}


def _decode_field(name: str, doc: Any) -> bytes:
    if f"{name}_b64" in doc:
        return base64.b64decode(doc[f"{name}_b64"])
    return str(doc.get(name, "")).encode("utf-8")


class Cassette:
    """Recorded exchanges to serve back, looked up by request. Thread-safe."""

    def __init__(self, exchanges: Iterable[tuple[str, Exchange]] = (), source: str = "") -> None:
        self.source = source
        self._by_key: dict[str, list[Exchange]] = {}
        self._targets: set[str] = set()
        for key, exchange in exchanges:
            self._by_key.setdefault(key, []).append(exchange)
            self._targets.add(exchange.request.target)
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read a cassette file; raise :class:`CassetteError` saying what is wrong where."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CassetteError(f"cassette {path}: cannot read it ({exc.strerror})") from exc
        exchanges = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                if number == 1 and isinstance(doc, dict) and "flakestorm_cassette" in doc:
                    if doc["flakestorm_cassette"] != FORMAT_VERSION:
                        raise ValueError(f"unsupported version {doc['flakestorm_cassette']!r}")
                    continue
                key, exchange = Exchange.from_document(doc)
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                raise CassetteError(
                    f"{path}:{number}: not a cassette exchange ({type(exc).__name__}: {exc})"
                ) from None
            exchanges.append((key, exchange))
        return cls(exchanges, source=str(path))

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_key.values())

    def has_target(self, target: str) -> bool:
        """Whether any exchange of ``target`` (``llm``, ``tool:NAME``) was recorded."""
        return target in self._targets

    def lookup(self, key: RequestKey) -> Exchange | None:
        """The recording for this request (the n-th identical request gets the n-th one)."""
        digest = key.digest
        with self._lock:
            found = self._by_key.get(digest)
            if not found:
                return None
            n = self._served.get(digest, 0)
            self._served[digest] = n + 1
        return found[min(n, len(found) - 1)]

    def rewind(self) -> None:
        """Serve every request's recordings from the first again."""
        with self._lock:
            self._served.clear()


class CassetteRecorder:
    """Appends exchanges to a cassette file as they complete (the file is started afresh)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")
            self._file.write(json.dumps({"flakestorm_cassette": FORMAT_VERSION}) + "\n")
            self._file.flush()
        except OSError as exc:
            raise CassetteError(f"cassette {self.path}: cannot write it ({exc.strerror})") from exc

    def record(
        self,
        request: RequestKey,
        status: int,
        headers: Sequence[tuple[str, str]],
        body: bytes = b"",
        chunks: Sequence[bytes] | None = None,
    ) -> None:
        kept = tuple((k, v) for k, v in headers if k.lower() not in UNRECORDED_HEADERS)
        exchange = Exchange(request, status, kept, body, None if chunks is None else tuple(chunks))
        line = json.dumps(exchange.to_document(), ensure_ascii=False) + "\n"
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


# --------------------------------------------------------------------------- as upstreams


def request_key(request: UpstreamRequest) -> RequestKey:
    """The cassette key of a request as it goes upstream."""
    call = request.call
    return RequestKey(call.cassette_target, call.method, call.rel_path, call.query, request.body)


class CassetteReplay:
    """``llm_upstream: cassette:PATH``: LLM API calls, and the calls of every tool the cassette
    holds exchanges of, are served from it; anything else goes on to ``network``."""

    def __init__(self, cassette: Cassette, network: Upstream) -> None:
        self.cassette = cassette
        self.network = network

    @classmethod
    def load(cls, path: str) -> Callable[[Upstream], CassetteReplay]:
        """Read the cassette now (a :class:`CassetteError` at start-up); replay it over the
        network upstream it is given."""
        cassette = Cassette.load(path)
        return lambda network: cls(cassette, network)

    def send(self, request: UpstreamRequest) -> HttpResponse:
        call = request.call
        cassette = self.cassette
        if not call.local and not cassette.has_target(call.cassette_target):
            return self.network.send(request)
        if call.mcp is not None and call.method == "GET":
            return HttpResponse(405, [("Allow", "POST")])  # no server stream to replay
        key = request_key(request)
        exchange = cassette.lookup(key)
        if exchange is None:
            raise UpstreamFailure(
                502,
                "cassette_miss",
                f"no recording of {call.method} {call.rel_path} in {cassette.source} "
                "(record one with `flakestorm proxy --record PATH`)",
                request=key.describe(),
            )
        call.upstream_status = exchange.status
        if call.mcp is not None:  # the recorded response, answering this request's id
            body = exchange.body if exchange.chunks is None else b"".join(exchange.chunks)
            headers = [(k, v) for k, v in exchange.headers if k.lower() != "content-length"]
            content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
            return HttpResponse(
                exchange.status, headers, mcp.answering(body, content_type, request.body)
            )
        return HttpResponse(
            exchange.status,
            list(exchange.headers),
            exchange.body,
            chunks=None if exchange.chunks is None else iter(exchange.chunks),
        )

    def rewind(self) -> None:
        self.cassette.rewind()


class CassetteRecording:
    """``record=PATH`` (``--record``): every exchange ``network`` has with a real upstream for
    an LLM API or tool call is written to the recorder, as the upstream sent it."""

    def __init__(
        self,
        network: Upstream,
        recorder: CassetteRecorder,
        in_background: Callable[[Callable[[], None]], None],
    ) -> None:
        self.network = network
        self.recorder = recorder
        self.in_background = in_background

    def send(self, request: UpstreamRequest) -> HttpResponse:
        reply = self.network.send(request)
        if not request.call.recorded or (request.call.mcp and request.call.method == "GET"):
            return reply  # an MCP server's GET stream is long-lived: not an exchange
        key = request_key(request)
        if reply.chunks is not None:
            reply.chunks = _RecordedStream(reply.chunks, self, key, reply.status, reply.headers)
        else:
            self.recorder.record(key, reply.status, reply.headers, reply.body)
        return reply


class _RecordedStream(Iterator[bytes]):
    """The upstream's chunks passed through, recorded once the stream has completed.

    Closed before its end (a ``truncated_response`` fault ended the agent's stream, or the
    agent hung up), it reads the rest of the upstream stream on another thread
    (the proxy's ``in_background``) and records the whole exchange then, so a later replay
    of the same request finds it and the agent's reply is not held up. A stream the upstream
    broke off is not recorded.
    """

    def __init__(
        self,
        chunks: Iterator[bytes],
        recording: CassetteRecording,
        key: RequestKey,
        status: int,
        headers: list[tuple[str, str]],
    ) -> None:
        self._chunks = chunks
        self._recording = recording
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
            self._recording.in_background(self._finish)

    def _finish(self) -> None:
        try:
            self._seen.extend(self._chunks)
        except Exception:  # broken off (UpstreamFailure): nothing to record
            logger.debug("upstream stream broke off while recording its rest", exc_info=True)
            return
        self._record()

    def _record(self) -> None:
        self._recording.recorder.record(self._key, self._status, self._headers, chunks=self._seen)
