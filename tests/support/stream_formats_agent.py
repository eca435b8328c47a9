"""Two streaming HTTP agents for tests, each relaying its LLM's stream through the chaos proxy
in a shape of its own, as it comes (``agent.stream``, SPEC §16):

- :func:`anthropic_agent` asks its LLM for an Anthropic message stream
  (``/llm/anthropic/v1/messages``) and answers Anthropic events of its own: ``message_start``
  and ``content_block_start`` at once, a ``content_block_delta`` (``text_delta``) for each of
  its LLM's text deltas, then — once its LLM sent ``message_stop`` — ``content_block_stop``,
  ``message_delta`` (``stop_reason: end_turn``) and ``message_stop``;
- :func:`sse_agent` asks its LLM for an OpenAI chat completion stream
  (``/llm/openai/v1/chat/completions``) and answers generic SSE: ``data: {"type": "start"}`` at
  once, ``data: {"type": "token", "text": ...}`` for each of its LLM's content deltas, then —
  once its LLM sent ``[DONE]`` — ``data: {"type": "end"}``.

Neither finishes a stream its LLM did not finish: when its LLM's stream ends without its
terminal event (a ``cut_stream`` fault), the agent's own ends there too, without its terminal
events. Each forwards the invocation's ``X-Flakestorm-Cell`` to its LLM and asks it the
prompt it received (the default request body's ``input``).

::

    with LoopbackServer(sse_agent(proxy_url)) as agent:
        agent.url_for("/chat")
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from support.server import Handler, Request, Response

READ_TIMEOUT_S = 10.0
"""How long the agent waits on its LLM's silence before giving up (never reached here)."""


def _sse(doc: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(doc)}\n\n".encode()


def _frames(url: str, body: dict[str, Any], headers: dict[str, str]) -> Iterator[str]:
    """The data of each SSE event of the LLM's streamed answer, as it arrives (the events'
    ``data:`` lines joined; an event without data is skipped)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=READ_TIMEOUT_S)
    try:
        connection.request(
            "POST", parts.path, json.dumps(body), {"Content-Type": "application/json", **headers}
        )
        upstream = connection.getresponse()
        buffer = b""
        while piece := upstream.read1(65536):
            buffer = (buffer + piece).replace(b"\r\n", b"\n")
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                data = [
                    line[5:].removeprefix(" ")
                    for line in frame.decode("utf-8").split("\n")
                    if line.startswith("data:")
                ]
                if data:
                    yield "\n".join(data)
    except (OSError, http.client.HTTPException):
        return  # the LLM's stream broke off: it ends here
    finally:
        connection.close()


def _relaying(
    llm_path: str,
    asked: Callable[[str], dict[str, Any]],
    answer: Callable[[Iterator[str]], Iterator[bytes]],
    proxy_url: str,
) -> Handler:
    def handle(request: Request) -> Response:
        prompt = request.json()["input"]
        headers = {}
        if "x-flakestorm-cell" in request.headers:
            headers["X-Flakestorm-Cell"] = request.headers["x-flakestorm-cell"]
        frames = _frames(proxy_url.rstrip("/") + llm_path, asked(prompt), headers)
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=answer(frames))

    return handle


def anthropic_agent(proxy_url: str) -> Handler:
    """The agent answering Anthropic events, its LLM an Anthropic one behind ``proxy_url``."""

    def asked(prompt: str) -> dict[str, Any]:
        question = {"role": "user", "content": prompt}
        return {"model": "claude-test", "max_tokens": 99, "messages": [question], "stream": True}

    def answer(frames: Iterator[str]) -> Iterator[bytes]:
        message = {"id": "msg_agent", "type": "message", "role": "assistant", "content": []}
        yield _sse({"type": "message_start", "message": message}, "message_start")
        block = {"type": "content_block_start", "index": 0}
        yield _sse({**block, "content_block": {"type": "text", "text": ""}}, "content_block_start")
        for data in frames:
            event = json.loads(data)
            delta = event.get("delta") or {}
            if event.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                text = {"type": "text_delta", "text": delta["text"]}
                doc = {"type": "content_block_delta", "index": 0, "delta": text}
                yield _sse(doc, "content_block_delta")
            elif event.get("type") == "message_stop":
                yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
                stop = {"stop_reason": "end_turn", "stop_sequence": None}
                yield _sse({"type": "message_delta", "delta": stop}, "message_delta")
                yield _sse({"type": "message_stop"}, "message_stop")
                return

    return _relaying("/llm/anthropic/v1/messages", asked, answer, proxy_url)


def sse_agent(proxy_url: str) -> Handler:
    """The agent answering generic SSE token events, its LLM an OpenAI one behind
    ``proxy_url``."""

    def asked(prompt: str) -> dict[str, Any]:
        return {
            "model": "gpt-test",
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
        }

    def answer(frames: Iterator[str]) -> Iterator[bytes]:
        yield _sse({"type": "start"})
        for data in frames:
            if data.strip() == "[DONE]":
                yield _sse({"type": "end"})
                return
            for choice in json.loads(data).get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    yield _sse({"type": "token", "text": text})

    return _relaying("/llm/openai/v1/chat/completions", asked, answer, proxy_url)
