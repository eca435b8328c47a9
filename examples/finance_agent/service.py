"""The HTTP/JSON server base shared by the agent, the fake tool and the fake LLM (stdlib only).

Every response is written with one buffered write and flushed (``wbufsize = -1``), over
HTTP/1.1 keep-alive with Nagle's algorithm disabled: without both, a client that sends the
headers and the body of a request in separate packets waits ~40 ms (delayed ACK) per request.

``serve()`` binds, prints ``listening on http://HOST:PORT`` as the first stdout line (so a
parent started with ``--port 0`` learns the port), and serves until SIGTERM/SIGINT. When
``FINBOT_PARENT_PID`` is set, the server also exits once that parent process is gone, so a
launcher killed with SIGKILL leaves no orphans behind.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

MAX_BODY_BYTES = 1_048_576
TRACE_HEADERS = ("X-Flakestorm-Cell", "X-Flakestorm-Scenario", "baggage", "traceparent")
"""Request headers an agent forwards to its dependencies so calls can be attributed to a cell."""


class BadRequest(Exception):
    """The request cannot be served; carries the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Recorder:
    """The last requests a server received (method, path, trace headers), for ``GET /_seen``."""

    def __init__(self, size: int = 200) -> None:
        self._lock = threading.Lock()
        self._items: deque[dict[str, Any]] = deque(maxlen=size)

    def add(self, method: str, path: str, headers: Message) -> None:
        trace = {name: headers[name] for name in TRACE_HEADERS if name in headers}
        with self._lock:
            self._items.append({"method": method, "path": path, "headers": trace})

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler answering JSON. Subclasses implement ``route(method, path)``.

    ``route`` returns ``(status, body)`` (a JSON-serialisable body) or writes the response
    itself and returns ``None``. Raising :class:`BadRequest` answers with a JSON error.
    """

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = -1
    server_version = "finbot-example/1.0"
    recorder: ClassVar[Recorder | None] = None
    """Set on a subclass to record received requests and serve ``GET /_seen`` (and DELETE)."""

    # -- plumbing

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if self.recorder is not None:
                if path == "/_seen":
                    self._seen(method, self.recorder)
                    return
                self.recorder.add(method, path, self.headers)
            result = self.route(method, path)
        except BadRequest as exc:
            self.close_connection = True
            result = (exc.status, {"error": exc.message})
        except Exception as exc:  # a bug in a handler: answer 500, keep serving
            self.log_error("internal error: %r", exc)
            self.close_connection = True
            result = (500, {"error": "internal error"})
        if result is not None:
            self.send_json(*result)

    def _seen(self, method: str, recorder: Recorder) -> None:
        if method == "DELETE":
            recorder.clear()
            self.send_json(200, {"cleared": True})
        else:
            self.send_json(200, {"requests": recorder.items()})

    def route(self, method: str, path: str) -> tuple[int, Any] | None:
        raise BadRequest(404, f"no route for {method} {path}")

    # -- request and response helpers

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequest(400, "invalid Content-Length") from None
        if length < 0:
            raise BadRequest(400, "invalid Content-Length")
        if length > MAX_BODY_BYTES:
            raise BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        data = bytearray()
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip() or b"x", 16)
            except ValueError:
                raise BadRequest(400, "invalid chunked encoding") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(data)
            if len(data) + size > MAX_BODY_BYTES:
                raise BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
            data += self.rfile.read(size)
            self.rfile.readline(1024)

    def read_json(self) -> Any:
        body = self.read_body()
        try:
            return json.loads(body.decode("utf-8")) if body else None
        except (UnicodeDecodeError, ValueError):
            raise BadRequest(400, "the request body is not valid JSON") from None

    def send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("FINBOT_LOG_REQUESTS") == "1":
            super().log_message(format, *args)

    def log_error(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.server_version}: {format % args}\n")


def arguments(description: str, default_port: int) -> argparse.Namespace:
    """``--host`` / ``--port``, the two options every server script takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=default_port, help=f"port (default {default_port}; 0 = free)"
    )
    return parser.parse_args()


def serve(handler: type[JsonHandler], host: str, port: int) -> None:
    """Bind, announce the bound address on stdout, serve until SIGTERM/SIGINT."""
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    bound_port = server.server_address[1]
    print(f"listening on http://{host}:{bound_port}", flush=True)

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    _watch_parent(os.environ.get("FINBOT_PARENT_PID"))
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _watch_parent(parent_pid: str | None) -> None:
    if not parent_pid or not parent_pid.isdigit():
        return
    expected = int(parent_pid)

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
