"""The whole matrix in flight (SPEC §9): a contract of many scenarios against one of many
invariants, the same number of cells, for an agent whose calls are all attributed.

A benchmark, not a test. Same agent (``tests/support/otel_agent.py``, its own process,
forwarding the ``X-Flakestorm-Cell`` header to its tool and LLM calls, 50 ms per answer), same
proxy, ``agent.session``, concurrency 16:

- (a) 12 scenarios × 3 invariants × 1 prompt = 36 cells;
- (b) 1 scenario × 36 invariants × 1 prompt = 36 cells;

every scenario with a fault on the agent's tool or LLM calls (so both go through the proxy).

With every call attributed, the scenarios need not run one after another: (a) should take
about as long as (b) (goal: wall(a) / wall(b) ≤ 1.15), and each about its waves of the agent's
latency (36 invocations / 16 in flight = 3 waves, plus the forwarding probe) plus the run's
start-up (goal: within 1.3× of that). The engine puts every scenario of (a) in flight together.

    .venv/bin/python bench/matrix_shapes.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attribution import DELAY_MS, agent  # noqa: E402
from support.server import LoopbackServer, Response  # noqa: E402

from flakestorm.chaos.proxy.server import ChaosProxy  # noqa: E402
from flakestorm.engine.events import CellFinished, Event  # noqa: E402
from flakestorm.engine.runner import run_phases  # noqa: E402
from flakestorm.loader import load_config_text  # noqa: E402

CONCURRENCY = 16
CELLS = 36
RATIO_GOAL = 1.15
FLOOR_GOAL = 1.3
KINDS = [
    {"type": "output_not_empty"},
    {"type": "completes"},
    {"type": "excludes_pattern", "patterns": ["PWNED"]},
]
FAULTS = [
    {"tool_faults": [{"tool": "quotes", "mode": "error"}]},
    {"tool_faults": [{"tool": "quotes", "mode": "malformed"}]},
    {"llm_faults": [{"mode": "rate_limit"}]},
]


def shape(scenarios: int, invariants: int) -> dict[str, object]:
    """The contract section of ``scenarios`` × ``invariants`` cells."""
    matrix = [{"name": f"s{i}", **FAULTS[i % len(FAULTS)]} for i in range(scenarios)]
    return {
        "name": "bench",
        "invariants": [{"id": f"i{i}", **KINDS[i % len(KINDS)]} for i in range(invariants)],
        "chaos_matrix": matrix,
    }


def run(proxy_url: str, url: str, contract: dict[str, object]) -> tuple[float, float]:
    """(wall time of the run, its start-up): the start-up is when the first cell settled less
    the agent's latency before it (the forwarding probe and one wave)."""
    doc = {
        "agent": {
            "endpoint": f"{url}/chat",
            "response_path": "output",
            "session": {"header": "X-Session-Id"},
        },
        "golden_prompts": ["What is AAPL at?"],
        "contract": contract,
        "proxy": {"url": proxy_url},
        "advanced": {"concurrency": CONCURRENCY},
    }
    loaded = load_config_text(json.dumps(doc))
    first: list[float] = []

    def on_event(event: Event) -> None:
        if isinstance(event, CellFinished) and not first:
            first.append(time.perf_counter())

    t0 = time.perf_counter()
    result = run_phases(loaded, ["contract"], on_event=on_event)
    wall = time.perf_counter() - t0
    assert len(result.phases["contract"].cells) == CELLS, "the shape is not 36 cells"
    assert result.exit_code in (0, 1), result.overall.reasons
    startup = max(first[0] - t0 - 2 * DELAY_MS / 1000, 0.0) if first else 0.0
    return wall, startup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    waves = 1 + -(-CELLS // CONCURRENCY)  # the forwarding probe, then the cells
    walls: dict[str, list[float]] = {"a": [], "b": []}
    startups: list[float] = []
    with (
        LoopbackServer(lambda r: Response.json({"price": 101.5})) as tool,
        ChaosProxy(tools={"quotes": tool.url}, llm_upstream="mock") as proxy,
    ):
        process, url = agent(proxy.url, "header")
        try:
            for _ in range(args.rounds):
                for name, contract in (("a", shape(12, 3)), ("b", shape(1, 36))):
                    wall, startup = run(proxy.url, url, contract)
                    walls[name].append(wall)
                    startups.append(startup)
        finally:
            process.terminate()
            process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()
    a, b = statistics.median(walls["a"]), statistics.median(walls["b"])
    startup = statistics.median(startups)
    floor = waves * DELAY_MS / 1000 + startup
    ratio = a / b
    missed = ratio > RATIO_GOAL
    print(
        f"(a) 12 scenarios x 3 invariants: {a:.3f} s; (b) 1 scenario x 36 invariants: {b:.3f} s "
        f"(medians of {args.rounds}); a/b = {ratio:.2f} (goal <= {RATIO_GOAL}: "
        f"{'MISSED' if missed else 'ok'})"
    )
    for name, wall in (("a", a), ("b", b)):
        over = wall / floor
        missed |= over > FLOOR_GOAL
        print(
            f"({name}) {wall:.3f} s = {over:.2f}x (goal <= {FLOOR_GOAL}) its floor {floor:.3f} s: "
            f"{waves} waves of {DELAY_MS} ms and a start-up of {startup:.3f} s"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
