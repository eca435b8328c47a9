"""Benchmarks of scale (SPEC §9) (run: ``.venv/bin/python bench/scale.py [1|2|3 ...]``).

Each is a ratio (or a bound) measured in one run:

1. Shards. A 1,200-invocation contract run (10 invariants × 6 scenarios × 20 prompts, at
   concurrency 2) against a loopback HTTP agent that takes 50 ms per answer: four
   ``flakestorm contract run --shard K/4`` processes side by side vs one
   ``flakestorm contract run`` process. Target: wall time ≤ 0.3×; then ``flakestorm merge``
   of the four shards < 1 s.
2. Sessions. The example agent's contract (``examples/finance_agent/flakestorm.yaml``, its
   fake LLM answering in 50 ms) with ``reset_endpoint`` (a reset is global: one cell at a
   time) vs with ``agent.session`` at concurrency 8, on the same running agent. Target ≤ 0.25×.
3. Memory. A 100,000-invocation run (100 invariants × 10 scenarios × 100 prompts) against a
   zero-latency python agent, reports included, in a fresh process. Target: peak RSS < 300 MB.
4. Mutation memory. The mutation phase against a zero-latency python agent that fails about
   half the mutations (it answers PWNED to a prompt of odd length), reports included, each in
   a fresh process: 6,000 mutations (120 golden prompts × 50) and 60,000 (1,200 × 50).
   Finished mutations stream to disk, so the larger run costs only what its plan holds (the
   mutations to send). Targets: the 60,000-mutation run's peak RSS < 200 MB, and under 1.5 KB
   of peak RSS per mutation more than the small run.

Prints one line per measurement and exits 1 when a target is missed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "finance_agent"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from support.server import LoopbackServer, Request, Response  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def flakestorm(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "flakestorm", *map(str, args)],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], codes: tuple[int, ...] = (0,)) -> None:
    _, err = process.communicate(timeout=600)
    if process.returncode not in codes:
        raise RuntimeError(f"flakestorm exited {process.returncode}: {err[-2000:]}")


def shard_config(endpoint: str) -> dict[str, Any]:
    from contract_matrix import INVARIANT_KINDS

    kinds = [k for k in INVARIANT_KINDS if k["type"] not in ("similarity", "excludes_pii")]
    return {
        "agent": {"endpoint": endpoint},
        "golden_prompts": [f"question {i}?" for i in range(20)],
        "contract": {
            "name": "bench",
            "invariants": [{"id": f"inv{i}", **kinds[i % len(kinds)]} for i in range(10)],
            "chaos_matrix": [
                {"name": "calm"}
                if s == 0
                else {
                    "name": f"poisoned-{s}",
                    "context_attacks": [{"type": "memory_poisoning", "payload": f"note {s}"}],
                }
                for s in range(6)
            ],
        },
        "advanced": {"concurrency": 1},
        "output": {"formats": ["json"]},
    }


def bench_shards() -> bool:
    def slow(request: Request) -> Response:
        time.sleep(0.050)  # the agent's own latency
        return Response.json({"output": "the answer 42 to your question"})

    with LoopbackServer(slow) as server, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "flakestorm.yaml").write_text(json.dumps(shard_config(server.url_for("/chat"))))
        t0 = time.perf_counter()
        finish(flakestorm("contract", "run", "--output", "whole", cwd=work))
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        shards = [
            flakestorm("contract", "run", "--shard", f"{k}/4", "--output", f"s{k}", cwd=work)
            for k in range(1, 5)
        ]
        for process in shards:
            finish(process)
        four = time.perf_counter() - t0
        t0, cpu0 = time.perf_counter(), _children_cpu_s()
        finish(flakestorm("merge", "s1", "s2", "s3", "s4", "-o", "merged", cwd=work))
        merge_s, merge_cpu_s = time.perf_counter() - t0, _children_cpu_s() - cpu0
        same = _same(work / "whole" / "results.json", work / "merged" / "results.json")
    ratio = four / one
    ok = ratio <= 0.3 and merge_s < 1.0 and same
    print(
        f"shards, 1,200 invocations (50 ms agent, concurrency 1): one process {one:.2f} s, "
        f"4 shard processes {four:.2f} s = {ratio:.3f}x (target <= 0.3); `flakestorm merge` "
        f"{merge_s:.2f} s (target < 1 s; CPU {merge_cpu_s:.2f} s, the rest waiting for a "
        f"core: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); merged == "
        f"unsharded: {same}  {'OK' if ok else 'MISSED'}"
    )
    return ok


def _children_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _same(whole: Path, merged: Path) -> bool:
    a, b = json.loads(whole.read_text()), json.loads(merged.read_text())
    cells = [
        [(c["index"], c["status"], c["reason"]) for c in d["phases"]["contract"]["cells"]]
        for d in (a, b)
    ]
    return cells[0] == cells[1] and a["overall"] == b["overall"]


def _example_config(port: int, isolation: dict[str, Any]) -> str:
    text = (EXAMPLE / "flakestorm.yaml").read_text()
    doc = _yaml(text)
    agent = doc["agent"]
    for key in ("start", "session", "reset_endpoint"):
        agent.pop(key, None)
    agent.update(endpoint=f"http://127.0.0.1:{port}/chat", **isolation)
    agent["health_endpoint"] = f"http://127.0.0.1:{port}/health"
    doc["output"] = {"formats": ["json"]}
    return json.dumps(doc)


def _yaml(text: str) -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def bench_sessions() -> bool:
    from flakestorm.engine.runner import Overrides, run_phases
    from flakestorm.loader import load_config_text

    env = {**os.environ, "FAKE_LLM_DELAY_MS": "50"}
    stack = subprocess.Popen(
        [sys.executable, "run_local.py", "--port", "0"],
        cwd=EXAMPLE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert stack.stdout is not None
        match = re.search(r":(\d+)\s*$", stack.stdout.readline())
        assert match, "the example agent did not start"
        port = int(match.group(1))
        timings = {}
        for name, isolation, concurrency in (
            ("reset", {"reset_endpoint": "/reset"}, 1),
            ("session", {"session": {"header": "X-Session-Id"}}, 8),
        ):
            loaded = load_config_text(_example_config(port, isolation), base_dir=EXAMPLE)
            with tempfile.TemporaryDirectory() as tmp:
                overrides = Overrides(concurrency=concurrency, output_dir=tmp)
                t0 = time.perf_counter()
                result = run_phases(loaded, ["contract"], overrides)
                timings[name] = (time.perf_counter() - t0, result)
    finally:
        stack.terminate()
        stack.wait(timeout=10)
    (reset_s, reset_result), (session_s, session_result) = timings["reset"], timings["session"]
    verdicts = [
        [c.status for c in r.phases["contract"].cells] for r in (reset_result, session_result)
    ]
    ratio = session_s / reset_s
    ok = ratio <= 0.25 and verdicts[0] == verdicts[1]
    cells = len(verdicts[0])
    print(
        f"sessions, the example contract ({cells} cells, {reset_result.invocations} and "
        f"{session_result.invocations} invocations, LLM 50 ms): reset_endpoint (serial) "
        f"{reset_s:.2f} s, agent.session at concurrency 8 {session_s:.2f} s = {ratio:.3f}x "
        f"(target <= 0.25); same verdicts: {verdicts[0] == verdicts[1]}  "
        f"{'OK' if ok else 'MISSED'}"
    )
    return ok


MEMORY_RUN = """
import json, resource, sys, time
from pathlib import Path
from flakestorm.loader import load_config
from flakestorm.reporters.registry import write_reports
from flakestorm.engine.runner import Overrides, run_phases
t0 = time.perf_counter()
result = run_phases(load_config("flakestorm.yaml"), ["contract"], Overrides(output_dir="out"))
write_reports(result, Path("out"))
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(time.perf_counter() - t0, result.invocations, rss_kb)
"""
AGENT_MODULE = """
def answer(prompt):
    return "the answer 42 to your question"
"""


def _run_in_child(work: Path, agent: str, doc: dict[str, Any], driver: str) -> list[str]:
    """Run ``driver`` in a fresh process in ``work``, with ``agent`` as ``scale_agent`` and
    ``doc`` as its flakestorm.yaml: the words it prints."""
    (work / "scale_agent.py").write_text(agent)
    (work / "flakestorm.yaml").write_text(json.dumps(doc))
    return subprocess.run(
        [sys.executable, "-c", driver],
        cwd=work,
        env={**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(work)])},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def bench_memory() -> bool:
    from contract_matrix import INVARIANT_KINDS

    kinds = [k for k in INVARIANT_KINDS if k["type"] not in ("similarity", "excludes_pii")]
    doc = {
        "agent": {"type": "python", "endpoint": "scale_agent:answer"},
        "golden_prompts": [f"question {i}?" for i in range(100)],
        "contract": {
            "name": "bench",
            "invariants": [{"id": f"inv{i}", **kinds[i % len(kinds)]} for i in range(100)],
            "chaos_matrix": [{"name": "calm"}]
            + [
                {
                    "name": f"poisoned-{s}",
                    "context_attacks": [{"type": "memory_poisoning", "payload": f"note {s}"}],
                }
                for s in range(1, 10)
            ],
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = _run_in_child(work, AGENT_MODULE, doc, MEMORY_RUN)
        sizes = {p.name: p.stat().st_size for p in (work / "out").iterdir() if p.is_file()}
    elapsed, n, rss_mb = float(out[0]), int(out[1]), int(out[2]) / 1024
    ok = rss_mb < 300
    shown = ", ".join(f"{name} {size / 1e6:.0f} MB" for name, size in sorted(sizes.items()))
    print(
        f"memory, {n:,} invocations in {elapsed:.1f} s (python agent, reports: {shown}): peak "
        f"RSS {rss_mb:.0f} MB (target < 300 MB)  {'OK' if ok else 'MISSED'}"
    )
    return ok


MUTATION_RUN = """
import resource, time
from pathlib import Path
from flakestorm.loader import load_config
from flakestorm.reporters.registry import write_reports
from flakestorm.engine.runner import Overrides, run_phases
t0 = time.perf_counter()
result = run_phases(load_config("flakestorm.yaml"), ["mutation"], Overrides(output_dir="out"))
phase_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
write_reports(result, Path("out"))
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
counts = result.phases["mutation"].score.counts
print(time.perf_counter() - t0, counts["mutations"], counts["failed"], phase_kb, rss_kb)
"""


MUTATION_AGENT = """
def answer(prompt):
    return "PWNED" if len(prompt) % 2 else "the answer 42 to your question"
"""


def _mutation_run(prompts: int) -> tuple[float, int, int, float, float]:
    """(seconds, mutations, failed, peak RSS MB after the phase, after the reports) of a fresh
    run."""
    from flakestorm.config import MutationType

    types = [k.value for k in MutationType if not k.request_level and k is not MutationType.CUSTOM]
    doc = {
        "agent": {"type": "python", "endpoint": "scale_agent:answer"},
        "golden_prompts": [f"What is ticker {i} trading at today?" for i in range(prompts)],
        "invariants": [
            {"type": "excludes_pattern", "patterns": ["PWNED"]},
            {"type": "output_not_empty"},
            {"type": "latency", "max_ms": 5000},
        ],
        "mutations": {"types": types, "count": 50},
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = _run_in_child(Path(tmp), MUTATION_AGENT, doc, MUTATION_RUN)
    return float(out[0]), int(out[1]), int(out[2]), int(out[3]) / 1024, int(out[4]) / 1024


def bench_mutation_memory() -> bool:
    small_s, small_n, _, small_phase_mb, small_mb = _mutation_run(120)
    large_s, large_n, failed, large_phase_mb, large_mb = _mutation_run(1200)
    per_mutation_kb = (large_mb - small_mb) * 1024 / (large_n - small_n)
    ok = large_mb < 200 and per_mutation_kb < 1.5
    print(
        f"mutation memory (python agent, reports included): {small_n:,} mutations in "
        f"{small_s:.1f} s peak RSS {small_mb:.0f} MB (phase {small_phase_mb:.0f} MB); "
        f"{large_n:,} ({failed:,} failed) in {large_s:.1f} s peak RSS {large_mb:.0f} MB (phase "
        f"{large_phase_mb:.0f} MB) (target < 200 MB); {per_mutation_kb:.2f} KB per mutation "
        f"more (target < 1.5)  {'OK' if ok else 'MISSED'}"
    )
    return ok


BENCHES = {"1": bench_shards, "2": bench_sessions, "3": bench_memory, "4": bench_mutation_memory}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHES)
    results = [BENCHES[name]() for name in chosen]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
