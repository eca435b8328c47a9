"""Loader time against config size, and the time to refuse hostile configs.

A benchmark, not a test. Part 1 loads configs of 32 KiB to 1 MiB of three shapes — many golden
prompts (a valid config), many invariants (a valid config), many unknown keys (refused with one
problem per key) — and prints the median time of each and its time per KiB relative to the
smallest size of the shape (32 KiB): a loader linear in the file's size keeps that ratio near 1 (a
quadratic one doubles it with every doubling of the size). Part 2 prints the time each hostile
shape of ``tests/test_config_fuzz.py`` takes to be refused (goal: under 1 s each).

    .venv/bin/python bench/loader_scaling.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import contextlib

from flakestorm.errors import ConfigError
from flakestorm.loader import load_config_text

KIB = 1024
SIZES_KIB = (32, 64, 128, 256, 512, 1024)
HEAD = "agent:\n  endpoint: http://127.0.0.1:9/chat\n"
CONTRACT = "contract:\n  name: c\n  chaos_matrix: [{name: calm}]\n  invariants:\n"


def prompts(size: int) -> str:
    line = '  - "what is the weather in Paris, and should I take an umbrella today?"\n'
    body = line * (size // len(line))
    return HEAD + "golden_prompts:\n" + body + CONTRACT + "    - {id: a, type: output_not_empty}\n"


def invariants(size: int) -> str:
    lines = []
    total = 0
    i = 0
    while total < size:
        line = f"    - {{id: inv{i}, type: contains, value: sunny weather, severity: high}}\n"
        lines.append(line)
        total += len(line)
        i += 1
    return HEAD + "golden_prompts: [hi]\n" + CONTRACT + "".join(lines)


def unknown_keys(size: int) -> str:
    lines = []
    total = 0
    i = 0
    while total < size:
        line = f"unknown_key_number_{i}: 1\n"
        lines.append(line)
        total += len(line)
        i += 1
    return HEAD + "".join(lines)


SHAPES: dict[str, Callable[[int], str]] = {
    "golden prompts": prompts,
    "invariants": invariants,
    "unknown keys": unknown_keys,
}


def load_s(text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        with contextlib.suppress(ConfigError):
            load_config_text(text, env={})
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load_s(prompts(16 * KIB), 1)  # warm the imports
    print(f"{'shape':<16} {'size':>9} {'median s':>9} {'s/KiB vs 32 KiB':>16}")
    for name, make in SHAPES.items():
        base: float | None = None
        for size_kib in SIZES_KIB:
            text = make(size_kib * KIB)
            seconds = load_s(text, args.runs)
            per_kib = seconds / (len(text) / KIB)
            base = base or per_kib
            print(f"{name:<16} {len(text) // KIB:>6} KiB {seconds:>9.3f} {per_kib / base:>15.2f}x")
    from test_config_fuzz import HOSTILE

    print()
    print(f"{'hostile shape':<36} {'median s':>9}  (goal: under 1 s)")
    for name, text in HOSTILE.items():
        print(f"{name:<36} {load_s(text, args.runs):>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
