"""Memory and time of the commands that read large ``results.json`` files (SPEC §9) (run:
``.venv/bin/python bench/large_results.py [merge|compare ...]``).

A benchmark, not a test. The results are made synthetically, written with the real writer
(:func:`flakestorm.reporters.json.write`), in a child process: a contract of 200 invariants ×
500 scenarios (100,000 cells, one prompt each, about 3% failing), its resolved config and
digest as a run records them.

- ``merge``: ``flakestorm merge`` of its 4 shards (25,000 cells each), writing the run's
  ``results.json`` (``output.formats: [json]``, as a merge job that hands the result on).
  Targets: peak RSS ≤ 200 MB, wall time ≤ 10 s. ``merge-all``: the same writing every format
  (junit, markdown, html, json), what an aggregating CI job writes: the same targets.
- ``compare``: ``flakestorm compare BASE.json HEAD.json`` of two whole 100,000-cell runs (HEAD
  fails other cells than BASE). Target: peak RSS ≤ 200 MB.

Each command runs in a fresh process; its peak RSS is the kernel's (``wait4``). Prints one
line per measurement and exits 1 when a target is missed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
INVARIANTS, SCENARIOS = 200, 500

GENERATE = """
import sys
from dataclasses import replace
from pathlib import Path

from flakestorm.loader import load_config_text
from flakestorm.reporters import json as json_report
from flakestorm.results.model import (
    CellResult, InvariantInfo, PhaseOutcome, PromptResult, RunResult, ScenarioInfo, Status,
)
from flakestorm.results.scoring import score_cells, score_run
from flakestorm.results.shards import Shard, config_digest, config_document

invariants, scenarios, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
shards, out, formats = int(sys.argv[4]), Path(sys.argv[5]), sys.argv[6]
text = "\\n".join(
    ["agent: {type: python, endpoint: 'bench_agent:answer'}", "golden_prompts: ['question?']",
     "contract:", "  name: bench", "  invariants:"]
    + [f"    - {{id: inv{i}, type: contains, value: '42'}}" for i in range(invariants)]
    + ["  chaos_matrix:"] + [f"    - {{name: s{s}}}" for s in range(scenarios)]
    + [f"output: {{formats: [{formats}]}}"]
)
loaded = load_config_text(text)
document = config_document(loaded.config, ())
digest = config_digest(loaded.config, ())
rows = tuple(
    InvariantInfo(f"inv{i}", "contains", "critical" if i == 0 else "medium", "always", False,
                  None, 6 + i)
    for i in range(invariants)
)
infos = tuple(ScenarioInfo(name=f"s{s}", faults=()) for s in range(scenarios))


def cell(index):
    failed = (index * 7 + seed) % 31 == 0
    output = f"the answer {'41' if failed else '42'} to your question (cell {index})"
    prompt = PromptResult(
        prompt="question?", sent="question?", run=0, passed=not failed,
        reason="does not contain '42'" if failed else "contains '42'",
        output=output, latency_ms=12.5 + index % 10, status=200,
    )
    return CellResult(
        index=index, invariant_id=f"inv{index // scenarios}", scenario=f"s{index % scenarios}",
        severity=rows[index // scenarios].severity,
        status=Status.FAILED if failed else Status.PASSED, reason=prompt.reason,
        runs_passed=0 if failed else 1, runs_total=1, prompts=(prompt,),
    )


total = invariants * scenarios
parts = [(k, Shard(k, shards)) for k in range(1, shards + 1)] if shards else [(0, None)]
for k, shard in parts:
    cells = tuple(cell(i) for i in range(total) if shard is None or shard.owns(i))
    outcome = PhaseOutcome(
        phase="contract", name="bench", invariants=rows, scenarios=infos, cells=cells,
        score=score_cells(cells),
    )
    overall, code = score_run({"contract": outcome}, {"contract": 1.0}, 70.0)
    result = RunResult(
        flakestorm_version="2.0.0", config_path="flakestorm.yaml", config_digest=digest,
        seed=seed, started_at="2026-01-01T00:00:00+00:00", duration_s=60.0, complete=True,
        stop_reason=None, invocations=len(cells), phases={"contract": outcome},
        overall=overall, exit_code=int(code), shard=shard,
        config=document if shard is not None else None,
    )
    name = f"shard{k}/results.json" if shard is not None else "results.json"
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    with (out / name).open("w", encoding="utf-8") as file:
        json_report.write(result, file)
"""


def generate(out: Path, seed: int, shards: int, formats: str = "json") -> None:
    """Write the synthetic results under ``out`` (``shardK/results.json``, or one whole run's
    ``results.json`` when ``shards`` is 0), their config's ``output.formats`` ``formats``."""
    out.mkdir(parents=True, exist_ok=True)
    args = [str(INVARIANTS), str(SCENARIOS), str(seed), str(shards), str(out), formats]
    subprocess.run([sys.executable, "-c", GENERATE, *args], env=ENV, check=True)


def measure(*args: str | Path, cwd: Path) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS MB, exit code, stderr) of ``flakestorm ARGS`` in a fresh
    process."""
    t0 = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "flakestorm", *map(str, args)],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    err = process.stderr.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, process.returncode, err


SECONDS_GOAL, RSS_GOAL_MB = 10.0, 200.0


def bench_merge(formats: str = "json") -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate(work, seed=7, shards=4, formats=formats)
        size = sum(p.stat().st_size for p in work.rglob("results.json"))
        seconds, rss, code, err = measure(
            "merge", "shard1", "shard2", "shard3", "shard4", "-o", "merged", cwd=work
        )
        if code not in (0, 1):
            raise RuntimeError(f"flakestorm merge exited {code}: {err[-2000:]}")
        reports = {p.name: p.stat().st_size for p in (work / "merged").iterdir()}
    ok = rss <= RSS_GOAL_MB and seconds <= SECONDS_GOAL
    shown = ", ".join(f"{n} {s / 1e6:.1f} MB" for n, s in sorted(reports.items()))
    print(
        f"merge ({formats}): 4 shards, {INVARIANTS * SCENARIOS:,} cells ({size / 1e6:.0f} MB of "
        f"results.json) in {seconds:.1f} s (target <= {SECONDS_GOAL:g} s), peak RSS {rss:.0f} MB "
        f"(target <= {RSS_GOAL_MB:g} MB); "
        f"reports: {shown}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores  "
        f"{'OK' if ok else 'MISSED'}"
    )
    return ok


def bench_merge_all() -> bool:
    return bench_merge("junit, markdown, html, json")


def bench_compare() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate(work / "base", seed=7, shards=0)
        generate(work / "head", seed=8, shards=0)
        size = (work / "head" / "results.json").stat().st_size
        seconds, rss, code, err = measure(
            "compare", "base/results.json", "head/results.json", cwd=work
        )
        if code not in (0, 1):
            raise RuntimeError(f"flakestorm compare exited {code}: {err[-2000:]}")
    ok = rss <= 200
    print(
        f"compare: two {INVARIANTS * SCENARIOS:,}-cell runs ({size / 1e6:.0f} MB of results.json "
        f"each) in {seconds:.1f} s, peak RSS {rss:.0f} MB (target <= 200 MB)  "
        f"{'OK' if ok else 'MISSED'}"
    )
    return ok


BENCHES = {"merge": bench_merge, "merge-all": bench_merge_all, "compare": bench_compare}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHES)
    results = [BENCHES[name]() for name in chosen]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
