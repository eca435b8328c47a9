"""A test server of its own: a ``ThreadingHTTPServer`` on 127.0.0.1, port 0, served in a daemon
thread while it is entered; subclass it with the handler class to serve."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


class ThreadedServer:
    """Serves ``handler`` while entered; :attr:`base_url` is where."""

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        server: type[ThreadingHTTPServer] = ThreadingHTTPServer,
    ) -> None:
        self._httpd = server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
