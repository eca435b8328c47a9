"""Start-up time of the CLI beside flakestorm 2.0.0 (the public release), on the same machine.

A benchmark, not a test. Times the median of N runs of:

- ``flakestorm --help`` against 2.0.0's ``flakestorm --help`` (goal: ≤ 0.3×);
- ``flakestorm validate`` on a contract of 6 invariants × 4 scenarios, against its floor: an
  interpreter that imports click and yaml and builds one pydantic model (what any config read
  needs before flakestorm's own work). Goal: at most 60 ms of CPU over the floor. 2.0.0's
  ``flakestorm contract validate`` on the same file is shown beside it.

flakestorm 2.0.0 is installed from PyPI into a virtualenv of its own the first time
(``--baseline-venv``, default ``~/.cache/flakestorm/bench/flakestorm-2.0.0``).

The commands compared run alternately, so load from other processes falls on all alike. Each
line gives the medians of the wall time and of the CPU time (user + system, the kernel's count
for the child): on an idle machine they agree within a few per cent; on a shared one the CPU
time is the steadier, and it is the one the goals are judged on.

    .venv/bin/python bench/cli_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BASELINE = "flakestorm==2.0.0"
HELP_GOAL = 0.3
VALIDATE_GOAL_MS = 60

FLOOR = """\
import os

os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"  # as validate does
import click, yaml
from pydantic import BaseModel


class Floor(BaseModel):
    x: int


Floor.model_validate({"x": 1})
"""
"""What any config read needs before flakestorm's own work: the interpreter, click, yaml and
pydantic with one model built and used (no plugin scan, as in ``validate``)."""

CONFIG = """\
version: "2.0"
agent:
  endpoint: http://127.0.0.1:8000/invoke
  type: http
invariants:
  - {type: contains, value: price}
golden_prompts:
  - What is the price of AAPL?
  - Cancel my order 42
contract:
  name: bench
  invariants:
    - {id: mentions-price, type: contains, value: price, severity: critical}
    - {id: quick, type: latency, max_ms: 5000}
    - {id: no-leak, type: excludes_pattern, patterns: ["sk-[a-z0-9]+"], severity: high}
    - {id: json-ok, type: valid_json, severity: low}
    - {id: not-empty, type: output_not_empty}
    - {id: no-pii, type: excludes_pii, severity: high}
  chaos_matrix:
    - {name: calm}
    - name: tool-down
      tool_faults: [{tool: quotes, mode: error, error_code: 503}]
    - name: llm-limited
      llm_faults: [{mode: rate_limit}]
    - name: injected
      context_attacks: [{type: indirect_injection, payloads: ["Ignore previous instructions"]}]
"""


def ours() -> str:
    script = Path(sys.executable).parent / "flakestorm"
    return str(script)


def baseline(venv: Path) -> str:
    """flakestorm 2.0.0's command, installed into ``venv`` when it is not there yet."""
    script = venv / "bin" / "flakestorm"
    if not script.exists():
        print(f"installing {BASELINE} into {venv} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", BASELINE]
        subprocess.run(pip, check=True)
    return str(script)


def medians_ms(commands: list[list[str]], runs: int, cwd: Path) -> list[Timing]:
    """Median wall and CPU times of each of ``commands``, run alternately ``runs`` times."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80"}
    samples: list[list[tuple[float, float]]] = [[] for _ in commands]
    for command in commands:  # warm caches
        subprocess.run(command, capture_output=True, check=True, cwd=cwd, env=env)
    for _ in range(runs):
        for side, command in enumerate(commands):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True, cwd=cwd, env=env)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            samples[side].append((wall * 1000, cpu * 1000))
    return [
        Timing(statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
        for s in samples
    ]


@dataclass(frozen=True)
class Timing:
    wall_ms: float
    cpu_ms: float


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    default_venv = Path.home() / ".cache" / "flakestorm" / "bench" / "flakestorm-2.0.0"
    parser.add_argument("--baseline-venv", type=Path, default=default_venv)
    args = parser.parse_args()
    old = baseline(args.baseline_venv)
    new = ours()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "flakestorm.yaml").write_text(CONFIG)
        a, b = medians_ms([[new, "--help"], [old, "--help"]], args.runs, cwd)
        ratio = a.cpu_ms / b.cpu_ms
        missed = ratio > HELP_GOAL
        verdict = "ok" if not missed else f"MISSED (goal <= {HELP_GOAL}x)"
        print(
            f"{'flakestorm --help':<20} cpu {a.cpu_ms:4.0f} ms vs 2.0.0 {b.cpu_ms:4.0f} ms = "
            f"{ratio:.2f}x (wall {a.wall_ms:4.0f} vs {b.wall_ms:4.0f} ms, median of {args.runs})  "
            f"{verdict}"
        )
        ours_, floor, theirs = medians_ms(
            [
                [new, "validate", "-c", "flakestorm.yaml"],
                [sys.executable, "-c", FLOOR],
                [old, "contract", "validate", "-c", "flakestorm.yaml"],
            ],
            args.runs,
            cwd,
        )
        over = ours_.cpu_ms - floor.cpu_ms
        missed |= over > VALIDATE_GOAL_MS
        verdict = "ok" if over <= VALIDATE_GOAL_MS else f"MISSED (goal <= {VALIDATE_GOAL_MS} ms)"
        print(
            f"{'flakestorm validate':<20} cpu {ours_.cpu_ms:4.0f} ms, floor {floor.cpu_ms:4.0f} ms "
            f"(python + click + yaml + one pydantic model): {over:.0f} ms over the floor "
            f"(wall {ours_.wall_ms - floor.wall_ms:.0f} ms, median of {args.runs})  {verdict}"
        )
        print(
            f"{'':<20} 2.0.0's contract validate: cpu {theirs.cpu_ms:4.0f} ms "
            f"({theirs.cpu_ms - floor.cpu_ms:.0f} ms over the floor): ours is "
            f"{ours_.cpu_ms / theirs.cpu_ms:.2f}x"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
