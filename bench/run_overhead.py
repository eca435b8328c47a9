"""A run's fixed cost as a process: ``flakestorm contract run``'s wall time minus the
``duration_s`` its results.json reports (the run itself), on a contract of 37 invocations (5
invariants × 7 scenarios and the stateful check) against an HTTP agent that answers in 50 ms,
concurrency 8, reports in every format. What is left is flakestorm's own: the interpreter,
the imports, reading the config, planning, the reports and the exit.

A benchmark, not a test. With ``--baseline DIR`` (a checkout of another flakestorm, e.g. a
``git worktree`` of an earlier commit) the same run is made with that tree first on
``PYTHONPATH``, alternately with this one, so load from other processes falls on both alike;
the ratio of the medians is printed. ``--importtime`` also prints, for each tree, the import
time of what a contract run imports (``python -X importtime``, the top-level entries summed)
and the flakestorm modules it imports.

    .venv/bin/python bench/run_overhead.py [--runs N] [--baseline DIR] [--importtime]
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
from typing import Any

HERE = Path(__file__).resolve().parent.parent
REPLY = json.dumps({"output": "the price is 42"}).encode()


class _Agent(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(0.05)
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(REPLY), REPLY)
        )


CONFIG = """\
version: "2.0"
agent: {{endpoint: "http://127.0.0.1:{port}/invoke", type: http}}
golden_prompts: [What is the price of AAPL?]
contract:
  name: overhead
  invariants:
    - {{id: a, type: contains, value: "42"}}
    - {{id: b, type: output_not_empty}}
    - {{id: c, type: latency, max_ms: 5000}}
    - {{id: d, type: excludes_pii}}
    - {{id: e, type: regex, pattern: "[0-9]+"}}
  chaos_matrix: [{{name: s1}}, {{name: s2}}, {{name: s3}}, {{name: s4}}, {{name: s5}},
                 {{name: s6}}, {{name: s7}}]
advanced: {{concurrency: 8}}
output: {{dir: out, formats: [json, junit, markdown, html]}}
"""


def _run(tree: Path, cwd: Path, extra: list[str] | None = None) -> tuple[float, float, str]:
    """One ``contract run`` with ``tree`` first on the path: (wall, duration_s, stderr)."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(tree)}
    began = time.perf_counter()
    run = subprocess.run(
        [sys.executable, *(extra or []), "-m", "flakestorm", "contract", "run"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    if run.returncode != 0:
        raise SystemExit(f"the run failed ({run.returncode}): {run.stderr[-2000:]}")
    results = json.loads((cwd / "out" / "results.json").read_text())
    assert results["invocations"] == 37, results["invocations"]
    return wall, float(results["duration_s"]), run.stderr


def _imports(stderr: str) -> tuple[float, list[str]]:
    """The import time of the top-level entries of ``-X importtime`` (ms), and the flakestorm
    modules imported."""
    total, modules = 0, []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if not name.startswith("  "):  # a top-level entry: its cumulative time counts once
            total += int(cumulative)
        if name.strip().startswith("flakestorm"):
            modules.append(name.strip())
    return total / 1000, modules


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--baseline", type=Path, help="a checkout of another flakestorm")
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    trees = {"this tree": HERE}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    overhead: dict[str, list[float]] = {name: [] for name in trees}
    running: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "flakestorm.yaml").write_text(CONFIG.format(port=server.server_address[1]))
        for index in range(args.runs + 1):  # the first warms the caches
            for name, tree in trees.items():
                wall, duration, _ = _run(tree, cwd)
                if index:
                    overhead[name].append(wall - duration)
                    running[name].append(duration)
        print(f"contract run of 37 invocations, median of {args.runs} runs:")
        for name in trees:
            print(
                f"  {name}: process wall - duration_s = {statistics.median(overhead[name]):.3f} s "
                f"(duration_s {statistics.median(running[name]):.3f} s)"
            )
        if args.baseline is not None:
            ratio = statistics.median(overhead["this tree"]) / statistics.median(
                overhead["baseline"]
            )
            print(f"  ratio (this tree / baseline): {ratio:.2f}")
        if args.importtime:
            for name, tree in trees.items():
                _, _, stderr = _run(tree, cwd, ["-X", "importtime"])
                total, modules = _imports(stderr)
                print(f"  {name}: imports {total:.0f} ms, {len(set(modules))} flakestorm modules")
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
