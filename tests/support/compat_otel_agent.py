"""The quote agent of ``tests/test_compatibility.py``, traced with OpenTelemetry and nothing of
flakestorm: the WSGI middleware extracts the incoming trace context and baggage, the urllib
instrumentation injects them into its tool calls. Asked anything, it asks its quote tool (the
proxy's ``/tools/quotes`` route, whose address comes in the request's ``proxy`` field), tries
once more when the tool fails, and answers the price or that it is unavailable.

Each request's log (the request's ``log`` field) gets what the agent received
(``support/agent_log.py``): its prompt, its answer, and each reset.

``python compat_otel_agent.py`` serves on 127.0.0.1 and a free port, printed on its first line.
"""

from __future__ import annotations

import json
import sys
import urllib.error
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import make_server

# what the agent received, written to each request's log
from agent_log import BEGIN, END, RESET, record  # type: ignore[import-not-found]
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware

# the tests' traced agent: its tracer provider and instrumentation (imported, they are set up),
# its proxy-less opener and its quiet threaded server
from otel_agent import NO_PROXY, QuietHandler, Server  # type: ignore[import-not-found]


def answer(proxy: str) -> str:
    for _ in range(2):  # one retry
        try:
            with NO_PROXY.open(f"{proxy}/tools/quotes/price", timeout=10) as reply:
                return f"AAPL is at {json.loads(reply.read())['price']}"
        except urllib.error.URLError:
            continue
    return "AAPL is unavailable"


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    size = int(environ.get("CONTENT_LENGTH") or 0)
    request = json.loads(environ["wsgi.input"].read(size) or b"{}")
    if environ.get("PATH_INFO", "").startswith("/reset"):
        record(request["log"], RESET)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]
    record(request["log"], BEGIN, prompt=request["input"])
    output = answer(request["proxy"])
    record(request["log"], END, prompt=request["input"], output=output)
    body = json.dumps({"output": output}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


def main() -> None:
    server = make_server("127.0.0.1", 0, OpenTelemetryMiddleware(app), Server, QuietHandler)
    print(server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
