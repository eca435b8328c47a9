"""What the invariants on what the agent did (SPEC §15) cost a run: the wall time of
``flakestorm contract run`` on the same matrix — an HTTP agent (``tests/support/spend_agent.py``)
with an LLM and two tools behind the in-process chaos proxy, 4 scenarios × 2 golden prompts ×
``repeat`` — with four invariants on its reply, and with the four on its calls (``max_calls``,
``max_amplification``, ``retry_discipline``, ``no_duplicate_effects``) in their place: the same
cells, the same invocations. The two are run alternately, so load from other processes falls on
both alike; the ratio of the medians is printed (the issue asks ≤ 1.05×).

A benchmark, not a test. Here (2 cores, load about 1): ``--runs 5 --repeat 6`` gave a median
of 1.879 s against 1.810 s, 1.038× (``--runs 3 --repeat 2``: 1.055×, where the run is mostly
start-up); the scenario without faults that ``max_amplification`` compares with runs before
the others (its own wave).

    .venv/bin/python bench/conduct_overhead.py [--runs N] [--repeat R]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
AGENT = HERE / "tests" / "support" / "spend_agent.py"
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


class _Upstream(http.server.BaseHTTPRequestHandler):
    """The fake LLM (a chat completion with fixed usage) and the tools, one server."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/chat/completions"):
            doc: dict[str, Any] = {
                "id": "c",
                "object": "chat.completion",
                "model": "gpt-test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                "usage": USAGE,
            }
        else:
            doc = {"ok": True}
        body = json.dumps(doc).encode()
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )

    do_GET = do_POST = _answer


REPLY_INVARIANTS = [
    {"id": "a", "type": "output_not_empty"},
    {"id": "b", "type": "contains", "value": "done"},
    {"id": "c", "type": "completes"},
    {"id": "d", "type": "regex", "pattern": "^done: "},
]
CALL_INVARIANTS = [
    {"id": "a", "type": "max_calls", "target": "llm", "max": 3},
    {"id": "b", "type": "max_amplification", "max": 4},
    {"id": "c", "type": "retry_discipline"},
    {"id": "d", "type": "no_duplicate_effects", "target": "payments"},
]
SCENARIOS = [
    {"name": "calm"},
    {"name": "quote-down", "tool_faults": [{"tool": "quotes", "mode": "error", "error_code": 503}]},
    {"name": "llm-429", "llm_faults": [{"mode": "rate_limit", "calls": "1"}]},
    {
        "name": "pay-flaky",
        "tool_faults": [{"tool": "payments", "mode": "error", "error_code": 503, "calls": "1"}],
    },
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def config(upstream: str, invariants: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    port = _port()
    return {
        "agent": {
            "endpoint": f"http://127.0.0.1:{port}/chat",
            "response_path": "output",
            "health_endpoint": f"http://127.0.0.1:{port}/health",
            "start": {
                "command": f"{sys.executable} {AGENT} --port {port}",
                "env": {"SPEND_HABITS": "replan,idem"},
            },
        },
        "golden_prompts": ["quote AAPL", "pay 5 for AAPL"],
        "contract": {"name": "bench", "invariants": invariants, "chaos_matrix": SCENARIOS},
        "proxy": {
            "llm_upstream": upstream,
            "tools": {"quotes": f"{upstream}/quotes", "payments": f"{upstream}/payments"},
        },
        "advanced": {"concurrency": 8, "repeat": repeat},
        "output": {"formats": ["json"]},
    }


def one(directory: Path, doc: dict[str, Any]) -> float:
    path = directory / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(path)],
        cwd=directory,
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stdout + done.stderr)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    walls: dict[str, list[float]] = {"reply": [], "calls": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for name, invariants in (("reply", REPLY_INVARIANTS), ("calls", CALL_INVARIANTS)):
                directory = Path(tmp) / f"{name}-{i}"
                directory.mkdir()
                walls[name].append(one(directory, config(upstream, invariants, args.repeat)))
    server.shutdown()
    cells = len(SCENARIOS) * 4
    print(f"{cells} cells × 2 prompts × repeat {args.repeat}, {args.runs} runs each")
    for name, times in walls.items():
        print(f"  invariants on the {name:<5}: median {statistics.median(times):.3f} s  {times}")
    ratio = statistics.median(walls["calls"]) / statistics.median(walls["reply"])
    print(f"ratio (calls / reply): {ratio:.3f}×")


if __name__ == "__main__":
    main()
