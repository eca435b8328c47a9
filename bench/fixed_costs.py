"""A run's fixed costs: what ``flakestorm contract run`` spends before the agent's first
invocation and after its last, measured from outside, beside ``flakestorm validate`` of the same
file (reading and checking the config: the part of start-up every command shares).

A benchmark, not a test. The agent is an HTTP server in this process that answers at once, so
what is left is flakestorm's own: a contract of 1 invariant × 1 scenario (3 invocations: the
prompt and the stateful-detection pair), reports in every format. For each of ``--runs`` runs
(the median is printed):

- start-up: from the process start to the agent's first request;
- tail: from the agent's last answer to the process's exit (the reports, the matrix printed);
- the whole run, and ``validate`` of the same file (run alternately with it).

    .venv/bin/python bench/fixed_costs.py [--runs N]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

REPLY = json.dumps({"output": "the price is 42"}).encode()


class _Agent(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    arrivals: ClassVar[list[float]] = []
    answered: ClassVar[list[float]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.arrivals.append(time.perf_counter())
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(REPLY), REPLY)
        )
        self.answered.append(time.perf_counter())


CONFIG = """\
version: "2.0"
agent: {{endpoint: "http://127.0.0.1:{port}/invoke", type: http}}
golden_prompts: [What is the price of AAPL?]
contract:
  name: fixed-costs
  invariants:
    - {{id: mentions-price, type: contains, value: price, severity: critical}}
  chaos_matrix:
    - {{name: calm}}
output: {{dir: out, formats: [json, junit, markdown, html]}}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    command = str(Path(sys.executable).parent / "flakestorm")
    env = {**os.environ, "NO_COLOR": "1"}
    starts, tails, wholes, validates = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "flakestorm.yaml").write_text(CONFIG.format(port=server.server_address[1]))
        for index in range(args.runs + 1):  # the first warms the caches
            _Agent.arrivals.clear()
            _Agent.answered.clear()
            began = time.perf_counter()
            run = subprocess.run(
                [command, "contract", "run"], cwd=cwd, env=env, capture_output=True, text=True
            )
            ended = time.perf_counter()
            if run.returncode != 0 or not _Agent.arrivals:
                raise SystemExit(f"the run failed ({run.returncode}): {run.stderr[-2000:]}")
            began_v = time.perf_counter()
            subprocess.run([command, "validate"], cwd=cwd, env=env, capture_output=True, check=True)
            ended_v = time.perf_counter()
            if index:
                starts.append(_Agent.arrivals[0] - began)
                tails.append(ended - _Agent.answered[-1])
                wholes.append(ended - began)
                validates.append(ended_v - began_v)
    server.shutdown()

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    print(f"{len(_Agent.arrivals)} invocations, median of {args.runs} runs (wall time):")
    print(
        f"  start-up to the first invocation: {ms(starts):4.0f} ms "
        f"(validate of the same file: {ms(validates):4.0f} ms; the run's own start-up beyond "
        f"it: {ms(starts) - ms(validates):.0f} ms)"
    )
    print(f"  after the last invocation (reports, exit): {ms(tails):4.0f} ms")
    print(f"  the whole run: {ms(wholes):4.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
