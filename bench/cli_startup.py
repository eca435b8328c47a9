"""Start-up time of the CLI beside flakestorm 2.0.0 (the public release), on the same machine.

A benchmark, not a test. Times the median of N runs of:

- ``flakestorm --help`` against 2.0.0's ``flakestorm --help`` (goal: ≤ 0.3×);
- ``flakestorm validate`` against 2.0.0's ``flakestorm contract validate`` on one config both
  read, a contract of 6 invariants × 4 scenarios (goal: ≤ 0.5×).

flakestorm 2.0.0 is installed from PyPI into a virtualenv of its own the first time
(``--baseline-venv``, default ``~/.cache/flakestorm/bench/flakestorm-2.0.0``).

The two commands of a pair run alternately, so load from other processes falls on both alike.
Each line gives the medians of the wall time and of the CPU time (user + system, the kernel's
count for the child): on an idle machine they agree within a few per cent; on a shared one the
CPU time is the steadier, and it is the one the goal is judged on.

A last line gives the floor under ``validate``: an interpreter that imports click and yaml and
defines one pydantic model (the libraries every config read needs), beside the same 2.0.0
command.

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
GOALS = {"flakestorm --help": 0.3, "flakestorm validate": 0.5}

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


def medians_ms(mine: list[str], theirs: list[str], runs: int, cwd: Path) -> tuple[Timing, Timing]:
    """Median wall and CPU times of ``mine`` and ``theirs``, run alternately ``runs`` times."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80"}
    samples: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    for command in (mine, theirs):  # warm caches
        subprocess.run(command, capture_output=True, check=True, cwd=cwd, env=env)
    for _ in range(runs):
        for side, command in enumerate((mine, theirs)):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True, cwd=cwd, env=env)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            samples[side].append((wall * 1000, cpu * 1000))
    a, b = (
        Timing(statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
        for s in (samples[0], samples[1])
    )
    return a, b


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
        pairs = {
            "flakestorm --help": ([new, "--help"], [old, "--help"]),
            "flakestorm validate": (
                [new, "validate", "-c", "flakestorm.yaml"],
                [old, "contract", "validate", "-c", "flakestorm.yaml"],
            ),
        }
        missed = False
        for name, (mine, theirs) in pairs.items():
            a, b = medians_ms(mine, theirs, args.runs, cwd)
            ratio = a.cpu_ms / b.cpu_ms
            goal = GOALS[name]
            missed |= ratio > goal
            verdict = "ok" if ratio <= goal else f"MISSED (goal <= {goal}x)"
            print(
                f"{name:<20} cpu {a.cpu_ms:4.0f} ms vs 2.0.0 {b.cpu_ms:4.0f} ms = {ratio:.2f}x "
                f"(wall {a.wall_ms:4.0f} vs {b.wall_ms:4.0f} ms = {a.wall_ms / b.wall_ms:.2f}x, "
                f"median of {args.runs})  {verdict}"
            )
        floor, b = medians_ms(
            [sys.executable, "-c", FLOOR], pairs["flakestorm validate"][1], args.runs, cwd
        )
        print(
            f"{'floor of validate':<20} cpu {floor.cpu_ms:4.0f} ms vs 2.0.0 {b.cpu_ms:4.0f} ms = "
            f"{floor.cpu_ms / b.cpu_ms:.2f}x (wall {floor.wall_ms / b.wall_ms:.2f}x): "
            "python + click + yaml + one pydantic model"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
