"""An HTTP agent whose habits under failure are chosen by ``SPEND_HABITS`` (comma-separated),
for the invariants on what an agent did (SPEC §15). Started by flakestorm (``agent.start``),
so its LLM calls go to ``OPENAI_BASE_URL`` and its tool calls to ``FLAKESTORM_PROXY_URL``.

For each ``POST /chat {"input": PROMPT}`` it:

1. asks its LLM (``gpt-test``; ``stream``: streamed with ``stream_options.include_usage``);
   on a 429 it tries again at once (``retry_now``) or after the ``Retry-After`` it was given
   (``retry_after``), at most twice more;
2. gets ``GET /tools/quotes/AAPL``; after a 5xx, with ``replan``, it asks the LLM again and
   tries the tool again, at most twice more;
3. for a prompt with "pay" in it, ``POST /tools/payments/charge`` ``{"amount": 5}``, and after
   a 5xx sends the same request once more — with the same ``Idempotency-Key`` on both when
   ``idem``, else with none.

It forwards the ``X-Flakestorm-Cell`` header it was sent to every call (attribution).

    python spend_agent.py --port N
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HABITS = frozenset(h for h in os.environ.get("SPEND_HABITS", "").split(",") if h)
CELL = "X-Flakestorm-Cell"


def send(
    url: str, method: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        connection.request(
            method, parts.path + (f"?{parts.query}" if parts.query else ""), data, sent
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def ask_llm(prompt: str, cell: dict[str, str]) -> None:
    body: dict[str, Any] = {"model": "gpt-test", "messages": [{"role": "user", "content": prompt}]}
    if "stream" in HABITS:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    status, headers, _ = send(url, "POST", body, cell)
    tries = 0
    while status == 429 and tries < 2:
        tries += 1
        if "retry_after" in HABITS:
            time.sleep(float(headers.get("retry-after", "1")))
        status, headers, _ = send(url, "POST", body, cell)


def answer(prompt: str, cell: dict[str, str]) -> str:
    proxy = os.environ["FLAKESTORM_PROXY_URL"].rstrip("/")
    ask_llm(prompt, cell)
    for attempt in range(3):
        status, _, _ = send(f"{proxy}/tools/quotes/AAPL", "GET", headers=cell)
        if status < 500 or "replan" not in HABITS or attempt == 2:
            break
        ask_llm(f"the quote tool failed ({status}): what now? {prompt}", cell)
    if "pay" in prompt:
        key = {"Idempotency-Key": str(uuid.uuid4())} if "idem" in HABITS else {}
        charge = {"amount": 5}
        status, _, _ = send(f"{proxy}/tools/payments/charge", "POST", charge, {**cell, **key})
        if status >= 500:
            send(f"{proxy}/tools/payments/charge", "POST", charge, {**cell, **key})
    return f"done: {prompt}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # the health check
        self._reply(200, {"ok": True})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        prompt = json.loads(self.rfile.read(length) or b"{}").get("input", "")
        cell = {CELL: self.headers[CELL]} if self.headers.get(CELL) else {}
        self._reply(200, {"output": answer(prompt, cell)})

    def _reply(self, status: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
