"""Benchmarks of the contract engine (run: ``.venv/bin/python bench/contract_matrix.py``).

1. Matrix wall time: 10 invariants × 6 scenarios × 5 prompts = 300 invocations against a
   loopback HTTP agent that takes 50 ms per answer, at concurrency 8. Ideal:
   300 × 50 ms / 8 = 1.875 s; target ≤ 1.25 × ideal. Also compared, in the same run, with a
   bare thread pool of 8 making the same 300 requests with ``requests`` (the floor any
   harness could reach on this machine).
2. Harness throughput against a zero-latency python agent: target ≥ 2,000 invocations/s.
3. Peak memory (max RSS) of a 10,000-cell run (100 invariants × 100 scenarios × 1 prompt,
   python agent), measured in a fresh process: target < 200 MB.

Prints one line per measurement and exits 1 when a target is missed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.server import LoopbackServer, Request, Response  # noqa: E402

from flakestorm.agents.factory import build_agent  # noqa: E402
from flakestorm.checks.invariants import build_checker  # noqa: E402
from flakestorm.engine.executor import Executor, Options  # noqa: E402
from flakestorm.engine.matrix_plan import build_plan  # noqa: E402
from flakestorm.loader import load_config_text  # noqa: E402

INVARIANT_KINDS = [
    {"type": "contains", "value": "answer"},
    {"type": "regex", "pattern": r"answer \d+"},
    {"type": "excludes_pattern", "patterns": [r"SYSTEM PROMPT"]},
    {"type": "excludes_pii"},
    {"type": "output_not_empty"},
    {"type": "latency", "max_ms": 5000},
    {"type": "refusal_check", "expect": "comply"},
    {"type": "completes"},
    {"type": "similarity", "expected": "the answer 42 to your question"},
    {"type": "contains_any", "values": ["answer", "reply"]},
]


def config_text(
    endpoint: str, agent_type: str, invariants: int, scenarios: int, prompts: int
) -> str:
    doc = {
        "agent": {"type": agent_type, "endpoint": endpoint},
        "golden_prompts": [f"question {i}?" for i in range(prompts)],
        "contract": {
            "name": "bench",
            "invariants": [
                {"id": f"inv{i}", **INVARIANT_KINDS[i % len(INVARIANT_KINDS)]}
                for i in range(invariants)
            ],
            "chaos_matrix": [
                {"name": "calm"}
                if s == 0
                else {
                    "name": f"poisoned-{s}",
                    "context_attacks": [{"type": "memory_poisoning", "payload": f"note {s}"}],
                }
                for s in range(scenarios)
            ],
        },
    }
    return json.dumps(doc)  # JSON is YAML


def run_matrix(text: str, base_dir: Path, concurrency: int) -> tuple[float, int]:
    loaded = load_config_text(text, base_dir=base_dir)
    config = loaded.config
    assert config.contract is not None
    plan = build_plan(config.contract, config.golden_prompts)
    agent = build_agent(config.agent, base_dir)
    checker = build_checker(config.advanced)
    executor = Executor(agent, checker, None, Options(concurrency=concurrency))
    t0 = time.perf_counter()
    results = executor.run(plan, {})
    elapsed = time.perf_counter() - t0
    agent.close()
    assert all(r.status.value == "passed" for r in results), [r.reason for r in results][:3]
    return elapsed, executor.invocations


def bench_latency_bound() -> bool:
    def slow(request: Request) -> Response:
        time.sleep(0.050)  # the agent's own latency
        return Response.json({"output": "the answer 42 to your question"})

    with LoopbackServer(slow) as server:
        endpoint = server.url_for("/chat")
        text = config_text(endpoint, "http", 10, 6, 5)
        elapsed, n = run_matrix(text, ROOT, concurrency=8)

        import requests

        session = requests.Session()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: session.post(endpoint, json={"input": "q"}).json(), range(300)))
        floor = time.perf_counter() - t0
    ideal = 300 * 0.050 / 8
    ok = elapsed <= 1.25 * ideal
    print(
        f"matrix 10x6x5 ({n} invocations, 50 ms agent, concurrency 8): {elapsed:.3f} s = "
        f"{elapsed / ideal:.3f} x ideal {ideal:.3f} s (target <= 1.25); bare thread pool "
        f"{floor:.3f} s, harness/bare = {elapsed / floor:.3f}  {'OK' if ok else 'MISSED'}"
    )
    return ok


AGENT_MODULE = """
def answer(prompt):
    return "the answer 42 to your question"
"""


def bench_throughput() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bench_agent.py").write_text(AGENT_MODULE)
        text = config_text("bench_agent:answer", "python", 10, 10, 50)
        runs = [run_matrix(text, Path(tmp), concurrency=4) for _ in range(3)]
    rates = [n / elapsed for elapsed, n in runs]
    rate = statistics.median(rates)
    ok = rate >= 2000
    print(
        f"throughput, zero-latency python agent ({runs[0][1]} invocations, concurrency 4): "
        f"median {rate:,.0f} invocations/s over 3 runs (target >= 2,000)  "
        f"{'OK' if ok else 'MISSED'}"
    )
    return ok


def bench_memory() -> bool:
    code = (
        "import sys, resource, tempfile, pathlib\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "import contract_matrix as b\n"
        "tmp = tempfile.mkdtemp()\n"
        "pathlib.Path(tmp, 'bench_agent.py').write_text(b.AGENT_MODULE)\n"
        "text = b.config_text('bench_agent:answer', 'python', 100, 100, 1)\n"
        "elapsed, n = b.run_matrix(text, pathlib.Path(tmp), concurrency=4)\n"
        "print(elapsed, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    elapsed, n, rss_kb = float(out[0]), int(out[1]), int(out[2])
    rss_mb = rss_kb / 1024
    ok = rss_mb < 200
    print(
        f"memory, 10,000 cells ({n} invocations in {elapsed:.2f} s): peak RSS {rss_mb:.0f} MB "
        f"(target < 200 MB)  {'OK' if ok else 'MISSED'}"
    )
    return ok


def main() -> int:
    threading.stack_size(512 * 1024)
    results = [bench_latency_bound(), bench_throughput(), bench_memory()]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
