"""The chaos proxy's memory over a long run (SPEC §15, "Memory stays flat"): its RSS after
1,000, 100,000 and 1,000,000 proxied calls (goal: every figure within 50 MB of the first), so
an 8-hour run through the proxy does not grow with the calls it serves.

A benchmark, not a test. Starts a loopback JSON upstream and ``flakestorm proxy`` (the
upstream as tool ``bench``) in their own processes, activates a scenario with a tool fault
that fires on one call in ten, and sends the calls from this process over ``--clients``
keep-alive connections (``http.client``), each call attributed to a cell with the
``X-Flakestorm-Cell`` header as a run's agent does (``--cells`` cells per scenario). It reads
the proxy's ``VmRSS`` from ``/proc`` (Linux).

Two modes:

- ``run`` (the default): what a run does — every ``--scenario-calls`` calls the scenario's
  interactions are read (``GET /_flakestorm/interactions``) and forgotten (``DELETE``), and
  the next scenario is activated;
- ``unread``: one long scenario whose interactions nobody reads (a proxy left serving).

    .venv/bin/python bench/proxy_memory.py [--counts 1000,100000,1000000] [--mode run|unread]
        [--clients C] [--cells N] [--scenario-calls N]

Measured on a shared, busy 2-core machine (2,000-4,500 calls/s), RSS after 1k / 100k / 1M
calls:

    before (interactions held in memory, up to the log's 100,000 calls):
      run     46.7 / 63.3 / 62.3 MB  (+16.6 MB)
      unread  46.7 / 156.7 / 159.7 MB  (+113.1 MB: over the goal; past 100k calls dropped)
    after (interactions spooled to a temporary file, memory holding a small index):
      run     43.7 / 66.0 / 66.5 MB  (+22.8 MB)
      unread  43.6 / 51.1 / 52.2 MB  (+8.6 MB)

In ``run`` mode the log was already emptied scenario by scenario; what is left there is the
proxy's bounded caches (a URL's parsed target, 4,096 of them) and the allocator's arenas.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from pathlib import Path

from proxy_overhead import UPSTREAM, start

ROOT = Path(__file__).resolve().parent.parent
GOAL_GROWTH_MB = 50.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmRSS in /proc (Linux only)")


class Client:
    """Keep-alive connections to the proxy: the calls, and its control API."""

    def __init__(self, host: str, port: int, clients: int) -> None:
        self.host, self.port = host, port
        self.conns = [http.client.HTTPConnection(host, port, timeout=30) for _ in range(clients)]
        self.control = http.client.HTTPConnection(host, port, timeout=60)

    def request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        self.control.request(method, path, body=body)
        reply = self.control.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise SystemExit(f"{method} {path}: {reply.status} {data[:300]!r}")
        return data

    def activate(self, scenario: str) -> None:
        doc = {
            "name": scenario,
            "seed": 1,
            "cell_id": f"{scenario}-c0",
            "tool_faults": [
                {"tool": "bench", "mode": "error", "error_code": 503, "probability": 0.1}
            ],
        }
        self.request("PUT", "/_flakestorm/scenario", json.dumps(doc).encode())

    def read_and_forget(self, scenario: str) -> int:
        got = json.loads(self.request("GET", f"/_flakestorm/interactions?scenario={scenario}"))
        self.request("DELETE", f"/_flakestorm/interactions?scenario={scenario}")
        return len(got["interactions"])

    def calls(self, total: int, scenario: str, cells: int, start_at: int) -> None:
        """``total`` calls spread over the connections, call ``k`` to cell ``k % cells``."""
        clients = len(self.conns)

        def client(index: int) -> None:
            conn = self.conns[index]
            for k in range(start_at + index, start_at + total, clients):
                headers = {"X-Flakestorm-Cell": f"{scenario}-c{k % cells}"}
                conn.request("GET", f"/tools/bench/v1/forecast?city=Paris&k={k}", headers=headers)
                reply = conn.getresponse()
                reply.read()
                if reply.status not in (200, 503):
                    raise SystemExit(f"call {k}: {reply.status}")

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def drive(client: Client, pid: int, counts: list[int], args: argparse.Namespace) -> list[float]:
    """Send the calls; the proxy's RSS (MB) once each of ``counts`` calls were served."""
    out: list[float] = []
    sent, scenario_no, in_scenario = 0, 0, 0
    scenario = "s0"
    client.activate(scenario)
    started = time.perf_counter()
    for count in counts:
        while sent < count:
            room = count - sent
            if args.mode == "run":
                room = min(room, args.scenario_calls - in_scenario)
            client.calls(room, scenario, args.cells, sent)
            sent += room
            in_scenario += room
            if args.mode == "run" and in_scenario >= args.scenario_calls:
                read = client.read_and_forget(scenario)
                if read != in_scenario:
                    print(f"  {scenario}: read {read:,} of {in_scenario:,} calls", flush=True)
                scenario_no += 1
                scenario, in_scenario = f"s{scenario_no}", 0
                client.activate(scenario)
        out.append(rss_mb(pid))
        rate = sent / (time.perf_counter() - started)
        print(f"  {sent:>9,} calls: RSS {out[-1]:.1f} MB ({rate:,.0f} calls/s)", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,100000,1000000", help="calls at each RSS")
    parser.add_argument("--mode", choices=("run", "unread"), default="run")
    parser.add_argument("--clients", type=int, default=4, help="keep-alive connections")
    parser.add_argument("--cells", type=int, default=200, help="cells per scenario")
    parser.add_argument("--scenario-calls", type=int, default=5_000, help="calls per scenario")
    args = parser.parse_args()
    counts = sorted(int(c) for c in args.counts.split(","))

    upstream, upstream_url = start(
        [sys.executable, "-c", UPSTREAM.format(tests=str(ROOT / "tests"))]
    )
    proxy, line = start(
        [sys.executable, "-m", "flakestorm", "proxy", "--port", "0", "--tool",
         f"bench={upstream_url}"]
    )  # fmt: skip
    host_port = line.split(" on ", 1)[1].split(" ", 1)[0].split("://", 1)[1]
    host, port = host_port.rsplit(":", 1)
    print(f"mode {args.mode}, {args.clients} connections, {args.cells} cells per scenario")
    try:
        rss = drive(Client(host, int(port), args.clients), proxy.pid, counts, args)
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(10)
    growth = max(rss) - rss[0]
    verdict = "ok" if growth <= GOAL_GROWTH_MB else "OVER GOAL"
    print(f"growth after the first {counts[0]:,} calls: {growth:.1f} MB")
    print(f"(goal <= {GOAL_GROWTH_MB:.0f} MB: {verdict})")
    return 0 if growth <= GOAL_GROWTH_MB else 1


if __name__ == "__main__":
    sys.exit(main())
