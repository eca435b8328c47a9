"""The stdio MCP relay (``flakestorm mcp-stdio --name NAME -- CMD ...``, SPEC §11): between an
agent and a stdio MCP server, with the same faults as over streamable HTTP.

The agent starts the relay in place of the server (its MCP configuration changes only the
command); the relay starts the real server and relays newline-delimited JSON-RPC both ways.
Each *request* the agent sends (a message with a method and an id) goes through the run's chaos
proxy (``FLAKESTORM_PROXY_URL``), as an HTTP POST in forward mode marked with
``X-Flakestorm-Mcp: NAME``, to a loopback bridge the relay serves, which writes it to the
server and answers with the server's response. So the proxy reads, decides, faults and logs
every ``tools/call`` exactly as it does for a streamable HTTP server (:mod:`mcp_calls`): one
decision engine, and the run's delivery proof counts the relay's calls. What the proxy answers
goes back to the agent as lines; a call the fault drops (``timeout``) gets no answer, as from a
server that hangs. Notifications and the agent's answers to server requests go straight to the
server; everything the server sends on its own goes straight to the agent.

The bridge listens on the agent's loopback: the proxy must run on the same host (the
in-process proxy, or a service beside the agent), not in another container.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import subprocess
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

import requests

from flakestorm.chaos import mcp
from flakestorm.chaos.proxy.routes import MCP_HEADER
from flakestorm.errors import UsageError

logger = logging.getLogger("flakestorm.mcp_stdio")

CALL_TIMEOUT_S = 3600.0
"""How long the relay waits for the proxy to answer one request (faults hold calls)."""


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
        self._server: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        try:
            server = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            raise UsageError(f"mcp-stdio: cannot start {self.command[0]!r}: {exc}") from exc
        self._server = server
        bridge = ThreadingHTTPServer(("127.0.0.1", 0), _bridge_handler(self))
        bridge.daemon_threads = True
        threads = [
            threading.Thread(target=bridge.serve_forever, daemon=True),
            threading.Thread(target=self._from_server, daemon=True),
        ]
        for thread in threads:
            thread.start()
        self._bridge_url = f"http://127.0.0.1:{bridge.server_address[1]}/"
        try:
            for line in self.agent_in:
                if line.strip():
                    self._from_agent(line)
        finally:
            with contextlib.suppress(OSError):
                assert server.stdin is not None
                server.stdin.close()
            code = server.wait()
            bridge.shutdown()
            bridge.server_close()
            self._session.close()
        return code

    # -- agent -> server

    def _from_agent(self, line: bytes) -> None:
        request = mcp.read_request(line)
        if request is None or request.id is None:  # a response or a notification
            self._to_server(line)
            return
        threading.Thread(target=self._through_proxy, args=(line,), daemon=True).start()

    def _through_proxy(self, line: bytes) -> None:
        try:
            reply = self._session.post(
                self._bridge_url,
                data=line.strip(),
                headers={"Content-Type": mcp.JSON_TYPE, MCP_HEADER: self.name},
                proxies={"http": self.proxy_url},
                timeout=CALL_TIMEOUT_S,
            )
        except requests.RequestException as exc:  # a fault dropped the call: no answer
            logger.warning("mcp-stdio %s: no answer (%s)", self.name, type(exc).__name__)
            return
        for message in mcp.messages_of(reply.content, reply.headers.get("Content-Type", "")):
            self._to_agent(mcp.message_bytes(message))

    def _to_server(self, line: bytes) -> None:
        server = self._server
        assert server is not None and server.stdin is not None
        with self._in_lock, contextlib.suppress(OSError):
            server.stdin.write(line.rstrip(b"\r\n") + b"\n")
            server.stdin.flush()

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
        except ValueError:
            return None
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return None
        with self._pending_lock:
            return self._pending.pop(_key(message["id"]), None)

    def _to_agent(self, line: bytes) -> None:
        with self._out_lock, contextlib.suppress(OSError):
            self.agent_out.write(line.rstrip(b"\r\n") + b"\n")
            self.agent_out.flush()

    # -- the bridge: one request written to the server, its response returned

    def exchange(self, body: bytes) -> bytes | None:
        request = mcp.read_request(body)
        if request is None or request.id is None:
            self._to_server(body)
            return None
        answer: queue.Queue[bytes] = queue.Queue(maxsize=1)
        with self._pending_lock:
            self._pending[_key(request.id)] = answer
        self._to_server(body)
        while True:
            try:
                return answer.get(timeout=1.0)
            except queue.Empty:
                if self._server is not None and self._server.poll() is not None:
                    return None


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _bridge_handler(relay: StdioRelay) -> type[BaseHTTPRequestHandler]:
    class Bridge(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            reply = relay.exchange(self.rfile.read(length))
            status = 200 if reply is not None else 202
            body = reply.strip() if reply is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", mcp.JSON_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Bridge
