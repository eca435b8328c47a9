"""A loopback agent traced with OpenTelemetry, as production services are, and nothing of
flakestorm: the SDK's tracer provider, the WSGI server middleware (which extracts the incoming
trace context and baggage with the default propagators, or those ``OTEL_PROPAGATORS`` names)
and the urllib and httpx client instrumentation (which inject them into its outgoing calls).

Each request ``{"input": PROMPT}`` makes one tool call with urllib (``TOOL_URL/quote/PROMPT``)
and one chat completion with httpx (``OPENAI_BASE_URL/chat/completions``), and answers what
they gave (``AGENT_TRACING``: see :data:`TRACING`; ``AGENT_DELAY_MS``: its own latency;
``/reset`` answers 200). Run as a program:
``python otel_agent.py`` serves on 127.0.0.1 and a free port, and prints the port on its first
line.
"""

from __future__ import annotations

import json
import os
import socketserver
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.urllib import URLLibInstrumentor
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider

TRACING = os.environ.get("AGENT_TRACING", "on")
"""``off``: the same agent without OpenTelemetry, forwarding nothing; ``header``: without it,
forwarding ``X-Flakestorm-Cell`` by hand (for benchmarks)."""
TRACED = TRACING == "on"
if TRACED:
    trace.set_tracer_provider(TracerProvider())
    URLLibInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()

TOOL_URL = os.environ.get("TOOL_URL", "")
LLM_URL = os.environ.get("OPENAI_BASE_URL", "")
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
CLIENT = httpx.Client(trust_env=False, timeout=30)


def quote(prompt: str, cell: str | None) -> str:
    url = f"{TOOL_URL}/quote/{urllib.parse.quote(prompt)}"
    request = urllib.request.Request(url, headers={"X-Flakestorm-Cell": cell} if cell else {})
    try:
        with NO_PROXY.open(request, timeout=30) as reply:
            return str(reply.read().decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        return f"the quote service failed ({exc.code})"


def complete(prompt: str, quoted: str, cell: str | None) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": f"{prompt}: {quoted}"}]}
    headers = {"X-Flakestorm-Cell": cell} if cell else {}
    reply = CLIENT.post(f"{LLM_URL}/chat/completions", json=body, headers=headers)
    if reply.status_code != 200:
        return f"the model failed ({reply.status_code})"
    return str(reply.json()["choices"][0]["message"]["content"])


DELAY_S = int(os.environ.get("AGENT_DELAY_MS", "0")) / 1000
"""The agent's own latency per answer, besides its calls (for benchmarks)."""


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") == "/reset":
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]
    time.sleep(DELAY_S)
    size = int(environ.get("CONTENT_LENGTH") or 0)
    prompt = json.loads(environ["wsgi.input"].read(size))["input"]
    cell = environ.get("HTTP_X_FLAKESTORM_CELL") if TRACING == "header" else None
    quoted = quote(prompt, cell)
    answer = complete(prompt, quoted, cell)
    body = json.dumps({"output": f"{quoted} | {answer}"}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    served = OpenTelemetryMiddleware(app) if TRACED else app
    server = make_server("127.0.0.1", 0, served, Server, handler_class=QuietHandler)
    print(server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
