"""A raw-bytes upstream for tests of what a well-behaved server would never send."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any


class RawUpstream:
    """A one-request-per-connection upstream speaking raw bytes: ``script(conn, request)``."""

    def __init__(self, script: Callable[[socket.socket, bytes], None]) -> None:
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        break
                    data += got
                self.requests.append(data)
                with contextlib.suppress(OSError):
                    self.script(conn, data)

    def __enter__(self) -> RawUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sock.close()
