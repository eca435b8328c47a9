"""The stdio MCP relay (``flakestorm mcp-stdio --name NAME -- CMD ...``, SPEC §11): between an
agent and a stdio MCP server, with the same faults as over streamable HTTP.

The agent starts the relay in place of the server (its MCP configuration changes only the
command); the relay starts the real server and relays newline-delimited JSON-RPC both ways.
Each *request* the agent sends (a message with a method and an id) is sent to the run's chaos
proxy (``FLAKESTORM_PROXY_URL``) as a call, ``POST /mcp-relay/ID/call`` marked with
``X-Flakestorm-Mcp: NAME``: the proxy reads, decides, faults and logs every ``tools/call``
exactly as it does for a streamable HTTP server (:mod:`mcp_calls`): one decision engine, and
the run's delivery proof counts the relay's calls. When the request must reach the server, the
proxy hands it back to the relay, which polls for it (``GET /mcp-relay/ID/next``), writes it to
the server and posts the server's response back (:mod:`~flakestorm.chaos.proxy.relays`). The
relay only ever connects to the proxy, never the other way: a proxy service in another
container (``proxy.url``) serves it as the in-process proxy does. What the proxy answers goes
back to the agent as lines. A call that gets no answer — a fault dropped it (``timeout``, after
its hold), the proxy failed, or the server exited before answering — is answered for its id
with a JSON-RPC error saying why, so the agent's client fails the call at once instead of
waiting for its own timeout; a server that exits or can no longer be written to is logged.
Notifications and the agent's answers to server requests go straight to the
server; everything the server sends on its own goes straight to the agent.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import secrets
import subprocess
import threading
from collections.abc import Sequence
from typing import IO, Any

import requests
import requests.adapters

from flakestorm.chaos import mcp
from flakestorm.chaos.proxy.relays import KEY_HEADER, POLL_S, PREFIX
from flakestorm.chaos.proxy.routes import MCP_HEADER
from flakestorm.errors import UsageError

POOL_SIZE = 64
"""Connections to the proxy kept alive at once (requests' default of 10 is less than the
requests an MCP client may have in flight; beyond it, connections are dropped with a warning)."""

logger = logging.getLogger("flakestorm.mcp_stdio")

CALL_TIMEOUT_S = 3600.0
"""How long the relay waits for the proxy to answer one request (faults hold calls)."""
ORPHAN_CHECK_S = 0.2
"""How often a request written to the server checks that the server still runs."""
RETRY_S = 1.0
"""How long the relay waits before polling again a proxy that did not answer its poll."""


class StdioRelay:
    """One relay: ``StdioRelay(name, command, proxy_url, stdin, stdout).run()`` until the agent
    closes its stdin or the server exits; returns the server's exit code."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        proxy_url: str,
        agent_in: IO[bytes],
        agent_out: IO[bytes],
    ) -> None:
        if not command:
            raise UsageError("mcp-stdio: give the server's command after --")
        self.name = name
        self.command = list(command)
        self.proxy_url = proxy_url.rstrip("/")
        self.agent_in, self.agent_out = agent_in, agent_out
        self._out_lock = threading.Lock()
        self._in_lock = threading.Lock()
        self._pending: dict[str, queue.Queue[bytes]] = {}
        self._pending_lock = threading.Lock()
        self._session = requests.Session()
        self._session.trust_env = False  # NO_PROXY must not route around the proxy
        # a thread per request in flight, each keeping its connection to the proxy alive
        pooled = requests.adapters.HTTPAdapter(pool_maxsize=POOL_SIZE)
        self._session.mount("http://", pooled)
        self._session.mount("https://", pooled)
        self._server: subprocess.Popen[bytes] | None = None
        self._stopped = threading.Event()
        self._dead = threading.Event()
        """The server exited or can no longer be written to (logged once)."""
        self.relay_id = secrets.token_hex(16)
        """How the proxy knows this relay (random: no other relay can take its requests)."""
        self._base = f"{self.proxy_url}{PREFIX}{self.relay_id}"

    def run(self) -> int:
        try:
            server = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            raise UsageError(f"mcp-stdio: cannot start {self.command[0]!r}: {exc}") from exc
        self._server = server
        threads = [
            threading.Thread(target=self._poll, daemon=True),
            threading.Thread(target=self._from_server, daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            for line in self.agent_in:
                if line.strip():
                    self._from_agent(line)
        finally:
            self._stopped.set()
            with contextlib.suppress(OSError):
                assert server.stdin is not None
                server.stdin.close()
            code = server.wait()
            threads[1].join(timeout=5)  # the server's output read to its end
            with contextlib.suppress(OSError):
                assert server.stdout is not None
                server.stdout.close()
            self._session.close()
        return code

    # -- agent -> server

    def _from_agent(self, line: bytes) -> None:
        request = mcp.read_request(line)
        if request is None or request.id is None:  # a response or a notification
            self._to_server(line)
            return
        threading.Thread(target=self._through_proxy, args=(line, request.id), daemon=True).start()

    def _through_proxy(self, line: bytes, request_id: Any) -> None:
        try:
            reply = self._session.post(
                f"{self._base}/call",
                data=line.strip(),
                headers={"Content-Type": mcp.JSON_TYPE, MCP_HEADER: self.name},
                timeout=CALL_TIMEOUT_S,
            )
        except requests.RequestException as exc:  # a fault dropped the call, or the proxy died
            logger.warning("mcp-stdio %s: no answer (%s)", self.name, type(exc).__name__)
            self._fail(request_id, f"the call got no answer ({type(exc).__name__}: dropped)")
            return
        messages = mcp.messages_of(reply.content, reply.headers.get("Content-Type", ""))
        if not messages:
            why = f"the call got no answer (HTTP {reply.status_code} from flakestorm)"
            self._fail(request_id, why)
            return
        for message in messages:
            self._to_agent(mcp.message_bytes(message))

    def _fail(self, request_id: Any, why: str) -> None:
        """Answer the agent's request ``request_id`` with a JSON-RPC error: ``why``."""
        self._to_agent(error_response(request_id, f"flakestorm mcp-stdio {self.name}: {why}"))

    def _to_server(self, line: bytes) -> bool:
        """Write ``line`` to the server; False (logged once) when it can no longer take it."""
        server = self._server
        assert server is not None and server.stdin is not None
        with self._in_lock:
            try:
                server.stdin.write(line.rstrip(b"\r\n") + b"\n")
                server.stdin.flush()
            except OSError as exc:
                self._gone(f"cannot write to it ({exc.strerror or type(exc).__name__})")
                return False
        return True

    def _gone(self, why: str) -> None:
        """Log, once, that the server cannot be reached any more."""
        with self._pending_lock:
            if self._dead.is_set():
                return
            self._dead.set()
            code = self._server.poll() if self._server is not None else None
            exited = f"exited with code {code}" if code is not None else "is not answering"
            logger.warning("mcp-stdio %s: the MCP server %s: %s", self.name, exited, why)

    # -- server -> agent

    def _from_server(self) -> None:
        server = self._server
        assert server is not None and server.stdout is not None
        for line in server.stdout:
            if not line.strip():
                continue
            waiting = self._waiting_for(line)
            if waiting is not None:
                waiting.put(line)
            else:
                self._to_agent(line)

    def _waiting_for(self, line: bytes) -> queue.Queue[bytes] | None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return None
        with self._pending_lock:
            return self._pending.pop(_key(message["id"]), None)

    def _to_agent(self, line: bytes) -> None:
        with self._out_lock, contextlib.suppress(OSError):
            self.agent_out.write(line.rstrip(b"\r\n") + b"\n")
            self.agent_out.flush()

    # -- the proxy's side: the requests it hands back, written to the server

    def _poll(self) -> None:
        """Take the requests the proxy hands back (each answered on a thread of its own)."""
        while not self._stopped.is_set():
            try:
                reply = self._session.get(f"{self._base}/next", timeout=POLL_S + 30)
            except requests.RequestException:
                self._stopped.wait(RETRY_S)  # the proxy is not up (yet, or any more)
                continue
            if reply.status_code != 200:
                if reply.status_code != 204:
                    self._stopped.wait(RETRY_S)
                continue
            key = reply.headers.get(KEY_HEADER, "")
            threading.Thread(target=self._answer, args=(key, reply.content), daemon=True).start()

    def _answer(self, key: str, body: bytes) -> None:
        response = self.exchange(body)
        try:
            self._session.post(
                f"{self._base}/answer/{key}", data=(response or b"").strip(), timeout=30
            )
        except requests.RequestException as exc:
            logger.warning("mcp-stdio %s: answer not taken (%s)", self.name, type(exc).__name__)

    def exchange(self, body: bytes) -> bytes | None:
        """Write one request to the server and return its response: None for a message that
        gets none, a JSON-RPC error when the server is gone before answering it."""
        request = mcp.read_request(body)
        if request is None or request.id is None:
            self._to_server(body)
            return None
        answer: queue.Queue[bytes] = queue.Queue(maxsize=1)
        with self._pending_lock:
            self._pending[_key(request.id)] = answer
        if not self._to_server(body):
            return self._orphaned(request.id)
        while True:
            try:
                return answer.get(timeout=ORPHAN_CHECK_S)
            except queue.Empty:
                if self._server is not None and self._server.poll() is not None:
                    return self._orphaned(request.id)

    def _orphaned(self, request_id: Any) -> bytes:
        """The error a request the server will never answer gets (the server is gone)."""
        with self._pending_lock:
            self._pending.pop(_key(request_id), None)
        self._gone("a request was left without an answer")
        code = self._server.poll() if self._server is not None else None
        why = f"exited (code {code})" if code is not None else "cannot be written to"
        return error_response(request_id, f"flakestorm mcp-stdio {self.name}: the server {why}")


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


NO_ANSWER = -32603
"""The JSON-RPC error code of a call the relay answers itself (internal error)."""


def error_response(request_id: Any, message: str) -> bytes:
    """A JSON-RPC error response to ``request_id``."""
    error = {"code": NO_ANSWER, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
