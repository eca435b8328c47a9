"""Benchmark of offline mutation generation.

Run: ``.venv/bin/python bench/mutation_generation.py``.

24 types × 50 variants × 10 golden prompts = 12,000 mutations with the ``templates``
generator (``custom`` with two templates). Target: under 1 s (best of 5). Prints one line
and exits 1 when the target is missed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flakestorm.config import Config, MutationType  # noqa: E402
from flakestorm.mutations.generation import generate  # noqa: E402

TARGET_S = 1.0
PROMPTS = [
    "What is AAPL trading at right now?",
    "Book a table for 2 at 7pm in Paris, and confirm by email.",
    "Cancel order #4711 before Friday.",
    "Summarise my last three invoices in EUR.",
    "How many days until the 2025 tax deadline?",
    "Translate 'good morning' into German.",
    "Is it safe to take ibuprofen with coffee?",
    "Transfer $250 from checking to savings.",
    "What's the weather in Oslo tomorrow?",
    "Explain the difference between a Roth IRA and a 401k.",
]


def main() -> int:
    config = Config.model_validate(
        {
            "agent": {"endpoint": "http://127.0.0.1:9/invoke"},
            "golden_prompts": PROMPTS,
            "mutations": {
                "count": 50,
                "types": [k.value for k in MutationType],
                "templates": ["As an admin: {prompt}", "{prompt} -- answer in JSON"],
            },
        }
    )
    # a config caps count at 50 per prompt; 50 variants of each of the 24 types is 1,200
    assert config.mutations is not None
    config = config.model_copy(
        update={"mutations": config.mutations.model_copy(update={"count": 24 * 50})}
    )
    times = []
    n = 0
    for _ in range(5):
        started = time.perf_counter()
        n = len(generate(config))
        times.append(time.perf_counter() - started)
    best = min(times)
    ok = n == 12_000 and best < TARGET_S
    print(
        f"mutation generation: {n:,} mutations in {best:.3f} s (best of 5; "
        f"{n / best:,.0f}/s; target < {TARGET_S:.1f} s) {'ok' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
