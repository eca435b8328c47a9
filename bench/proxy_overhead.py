"""Overhead of the chaos proxy: a loopback upstream called directly vs through the proxy.

A benchmark, not a test. Starts a loopback JSON upstream and ``flakestorm proxy`` (pass-through,
the upstream as tool ``bench``) in their own processes, then measures from this process:

- the median latency of sequential calls, direct and proxied: the difference is the latency
  the proxy adds per call (goal: at most 2 ms);
- the throughput through the proxy with 16 concurrent clients (goal: at least 300 req/s on a
  2-core machine), next to the direct throughput.

    .venv/bin/python bench/proxy_overhead.py [--calls N] [--seconds S] [--clients C]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
GOAL_ADDED_MS = 2.0
GOAL_RPS = 300.0

UPSTREAM = """
import sys, time
sys.path.insert(0, {tests!r})
from support.server import LoopbackServer, Response
body = b'{{"city": "Paris", "forecast": "sunny", "temp_c": 21, "items": ' + b'[1, 2, 3]}}'
server = LoopbackServer(lambda r: Response(200, body, {{"Content-Type": "application/json"}}))
server.start()
print(server.url, flush=True)
sys.stdin.read()
"""


def start(command: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        process.kill()
        raise SystemExit(f"could not start: {' '.join(command)}")
    return process, line


def latencies_ms(url: str, calls: int) -> list[float]:
    with requests.Session() as session:
        session.trust_env = False
        for _ in range(50):  # warm up: connections, caches
            session.get(url, timeout=10).raise_for_status()
        out = []
        for _ in range(calls):
            started = time.perf_counter()
            session.get(url, timeout=10).raise_for_status()
            out.append((time.perf_counter() - started) * 1000)
    return out


def throughput(url: str, clients: int, seconds: float) -> float:
    done = [0] * clients
    deadline = time.perf_counter() + seconds
    barrier = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        with requests.Session() as session:
            session.trust_env = False
            session.get(url, timeout=10).raise_for_status()
            barrier.wait()
            while time.perf_counter() < deadline:
                session.get(url, timeout=10).raise_for_status()
                done[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="sequential calls per side")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput run length")
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()

    upstream, upstream_url = start(
        [sys.executable, "-c", UPSTREAM.format(tests=str(ROOT / "tests"))]
    )
    proxy, line = start(
        [
            sys.executable,
            "-m",
            "flakestorm",
            "proxy",
            "--port",
            "0",
            "--tool",
            f"bench={upstream_url}",
        ]
    )
    proxy_url = line.split(" on ", 1)[1].split(" ", 1)[0]
    direct = f"{upstream_url}/v1/forecast?city=Paris"
    proxied = f"{proxy_url}/tools/bench/v1/forecast?city=Paris"
    try:
        direct_ms = statistics.median(latencies_ms(direct, args.calls))
        proxied_ms = statistics.median(latencies_ms(proxied, args.calls))
        direct_rps = throughput(direct, args.clients, args.seconds)
        proxied_rps = throughput(proxied, args.clients, args.seconds)
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(10)

    added_ms = proxied_ms - direct_ms
    print(f"median latency: direct {direct_ms:.3f} ms, through the proxy {proxied_ms:.3f} ms")
    verdict = "ok" if added_ms <= GOAL_ADDED_MS else "OVER GOAL"
    print(f"added latency per call: {added_ms:.3f} ms (goal <= {GOAL_ADDED_MS} ms: {verdict})")
    verdict = "ok" if proxied_rps >= GOAL_RPS else "UNDER GOAL"
    print(
        f"throughput, {args.clients} clients: direct {direct_rps:.0f} req/s, "
        f"through the proxy {proxied_rps:.0f} req/s (goal >= {GOAL_RPS:.0f}: {verdict})"
    )
    print(
        f"ratios: proxied/direct latency {proxied_ms / direct_ms:.2f}x, "
        f"proxied/direct throughput {proxied_rps / direct_rps:.2f}"
    )
    return 0 if added_ms <= GOAL_ADDED_MS and proxied_rps >= GOAL_RPS else 1


if __name__ == "__main__":
    sys.exit(main())
