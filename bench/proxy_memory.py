"""The chaos proxy's memory over a long run: its RSS after 5,000 proxied calls and after
50,000 (goal: the second within 50 MB of the first), so an 8-hour run through the proxy does not
grow without bound.

A benchmark, not a test. Starts a loopback JSON upstream and ``flakestorm proxy``
(pass-through, the upstream as tool ``bench``) in their own processes, sends the calls from
this process with ``--clients`` concurrent clients, and reads the proxy's ``VmRSS`` from
``/proc`` (Linux).

    .venv/bin/python bench/proxy_memory.py [--calls N] [--first N] [--clients C]
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import requests
from proxy_overhead import UPSTREAM, start

ROOT = Path(__file__).resolve().parent.parent
GOAL_GROWTH_MB = 50.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmRSS in /proc (Linux only)")


def calls(url: str, total: int, clients: int) -> None:
    """``total`` calls to ``url``, spread over ``clients`` concurrent clients."""
    share = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]

    def client(n: int) -> None:
        with requests.Session() as session:
            session.trust_env = False
            for _ in range(n):
                session.get(url, timeout=10).raise_for_status()

    threads = [threading.Thread(target=client, args=(n,)) for n in share]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000, help="proxied calls in all")
    parser.add_argument("--first", type=int, default=5_000, help="calls before the first RSS")
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()

    upstream, upstream_url = start(
        [sys.executable, "-c", UPSTREAM.format(tests=str(ROOT / "tests"))]
    )
    proxy, line = start(
        [sys.executable, "-m", "flakestorm", "proxy", "--port", "0", "--tool",
         f"bench={upstream_url}"]
    )  # fmt: skip
    url = f"{line.split(' on ', 1)[1].split(' ', 1)[0]}/tools/bench/v1/forecast?city=Paris"
    try:
        calls(url, args.first, args.clients)
        first = rss_mb(proxy.pid)
        calls(url, args.calls - args.first, args.clients)
        last = rss_mb(proxy.pid)
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(10)
    growth = last - first
    verdict = "ok" if growth <= GOAL_GROWTH_MB else "OVER GOAL"
    print(f"proxy RSS after {args.first:,} calls: {first:.1f} MB")
    print(f"proxy RSS after {args.calls:,} calls: {last:.1f} MB")
    print(f"growth: {growth:.1f} MB (goal <= {GOAL_GROWTH_MB:.0f} MB: {verdict})")
    return 0 if growth <= GOAL_GROWTH_MB else 1


if __name__ == "__main__":
    sys.exit(main())
