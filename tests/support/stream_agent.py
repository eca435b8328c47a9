"""A streaming HTTP agent for tests: a real server on 127.0.0.1, port 0, that answers every
POST with its answer streamed as SSE — OpenAI chunks, Anthropic events or a generic shape,
chunked or delimited by the close — paced as its :class:`Pace` says.

Its pace is its config: one :class:`Pace` per scenario, chosen by the ``X-Flakestorm-Scenario``
header flakestorm sends with every invocation (``""``: any other request). The stream starts
with a role-only chunk (Anthropic: ``message_start`` and a ``ping``) at once, so the first byte
always comes before the first content.

::

    with StreamAgent({"": Pace(first_ms=800)}) as agent:
        agent.url  # http://127.0.0.1:PORT/chat
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from support.threaded_server import ThreadedServer

WORDS = ("The ", "capital ", "of France ", "is ", "Paris.")
"""The answer, one content event each: "Paris" comes only with the fifth."""


@dataclass(frozen=True)
class Pace:
    first_ms: int = 0
    """Wait before the first content event (after the role-only chunk)."""
    gap_ms: int = 10
    """Wait between content events."""
    stall_after: int | None = None
    """After this many content events, wait ``stall_ms`` more."""
    stall_ms: int = 0
    stop_after: int | None = None
    """Send only this many content events, then end as ``end`` says."""
    end: str = "done"
    """``done``: the terminal event, then the body's end; ``close``: the body's end without
    the terminal event; ``drop``: the connection closed mid-body; ``hold``: nothing more
    until the server stops."""
    shape: str = "openai"
    """``openai``, ``anthropic`` or ``sse`` (``data: {"token": ...}``, ``event: end``)."""
    chunked: bool = True
    """``False``: no ``Transfer-Encoding``; the body is delimited by closing the connection."""
    relay: str | None = None
    """The chaos proxy's URL: the agent asks its LLM for a streamed answer and relays it as it
    comes, forwarding the invocation's ``X-Flakestorm-Cell``, in its ``shape`` — ``openai``
    and ``anthropic``: its LLM's frames as they are (``/llm/openai/v1/chat/completions``,
    ``/llm/anthropic/v1/messages``); ``sse``: each of its OpenAI LLM's content deltas as
    ``data: {"token": ...}``, and ``event: end`` once its LLM sent ``[DONE]``. The pacing
    fields above are then unused."""
    finish_cut: bool = False
    """Relaying: when its LLM's stream ends without ``[DONE]``, send :data:`NOTE` and
    ``[DONE]`` itself (the agent that finishes properly); otherwise it closes without them, as
    its LLM did."""
    patience_ms: int | None = None
    """Relaying: give up on its LLM after this much silence (then end as when its LLM's stream
    ended without ``[DONE]``); None: wait as long as it takes."""


NOTE = " (the answer was cut short)"
"""What an agent that finishes properly adds when its LLM's stream did not finish."""


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hanging up is fine
            super().handle_error(request, client_address)


class StreamAgent(ThreadedServer):
    """The agent; a context manager."""

    def __init__(self, paces: dict[str, Pace]) -> None:
        self.paces = paces
        self.released = threading.Event()
        super().__init__(_handler(self), _Server)

    @property
    def url(self) -> str:
        return self.base_url + "/chat"

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.released.set()
        super().__exit__(kind, exc, tb)


def _frames(shape: str, kind: str, text: str = "") -> bytes:
    """The SSE frame(s) of one step: ``start``, ``content`` or ``done``."""
    if shape == "anthropic":
        events: list[tuple[str, dict[str, Any]]] = {
            "start": [
                ("message_start", {"type": "message_start", "message": {"role": "assistant"}}),
                ("ping", {"type": "ping"}),
            ],
            "content": [
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": text},
                    },
                )
            ],
            "done": [("message_stop", {"type": "message_stop"})],
        }[kind]
        return b"".join(
            f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode() for name, doc in events
        )
    if shape == "sse":
        return {
            "start": b'event: start\ndata: {"id": 1}\n\n',
            "content": f"data: {json.dumps({'token': text})}\n\n".encode(),
            "done": b"event: end\ndata: {}\n\n",
        }[kind]
    if kind == "done":
        return b"data: [DONE]\n\n"
    delta = {"role": "assistant", "content": ""} if kind == "start" else {"content": text}
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _handler(agent: StreamAgent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        chunked = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            scenario = self.headers.get("X-Flakestorm-Scenario", "")
            pace = agent.paces.get(scenario) or agent.paces[""]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if pace.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.chunked = pace.chunked
            if pace.relay is not None:
                self._relay(pace.relay, pace)
                return
            self._chunk(_frames(pace.shape, "start"))
            time.sleep(pace.first_ms / 1000)
            words = WORDS[: pace.stop_after] if pace.stop_after is not None else WORDS
            for n, word in enumerate(words, start=1):
                if n > 1:
                    time.sleep(pace.gap_ms / 1000)
                self._chunk(_frames(pace.shape, "content", word))
                if n == pace.stall_after:
                    time.sleep(pace.stall_ms / 1000)
            if pace.end == "hold":
                agent.released.wait()
            if pace.end in ("drop", "hold"):
                self.close_connection = True
                return
            if pace.end == "done":
                self._chunk(_frames(pace.shape, "done"))
            if pace.chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        def _relay(self, base: str, pace: Pace) -> None:
            anthropic = pace.shape == "anthropic"
            path = "/llm/anthropic/v1/messages" if anthropic else "/llm/openai/v1/chat/completions"
            url = urllib.parse.urlsplit(base.rstrip("/") + path)
            question = {"role": "user", "content": "What is the capital of France?"}
            asked = {"model": "m-test", "messages": [question], "stream": True, "max_tokens": 99}
            body = json.dumps(asked)
            headers = {"Content-Type": "application/json"}
            cell = self.headers.get("X-Flakestorm-Cell")
            if cell:
                headers["X-Flakestorm-Cell"] = cell
            patience = None if pace.patience_ms is None else pace.patience_ms / 1000
            connection = http.client.HTTPConnection(url.netloc, timeout=patience)
            seen = b""
            try:
                connection.request("POST", url.path, body, headers)
                upstream = connection.getresponse()
                translate = _Tokens() if pace.shape == "sse" else None
                while piece := upstream.read1(65536):
                    seen = (seen + piece)[-64:]
                    out = piece if translate is None else translate.feed(piece)
                    if out:
                        self._chunk(out)
            except (OSError, http.client.HTTPException):
                pass  # its LLM went silent past its patience, or dropped the connection
            finally:
                connection.close()
            if pace.shape == "sse" and b"[DONE]" in seen:
                self._chunk(_frames("sse", "done"))
            if b"[DONE]" not in seen and pace.finish_cut:
                self._chunk(_frames("openai", "content", NOTE) + b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)
            self.wfile.flush()

    return Handler


class _Tokens:
    """An OpenAI chunk stream's content deltas as generic SSE token events, fed in pieces."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, piece: bytes) -> bytes:
        self._buffer += piece
        out = b""
        while b"\n\n" in self._buffer:
            frame, self._buffer = self._buffer.split(b"\n\n", 1)
            data = frame.decode().removeprefix("data: ")
            if data.startswith("{"):
                delta = (json.loads(data).get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content"):
                    out += _frames("sse", "content", delta["content"])
        return out
