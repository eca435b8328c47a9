"""Start-up time of the CLI: `flakestorm --help` and `flakestorm validate -c <starter>`.

A benchmark, not a test: prints the median wall time of N runs of each command (goal: each
under 0.5 s). Uses hyperfine when it is installed, else its own loop of subprocess runs.

    .venv/bin/python bench/cli_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.5


def flakestorm_command() -> list[str]:
    script = Path(sys.executable).parent / "flakestorm"
    return [str(script)] if script.exists() else [sys.executable, "-m", "flakestorm"]


def median_s(command: list[str], runs: int) -> float:
    subprocess.run(command, capture_output=True, check=True)  # warm the file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    flakestorm = flakestorm_command()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*flakestorm, "init", "--path", tmp], capture_output=True, check=True)
        config = str(Path(tmp) / "flakestorm.yaml")
        commands = {
            "flakestorm --help": [*flakestorm, "--help"],
            "flakestorm validate": [*flakestorm, "validate", "-c", config],
        }
        hyperfine = shutil.which("hyperfine")
        if hyperfine:
            quoted = [" ".join(c) for c in commands.values()]
            runs = str(args.runs)
            subprocess.run([hyperfine, "--warmup", "1", "--runs", runs, *quoted], check=True)
            return 0
        slow = False
        for name, command in commands.items():
            seconds = median_s(command, args.runs)
            slow |= seconds >= GOAL_S
            verdict = "ok" if seconds < GOAL_S else f"SLOW (goal < {GOAL_S} s)"
            print(f"{name:<22} median {seconds * 1000:6.0f} ms of {args.runs} runs  {verdict}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
