"""Benchmark of the mutation phase (run: ``.venv/bin/python bench/mutation_phase.py``).

10 golden prompts × 24 mutations (the 14 prompt-level types, round-robin) = 240 mutations
against a loopback HTTP agent that takes 50 ms per answer, at concurrency 8, through the whole
phase (generation, the executor, three invariants per reply). Ideal: 240 × 50 ms / 8 = 1.5 s;
target ≤ 1.25 × ideal (best of 3). Prints one line and exits 1 when the target is missed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.server import LoopbackServer, Request, Response  # noqa: E402

from flakestorm.config import MutationType  # noqa: E402
from flakestorm.engine.runner import run_phases  # noqa: E402
from flakestorm.loader import load_config_text  # noqa: E402

LATENCY_S = 0.050
CONCURRENCY = 8
PROMPTS = 10
COUNT = 24


def main() -> int:
    def slow(request: Request) -> Response:
        time.sleep(LATENCY_S)  # the agent's own latency
        return Response.json({"output": "The quote is $123.45 according to the exchange."})

    types = [k.value for k in MutationType if not k.request_level and k is not MutationType.CUSTOM]
    with LoopbackServer(slow) as server:
        doc = {
            "agent": {"endpoint": server.url_for("/invoke")},
            "golden_prompts": [f"What is ticker {i} trading at?" for i in range(PROMPTS)],
            "invariants": [
                {"type": "excludes_pattern", "patterns": ["PWNED"]},
                {"type": "output_not_empty"},
                {"type": "latency", "max_ms": 5000},
            ],
            "mutations": {"types": types, "count": COUNT},
            "advanced": {"concurrency": CONCURRENCY},
        }
        loaded = load_config_text(json.dumps(doc), base_dir=ROOT)
        times = []
        n = 0
        for _ in range(3):
            started = time.perf_counter()
            result = run_phases(loaded, ["mutation"])
            times.append(time.perf_counter() - started)
            n = len(result.phases["mutation"].mutations)
            assert result.phases["mutation"].score.score == 100.0
    ideal = n * LATENCY_S / CONCURRENCY
    best = min(times)
    ok = best <= 1.25 * ideal
    print(
        f"mutation phase ({n} mutations, {LATENCY_S * 1000:.0f} ms agent, concurrency "
        f"{CONCURRENCY}): {best:.3f} s = {best / ideal:.3f} x ideal {ideal:.3f} s (best of 3; "
        f"target <= 1.25)  {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
