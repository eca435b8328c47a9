"""Concurrent chaos cells by attribution source (SPEC §4.2): the wall time of one contract run
with ``agent.session`` (cells side by side, concurrency 8) over the same run with a reset before
every cell (one at a time), for an agent that forwards nothing, one that forwards
``X-Flakestorm-Cell`` by hand, and one traced with OpenTelemetry (which forwards the baggage
entry and the trace context on its own).

The config: 6 invariants × 4 scenarios (calm, and three whose faults do not depend on call
order) × 2 prompts = 48 invocations; the agent (``tests/support/otel_agent.py``, its own
process) takes 50 ms per answer besides one tool call and one LLM call through a proxy service.
Goal: ratio ≤ 0.35 for the agent that forwards nothing. Also printed: where the session run's
time goes beyond the agent's own latency (start-up to the first invocation, the forwarding
probe, each scenario's switch).

    .venv/bin/python bench/attribution.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.server import LoopbackServer, Response  # noqa: E402

from flakestorm.chaos.proxy.server import ChaosProxy  # noqa: E402
from flakestorm.engine.events import CellFinished, Event  # noqa: E402
from flakestorm.engine.runner import run_phases  # noqa: E402
from flakestorm.loader import load_config_text  # noqa: E402

AGENT = ROOT / "tests" / "support" / "otel_agent.py"
DELAY_MS = 50
GOAL = 0.35
AGENTS = {"forwards nothing": "off", "forwards the header": "header", "OpenTelemetry": "on"}
INVARIANTS = [
    {"id": "answers", "type": "output_not_empty"},
    {"id": "completes", "type": "completes"},
    {"id": "quick", "type": "latency", "max_ms": 10000},
    {"id": "no-leak", "type": "excludes_pattern", "patterns": ["sk-[a-z0-9]{8}"]},
    {"id": "no-pii", "type": "excludes_pii"},
    {"id": "not-pwned", "type": "excludes_pattern", "patterns": ["PWNED"]},
]
SCENARIOS = [
    {"name": "calm"},
    {"name": "quotes-down", "tool_faults": [{"tool": "quotes", "mode": "error"}]},
    {"name": "quotes-garbled", "tool_faults": [{"tool": "quotes", "mode": "malformed"}]},
    {"name": "model-limited", "llm_faults": [{"mode": "rate_limit"}]},
]


def agent(proxy_url: str, tracing: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and "PROXY" not in k}
    env |= {
        "TOOL_URL": f"{proxy_url}/tools/quotes",
        "OPENAI_BASE_URL": f"{proxy_url}/llm/openai/v1",
        "OTEL_TRACES_EXPORTER": "none",
        "AGENT_TRACING": tracing,
        "AGENT_DELAY_MS": str(DELAY_MS),
    }
    process = subprocess.Popen(
        [sys.executable, str(AGENT)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, f"http://127.0.0.1:{int(process.stdout.readline())}"


def run(proxy_url: str, url: str, isolation: dict[str, object]) -> tuple[float, list[float]]:
    doc = {
        "agent": {"endpoint": f"{url}/chat", "response_path": "output", **isolation},
        "golden_prompts": ["What is AAPL at?", "And MSFT?"],
        "contract": {"name": "bench", "invariants": INVARIANTS, "chaos_matrix": SCENARIOS},
        "proxy": {"url": proxy_url},
        "advanced": {"concurrency": 8},
    }
    loaded = load_config_text(json.dumps(doc))
    finished: list[float] = []

    def on_event(event: Event) -> None:
        if isinstance(event, CellFinished):
            finished.append(time.perf_counter())

    t0 = time.perf_counter()
    result = run_phases(loaded, ["contract"], on_event=on_event)
    wall = time.perf_counter() - t0
    assert len(result.phases["contract"].cells) == 24
    return wall, [t - t0 for t in finished]


def main() -> int:
    missed = False
    with (
        LoopbackServer(lambda r: Response.json({"price": 101.5})) as tool,
        ChaosProxy(tools={"quotes": tool.url}, llm_upstream="mock") as proxy,
    ):
        for name, tracing in AGENTS.items():
            process, url = agent(proxy.url, tracing)
            try:
                session, marks = run(proxy.url, url, {"session": {"header": "X-Session-Id"}})
                reset, _ = run(proxy.url, url, {"reset_endpoint": f"{url}/reset"})
            finally:
                process.terminate()
                process.wait(timeout=10)
                if process.stdout is not None:
                    process.stdout.close()
            ratio = session / reset
            verdict = ""
            if tracing == "off":
                missed |= ratio > GOAL
                verdict = "  OK" if ratio <= GOAL else f"  MISSED (goal <= {GOAL})"
            print(
                f"{name:<20} session {session:6.3f} s / reset {reset:6.3f} s = {ratio:.2f}{verdict}"
            )
            # the agent's own latency: the forwarding probe, then each scenario's 12
            # invocations in waves of 8, the scenarios one after another
            floor = (1 + len(SCENARIOS) * -(-12 // 8)) * DELAY_MS / 1000
            print(
                f"{'':<20} session run: first cell settled at {marks[0]:.3f} s, last at "
                f"{marks[-1]:.3f} s; the agent's own latency alone {floor:.3f} s, flakestorm's "
                f"own {session - floor:.3f} s (start-up, proxy calls, scenario switches)"
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
