"""A loopback HTTP server for tests: real sockets on 127.0.0.1, port 0, in a background thread.

::

    def test_something():
        with LoopbackServer(lambda request: Response.json({"output": "hi"})) as server:
            requests.post(server.url_for("/invoke"), json={"input": "x"})
            assert server.requests[0].json() == {"input": "x"}

As a pytest fixture::

    @pytest.fixture
    def server():
        with LoopbackServer() as s:
            yield s

The handler is a plain function ``Request -> Response`` and may be swapped at any time
(``server.handler = ...``). Every request is recorded in ``server.requests``.

It speaks HTTP/1.1 with keep-alive and adds no latency: Nagle is disabled and each response
leaves in one buffered write, so a pooled client does not hit the ~40 ms delayed-ACK stall of
an unbuffered ``http.server``. Benchmarks can build on it.

Misbehaviour for error-path tests:

- ``Response(chunks=...)`` streams the body with chunked encoding, chunk by chunk, so a huge body
  never sits in memory on either side unless the client reads it all;
- ``Response(stall_after=n)`` sends the headers and ``n`` body bytes, then hangs;
- ``Response(drop=True)`` closes the connection without answering;
- :meth:`LoopbackServer.hang` is a handler that never answers.

Hanging handlers wait on ``server.released``, which :meth:`LoopbackServer.stop` sets, so
stopping never waits for them.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["Handler", "LoopbackServer", "Request", "Response"]


@dataclass(frozen=True)
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Case-insensitive (an ``email.message.Message``): ``request.headers["content-type"]``."""
    body: bytes
    client: tuple[str, int] = ("", 0)
    """The client's address: distinct ports mean distinct connections."""

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


@dataclass
class Response:
    """What the handler answers. ``body`` may be bytes or text (sent as UTF-8)."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Iterable[bytes] | None = None
    """Stream these with ``Transfer-Encoding: chunked`` instead of sending ``body``."""
    stall_after: int | None = None
    """Send the headers and this many bytes of ``body``, then hang until the server stops."""
    drop: bool = False
    """Close the connection without sending anything."""

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: Mapping[str, str] = {}) -> Response:
        return cls(
            status,
            json.dumps(value).encode(),
            {"Content-Type": "application/json", **headers},
        )

    @classmethod
    def chat_completion(cls, content: str, model: str) -> Response:
        """An OpenAI chat completion from ``model`` answering ``content`` (a fake LLM's)."""
        return cls.json(
            {
                "id": f"chatcmpl-{model}",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    @classmethod
    def text(
        cls, text: str, status: int = 200, content_type: str = "text/plain; charset=utf-8"
    ) -> Response:
        return cls(status, text.encode("utf-8"), {"Content-Type": content_type})


Handler = Callable[[Request], Response]


def _ok(request: Request) -> Response:
    return Response.json({"output": "ok"})


class LoopbackServer:
    """A threaded HTTP/1.1 server on ``127.0.0.1`` and a free port; a context manager."""

    def __init__(self, handler: Handler = _ok, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.released = threading.Event()
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd = _Server((host, port), _make_request_handler(self))
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"loopback-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release hanging handlers, close the listening socket."""
        self.released.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The origin, ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    def url_for(self, path: str = "/") -> str:
        return self.url + (path if path.startswith("/") else "/" + path)

    # -- what happened

    @property
    def requests(self) -> list[Request]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def _record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    # -- ready-made handlers

    def hang(self, request: Request) -> Response:
        """A handler that never answers (until the server stops)."""
        self.released.wait()
        return Response(drop=True)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up mid-reply (a timeout or size-cap test) is expected, not news
        pass


def _make_request_handler(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class _RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        wbufsize = -1  # buffered: status line, headers and body leave in one write

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            client = (str(self.client_address[0]), int(self.client_address[1]))
            request = Request(self.command, self.path, self.headers, body, client)
            server._record(request)
            response = server.handler(request)
            self._send(response)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def _send(self, response: Response) -> None:
            if response.drop:
                self.close_connection = True
                return
            body = (
                response.body.encode("utf-8") if isinstance(response.body, str) else response.body
            )
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            if response.chunks is not None:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in response.chunks:
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                return
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if response.stall_after is not None:
                self.wfile.write(body[: response.stall_after])
                self.wfile.flush()
                server.released.wait()
                self.close_connection = True
                return
            self.wfile.write(body)
            # handle_one_request() flushes wfile after this returns: one write per response

    return _RequestHandler


PORTS_FROM = 20000
"""The lowest port :func:`free_port` hands out (below the ephemeral range: 32768 on Linux)."""


def free_port() -> int:
    """A free port on 127.0.0.1, for an agent flakestorm starts itself (its command must name
    the port): bound and released, so another process may take it first, rarely.

    Drawn at random from below the kernel's ephemeral range (``ip_local_port_range``), which
    every ``bind(port 0)`` and outgoing connection on the machine draws from: those cannot take
    it while the agent starts (the suite runs on two workers, beside other runs)."""
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ephemeral.read_text().split()[0]) if ephemeral.is_file() else 0
    if low > PORTS_FROM + 1000:
        for _ in range(100):
            port = PORTS_FROM + secrets.randbelow(low - PORTS_FROM)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:  # in use
                    continue
                return port
    with socket.socket() as sock:  # elsewhere: one the kernel picks
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
