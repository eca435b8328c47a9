"""Overhead of the chaos proxy on MCP tool calls: a loopback MCP server (the official ``mcp``
SDK's ``MCPServer``, streamable HTTP) called directly vs through ``<proxy>/mcp/NAME``.

A benchmark, not a test. Starts the server (``tests/support/mcp_server.py``'s quotes server,
plain JSON replies) and ``flakestorm proxy --mcp bench=URL`` (pass-through) in their own
processes, then sends ``tools/call`` requests (``get_quote``) from this process as JSON-RPC
POSTs, the way an MCP client's transport does, and measures:

- the median latency of sequential calls, direct and proxied: the difference is the latency
  the proxy adds per ``tools/call`` (goal: at most 1 ms);
- the throughput with ``--clients`` concurrent clients, direct and proxied (goal: the median
  round's ratio at least 0.8x), in ``--rounds`` rounds, each measuring both sides back to
  back (the machine's other load changes between rounds): each round's ratio, best and median;
- beside them, the same calls through a plain HTTP tool route (``/tools/bench``, no JSON-RPC
  read): what of the overhead is MCP's own, and what any proxied call costs;
- where ``/proc`` tells (Linux), the CPU time each process spent per call during the throughput
  runs (this client, the server, the proxy): on a machine where the three share the cores, the
  throughput ratio is about (client + server) / (client + server + proxy).

Every side is measured with the same clients and warm connections: each client makes one call
before the clock starts (the proxy's pool of upstream connections fills then), and the proxy
logs nothing per call.

    .venv/bin/python bench/mcp_proxy.py [--calls N] [--seconds S] [--clients C] [--rounds R]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import requests
from proxy_overhead import start

ROOT = Path(__file__).resolve().parent.parent
GOAL_ADDED_MS = 1.0
GOAL_RATIO = 0.8

SERVER = """
import sys, time
sys.path.insert(0, {tests!r})
from support.mcp_server import McpServer
with McpServer(json_response=True, stateless=True) as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "get_quote",
}
_ids = itertools.count(1)


def call(session: requests.Session, url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tools/call",
        "params": {
            "name": "get_quote",
            "arguments": {"symbol": "AAPL"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    reply = session.post(url, data=json.dumps(body), headers=HEADERS, timeout=10)
    reply.raise_for_status()
    if "AAPL trades" not in reply.text:
        raise SystemExit(f"unexpected reply: {reply.text[:200]}")


def latencies_ms(url: str, calls: int) -> list[float]:
    with requests.Session() as session:
        session.trust_env = False
        for _ in range(50):  # warm up: connections, caches
            call(session, url)
        out = []
        for _ in range(calls):
            started = time.perf_counter()
            call(session, url)
            out.append((time.perf_counter() - started) * 1000)
    return out


def throughput(url: str, clients: int, seconds: float) -> float:
    done = [0] * clients
    deadline = time.perf_counter() + seconds
    barrier = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        with requests.Session() as session:
            session.trust_env = False
            call(session, url)
            barrier.wait()
            while time.perf_counter() < deadline:
                call(session, url)
                done[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def cpu_s(pid: int) -> float | None:
    """CPU time (user + system) a process has used, from ``/proc`` (None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Side:
    """One way of calling the server: its URL, throughputs per round, CPU per call."""

    def __init__(self, name: str, url: str, pids: dict[str, int]) -> None:
        self.name, self.url, self.pids = name, url, pids
        self.rps: list[float] = []
        self.cpu_us: dict[str, list[float]] = {who: [] for who in pids}

    def run(self, clients: int, seconds: float) -> None:
        before = {who: cpu_s(pid) for who, pid in self.pids.items()}
        first = next(_ids)
        self.rps.append(throughput(self.url, clients, seconds))
        calls = next(_ids) - first - 1
        for who, pid in self.pids.items():
            start, end = before[who], cpu_s(pid)
            if start is not None and end is not None and calls > 0:
                self.cpu_us[who].append((end - start) / calls * 1e6)

    def cpu_line(self) -> str:
        parts = [
            f"{who} {statistics.median(values):.0f} us"
            for who, values in self.cpu_us.items()
            if values and (who != "proxy" or self.name != "direct")
        ]
        return ", ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="sequential calls per side")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput run length")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds")
    args = parser.parse_args()

    server, server_url = start([sys.executable, "-c", SERVER.format(tests=str(ROOT / "tests"))])
    command = [sys.executable, "-m", "flakestorm", "proxy", "--port", "0"]
    proxy, line = start([*command, "--mcp", f"bench={server_url}", "--tool", f"bench={server_url}"])
    proxy_url = line.split(" on ", 1)[1].split(" ", 1)[0]
    pids = {"client": os.getpid(), "server": server.pid, "proxy": proxy.pid}
    direct = Side("direct", server_url, pids)
    proxied = Side("mcp", f"{proxy_url}/mcp/bench", pids)
    plain = Side("plain", f"{proxy_url}/tools/bench", pids)
    try:
        direct_ms = statistics.median(latencies_ms(direct.url, args.calls))
        proxied_ms = statistics.median(latencies_ms(proxied.url, args.calls))
        plain_ms = statistics.median(latencies_ms(plain.url, args.calls))
        for _ in range(args.rounds):
            for side in (direct, proxied, plain):
                side.run(args.clients, args.seconds)
    finally:
        for process in (proxy, server):
            process.terminate()
            process.wait(10)

    added_ms = proxied_ms - direct_ms
    ratios = [p / d for p, d in zip(proxied.rps, direct.rps, strict=True)]
    plain_ratios = [p / d for p, d in zip(plain.rps, direct.rps, strict=True)]
    best, median = max(ratios), statistics.median(ratios)
    print(
        f"median tools/call latency: direct {direct_ms:.3f} ms, "
        f"through the proxy {proxied_ms:.3f} ms"
    )
    verdict = "ok" if added_ms <= GOAL_ADDED_MS else "OVER GOAL"
    print(
        f"added latency per tools/call: {added_ms:.3f} ms (goal <= {GOAL_ADDED_MS} ms: {verdict})"
    )
    rounds = ", ".join(
        f"{d:.0f} -> {p:.0f} ({r:.2f}x)"
        for d, p, r in zip(direct.rps, proxied.rps, ratios, strict=True)
    )
    print(f"throughput, {args.clients} clients, calls/s direct -> through the proxy: {rounds}")
    verdict = "ok" if median >= GOAL_RATIO else "UNDER GOAL"
    print(
        f"throughput ratio over {args.rounds} rounds: best {best:.2f}x, median {median:.2f}x "
        f"(goal: median >= {GOAL_RATIO}x: {verdict})"
    )
    print(
        f"the same calls through a plain tool route: {plain_ms - direct_ms:.3f} ms added, "
        f"best {max(plain_ratios):.2f}x, median {statistics.median(plain_ratios):.2f}x direct: "
        f"MCP's own share {proxied_ms - plain_ms:.3f} ms"
    )
    for side in (direct, proxied, plain):
        if line := side.cpu_line():
            print(f"CPU per call, {side.name}: {line}")
    return 0 if added_ms <= GOAL_ADDED_MS and median >= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
