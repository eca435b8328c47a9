"""An agent behind an HTTP endpoint (``agent.type: http``).

One pooled ``requests.Session`` per agent, shared by all worker threads. Every failure comes
back as a :class:`Reply` with an :class:`AgentErrorKind`; no exception from requests or urllib3
leaves this module.

Decisions worth knowing:

- ``agent.timeout`` is a wall-clock deadline on the whole invocation: connect, headers and the
  body however slowly it trickles (:mod:`flakestorm.agents.deadline` cuts the connection when it
  passes). The body is read streamed, in chunks, against that deadline and against
  ``agent.max_response_bytes`` (reading stops at the cap: TOO_LARGE).
- A JSON reply (by content type, or because ``response_path`` is set) must be UTF-8; other text
  is decoded with its declared charset, else as strict UTF-8. Undecodable bytes make the reply
  UNPARSEABLE rather than silently mangled text the invariants would then judge.
- The session keeps no cookies (cells must not share state through them) and ignores proxy
  environment variables (``HTTP_PROXY`` is meant for the agent's own traffic, not ours).
- ``Reply.raw`` is the body decoded leniently and capped at :data:`RAW_CAP` characters.
"""

from __future__ import annotations

import dataclasses
import http.client
import http.cookiejar
import json
import re
import socket
import threading
import time
import urllib.parse
from typing import Any

import requests
import urllib3

from flakestorm import __version__
from flakestorm.agents import NO_CALL, Call, Reply, streamed, wire
from flakestorm.agents.attribution import outgoing
from flakestorm.agents.closing import Closing
from flakestorm.agents.deadline import DeadlineAdapter, Expired, body_chunks, deadline
from flakestorm.agents.extraction import extract_auto, extract_path
from flakestorm.agents.request import RequestShape, padding
from flakestorm.agents.wire import WireRequest
from flakestorm.config import AgentConfig
from flakestorm.errors import AgentError, AgentErrorKind
from flakestorm.redaction import Redactor, active

RAW_CAP = 65_536
"""Characters of the raw reply kept for reports."""

POOL_SIZE = 64
"""Connections kept per host: enough for ``advanced.concurrency`` up to 64 without reconnecting."""

PROMPT = "{prompt}"
CONTEXT = "{context}"
SESSION_ID = "{session_id}"
_PLACEHOLDER = re.compile(r"\{(prompt|context)\}")
_PLACEHOLDER_IN_JSON = re.compile(r'"\{(prompt|context)\}"|\{(prompt|context)\}')


def takes_context(template: str | dict[str, Any] | list[Any]) -> bool:
    """Whether ``request_template`` has a ``{context}`` placeholder (a replayed session's
    ``context`` goes there; otherwise it is prepended to the input)."""
    return CONTEXT in (template if isinstance(template, str) else json.dumps(template))


def render_template(
    template: str | dict[str, Any] | list[Any],
    prompt: str,
    context: str = "",
    session_id: str = "",
) -> bytes:
    """The request body for ``prompt`` (SPEC §2.1 ``request_template``); ``{context}`` is
    filled the same way with ``context`` (a replayed session's, SPEC §7; else empty).

    A dict/list template is walked: a string that is exactly ``"{prompt}"`` becomes the prompt,
    ``{prompt}`` inside a longer string is replaced textually; the result is serialised as JSON.
    A string template is JSON text: ``"{prompt}"`` (quotes included) becomes the prompt as a JSON
    string, a bare ``{prompt}`` (inside a JSON string) the prompt's escaped content.
    ``{session_id}`` (``agent.session: {template: true}``) is replaced by ``session_id``
    (hex digits: nothing to escape) wherever it appears, before the prompt goes in.
    """
    values = {"prompt": prompt, "context": context}
    if isinstance(template, str):

        def substitute(match: re.Match[str]) -> str:
            quoted = json.dumps(values[match.group(1) or match.group(2)])
            return quoted if match.group(0).startswith('"') else quoted[1:-1]

        text = template.replace(SESSION_ID, session_id) if session_id else template
        return _PLACEHOLDER_IN_JSON.sub(substitute, text).encode("utf-8")
    # ensure_ascii: a prompt may hold lone surrogates (encoding attacks); escaped, they stay valid
    return json.dumps(_fill(template, prompt, context, session_id)).encode("ascii")


def _fill(node: Any, prompt: str, context: str, session_id: str = "") -> Any:
    if isinstance(node, str):
        if session_id:
            node = node.replace(SESSION_ID, session_id)
        if node in (PROMPT, CONTEXT):
            return prompt if node == PROMPT else context
        values = {"prompt": prompt, "context": context}
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], node)
    if isinstance(node, dict):
        return {key: _fill(value, prompt, context, session_id) for key, value in node.items()}
    if isinstance(node, list):
        return [_fill(value, prompt, context, session_id) for value in node]
    return node


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


def new_session(pool_size: int = POOL_SIZE) -> requests.Session:
    """A session for talking to agents and their helpers: pooled, cookieless, no env proxies,
    its exchanges bounded by the calling thread's :func:`flakestorm.agents.deadline.deadline`."""
    session = requests.Session()
    session.trust_env = False
    session.cookies.set_policy(_NoCookies())
    session.headers["User-Agent"] = f"flakestorm/{__version__}"
    adapter = DeadlineAdapter(pool_connections=4, pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class HttpAgent(Closing):
    """Invokes an HTTP agent: one request per prompt, the answer taken from the reply."""

    def __init__(self, config: AgentConfig, session: requests.Session | None = None) -> None:
        self.config = config
        self._session = session or new_session()
        self._timeout_s = config.timeout / 1000
        self._redact = Redactor(config.headers.values())
        self._headers = {"Accept": "application/json, */*;q=0.5"}
        if not any(name.lower() == "content-type" for name in config.headers):
            self._headers["Content-Type"] = "application/json"
        self._headers.update(config.headers)

    def invoke(self, prompt: str, call: Call = NO_CALL) -> Reply:
        if call.request is not None:
            return self._invoke_shaped(prompt, call, call.request)
        if self.config.stream is not None:
            return streamed.invoke(self, prompt, call)
        started = time.perf_counter()
        status: int | None = None
        raw = b""
        try:
            with deadline(self._timeout_s) as limit:
                try:
                    response = self._send(prompt, call, started)
                    status = response.status_code
                    try:
                        raw = self._read(response, started + self._timeout_s)
                    except AgentError:
                        if 200 <= status < 300:
                            raise
                        # a non-2xx reply is a STATUS error however its body ends (too long, ...)
                    if limit.expired:  # a close-delimited body cut at the deadline looks whole
                        raise self._timed_out(status)
                    output = self._answer(
                        status, response.reason, response.headers.get("Content-Type", ""), raw
                    )
                except AgentError as exc:
                    if limit.expired and exc.kind is not AgentErrorKind.TOO_LARGE:
                        raise self._timed_out(status) from exc
                    raise
        except AgentError as exc:
            return self._failed(exc, started, status, raw)
        return Reply(output=output, latency_ms=_ms_since(started), status=status, raw=_lenient(raw))

    def _failed(self, exc: AgentError, started: float, status: int | None, raw: bytes) -> Reply:
        """The reply of an invocation that failed with ``exc`` (its status, else the reply's)."""
        return Reply(
            output=None,
            latency_ms=_ms_since(started),
            status=exc.status if exc.status is not None else status,
            raw=_lenient(raw),
            error=exc.kind,
            error_message=self._redact(str(exc)),
        )

    def close(self) -> None:
        self._session.close()

    # -- the three steps

    def _send(self, prompt: str, call: Call, started: float) -> requests.Response:
        headers = dict(self._headers)
        headers.update(call.headers)
        headers = outgoing(call.cell_id, call.scenario, call.seed, headers)
        session = self.config.session
        if call.session and session is not None and session.header is not None:
            headers[session.header] = call.session
        target = f"{self.config.method} {self.config.endpoint}"
        try:
            response = self._session.request(
                self.config.method,
                self.config.endpoint,
                data=render_template(
                    self.config.request_template, prompt, call.context, call.session
                ),
                headers=headers,
                timeout=(self._timeout_s, self._timeout_s),
                stream=True,
            )
        except requests.Timeout as exc:
            raise self._timed_out() from exc
        except requests.RequestException as exc:
            raise AgentError(
                AgentErrorKind.CONNECTION, f"{target} failed: {network_reason(exc)}"
            ) from exc
        if time.perf_counter() - started >= self._timeout_s:
            response.close()
            raise self._timed_out()
        return response

    def _read(self, response: requests.Response, deadline: float) -> bytes:
        """The body, read in chunks against the deadline and the size cap."""
        cap = self.config.max_response_bytes
        try:
            declared = int(response.headers.get("Content-Length", ""))
        except ValueError:
            declared = -1
        if declared > cap:
            response.close()
            raise self._too_large(response.status_code, f"it declares {declared} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in body_chunks(response, deadline):
                size += len(chunk)
                if size > cap:
                    raise self._too_large(response.status_code, "reading stopped there")
                chunks.append(chunk)
        except Expired as exc:
            raise self._timed_out(response.status_code) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise AgentError(
                AgentErrorKind.CONNECTION,
                f"the connection failed while reading the reply: {network_reason(exc)}",
                response.status_code,
            ) from exc
        finally:
            response.close()
        return b"".join(chunks)

    def _answer(
        self, status: int, reason: str | None, content_type: str, raw: bytes, method: str = ""
    ) -> str:
        if not 200 <= status < 300:
            reason = f" {reason}" if reason else ""
            raise AgentError(
                AgentErrorKind.STATUS,
                f"{method or self.config.method} {self.config.endpoint} returned HTTP "
                f"{status}{reason}",
                status,
            )
        is_json = _is_json(content_type)
        path = self.config.response_path
        if is_json or path is not None:
            body = _parse_json(raw, status, content_type, path)
            return extract_path(body, path) if path is not None else _auto(body, raw)
        text = _decode(raw, content_type, status)
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            return text
        return _auto(body, raw)

    # -- a described request (request-level mutations)

    def _invoke_shaped(self, prompt: str, call: Call, shape: RequestShape) -> Reply:
        """Send the request ``shape`` describes (``copies`` of it at once) byte by byte;
        the reply is the worst of the copies: a failure, else a rejection, else the first."""
        started = time.perf_counter()
        request = self._wire_request(prompt, call, shape)
        deadline = started + self._timeout_s
        if shape.copies <= 1:
            return self._shaped_reply(request, deadline, started)
        replies: list[Reply] = [Reply(output=None, latency_ms=0.0)] * shape.copies

        def one(i: int) -> None:
            replies[i] = self._shaped_reply(request, deadline, started)

        threads = [
            threading.Thread(target=one, args=(i,), daemon=True) for i in range(shape.copies)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        worst = max(replies, key=_badness)
        failed = sum(1 for r in replies if _badness(r) == _badness(worst))
        if worst.error is None:
            return worst
        message = f"{failed} of {shape.copies} concurrent copies: {worst.error_message}"
        return dataclasses.replace(worst, error_message=message)

    def _shaped_reply(self, request: WireRequest, deadline: float, started: float) -> Reply:
        raw = b""
        status: int | None = None
        try:
            sent = wire.send(request, deadline, self.config.max_response_bytes)
            status, raw = sent.status, sent.body
            if self.config.stream is not None and 200 <= status < 300:
                return streamed.whole(self.config.stream, raw, status, _ms_since(started))
            output = self._answer(sent.status, sent.reason, sent.content_type, raw, request.method)
        except AgentError as exc:
            return self._failed(exc, started, status, raw)
        return Reply(output=output, latency_ms=_ms_since(started), status=status, raw=_lenient(raw))

    def _wire_request(self, prompt: str, call: Call, shape: RequestShape) -> WireRequest:
        headers = dict(self._headers)
        headers["User-Agent"] = f"flakestorm/{__version__}"
        headers.update(call.headers)
        headers = outgoing(call.cell_id, "", call.seed, headers)
        session = self.config.session
        if call.session and session is not None and session.header is not None:
            headers[session.header] = call.session
        if shape.content_type is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            if shape.content_type:
                headers["Content-Type"] = shape.content_type
        body = render_template(
            self.config.request_template,
            prompt + padding(shape.pad_bytes),
            session_id=call.session,
        )
        if shape.nest_depth or shape.extra_keys:
            body = _reshape_body(body, shape.nest_depth, shape.extra_keys)
        url = self.config.endpoint
        if shape.query:
            joiner = "&" if urllib.parse.urlsplit(url).query else "?"
            url += joiner + urllib.parse.urlencode(shape.query)
        return WireRequest(
            url=url,
            method=shape.method or self.config.method,
            headers=(*headers.items(), *shape.headers),
            body=body,
            http_version=shape.http_version,
            chunked=shape.chunked,
            expect_continue=shape.expect_continue,
            body_pieces=shape.body_pieces,
            piece_pause_ms=shape.piece_pause_ms,
        )

    # -- errors

    def _timed_out(self, status: int | None = None) -> AgentError:
        return AgentError(
            AgentErrorKind.TIMEOUT,
            f"no complete reply from {self.config.method} {self.config.endpoint} "
            f"within {self.config.timeout} ms (agent.timeout)",
            status,
        )

    def _too_large(self, status: int, detail: str) -> AgentError:
        return AgentError(
            AgentErrorKind.TOO_LARGE,
            f"the reply is larger than agent.max_response_bytes "
            f"({self.config.max_response_bytes} bytes); {detail}",
            status,
        )


def _reshape_body(body: bytes, depth: int, extra_keys: int) -> bytes:
    """A JSON body nested ``depth`` objects deep, with ``extra_keys`` more keys on top."""
    try:
        value: Any = json.loads(body)
    except ValueError:
        value = body.decode("utf-8", errors="replace")
    if extra_keys:
        top = value if isinstance(value, dict) else {"body": value}
        value = {**top, **{f"k{i}": i for i in range(extra_keys)}}
    text = json.dumps(value)
    # nested by text, not recursion: thousands of levels deep
    return ('{"a":' * depth + text + "}" * depth).encode("ascii")


def _badness(reply: Reply) -> int:
    """How bad a reply of concurrent copies is: no answer, a 5xx, a rejection, an answer."""
    if reply.error is None:
        return 0
    if reply.status is not None and 400 <= reply.status < 500:
        return 1
    return 2


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _parse_json(raw: bytes, status: int, content_type: str, path: str | None) -> Any:
    why = f"agent.response_path is set ({path})" if path is not None else content_type
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"the reply is not valid UTF-8 (byte {exc.start}); a JSON reply must be UTF-8",
            status,
        ) from exc
    try:
        return json.loads(text)
    except RecursionError:
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"the reply is JSON nested too deeply to read, expected JSON because {why}",
            status,
        ) from None
    except ValueError as exc:
        excerpt = active()(text)[:80].replace("\n", " ")  # redact, then cut
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"the reply is not valid JSON ({exc}), expected JSON because {why}; "
            f"it starts with {excerpt!r}",
            status,
        ) from exc


def _decode(raw: bytes, content_type: str, status: int) -> str:
    charset = "utf-8-sig"
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    try:
        return raw.decode(charset)
    except LookupError:
        return raw.decode("utf-8", errors="replace")
    except UnicodeDecodeError as exc:
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"the reply is not valid {charset.removesuffix('-sig')} (byte {exc.start})",
            status,
        ) from exc


def _auto(body: Any, raw: bytes) -> str:
    found = extract_auto(body)
    if found is not None:
        return found
    if isinstance(body, str):
        return body
    return _lenient(raw, cap=None)


def _lenient(raw: bytes, cap: int | None = RAW_CAP) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text if cap is None else text[:cap]


def network_reason(exc: BaseException) -> str:
    """The innermost useful reason of a requests/urllib3 error, e.g. ``connection refused``."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        known = _KNOWN_REASONS.get(type(node))
        if known is not None:
            return known
        if isinstance(node, socket.gaierror):
            return f"cannot resolve the host ({node.strerror})"
        nested = next((a for a in node.args if isinstance(a, BaseException)), None)
        reason = getattr(node, "reason", None)
        node = (
            reason
            if isinstance(reason, BaseException)
            else nested or node.__cause__ or node.__context__
        )
    text = str(exc)
    return text if len(text) <= 300 else text[:300] + "..."


_KNOWN_REASONS: dict[type[BaseException], str] = {
    ConnectionRefusedError: "connection refused",
    ConnectionResetError: "connection reset by the server",
    ConnectionAbortedError: "connection aborted",
    TimeoutError: "timed out",
    http.client.RemoteDisconnected: "the server closed the connection without a reply",
    http.client.IncompleteRead: "the server closed the connection mid-reply",
}


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
