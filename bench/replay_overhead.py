"""Overhead of replaying a session: an agent's 20 tool calls answered by a real loopback tool vs
by the session's recordings, through the whole replay phase.

A benchmark, not a test. For each agent kind it runs, in this process:

- *direct*: the agent invoked with its tool calls going to a real loopback tool (http) or the
  plain tool function (python): the median time of one invocation;
- *replay*: ``flakestorm``'s replay phase on a config of sessions of 20 recorded tool
  responses each (latency 0): the phase's wall time per session — activating the recording on
  the channel, the invocation, reading the calls back, the checks and the divergence.

The difference divided by the 20 calls is flakestorm's overhead per replayed call
(goal: under 5 ms).

    .venv/bin/python bench/replay_overhead.py [--sessions N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.server import LoopbackServer, Request, Response  # noqa: E402

from flakestorm.chaos.proxy.server import ChaosProxy  # noqa: E402
from flakestorm.engine.runner import run_phases  # noqa: E402
from flakestorm.loader import load_config_text  # noqa: E402

CALLS = 20
GOAL_MS = 5.0
QUOTE = {"ticker": "ACME", "price": 42.5, "currency": "USD", "as_of": "2026-01-05T16:00:00Z"}

PYTHON_AGENT = """\
import bench_tools

def answer(prompt):
    return " ".join(str(bench_tools.quotes("ACME")["price"]) for _ in range(20))
"""
PYTHON_TOOLS = f"""\
def quotes(ticker):
    return {QUOTE!r}
"""


def session_lines(count: int) -> str:
    response = json.dumps(QUOTE)
    tools = "".join(f"      - {{tool: quotes, response: {response}}}\n" for _ in range(CALLS))
    return "".join(
        f"    - id: s{i}\n      input: quote ACME\n      tool_responses:\n{tools}"
        for i in range(count)
    )


CONTRACT = """\
golden_prompts: [quote ACME]
contract:
  name: Bench
  invariants: [{id: answered, type: contains, value: "42.5"}]
  chaos_matrix: [{name: calm}]
"""


def http_agent(tool_base: list[str]) -> LoopbackServer:
    """An agent that calls ``tool_base[0]`` 20 times (cell headers forwarded)."""

    session = requests.Session()
    session.trust_env = False

    def handle(request: Request) -> Response:
        if request.path == "/health":
            return Response.json({"ok": True})
        forward = {
            k: request.headers[k]
            for k in ("X-Flakestorm-Cell", "X-Flakestorm-Scenario")
            if request.headers.get(k)
        }
        prices = [
            str(session.get(f"{tool_base[0]}/quote", headers=forward).json()["price"])
            for _ in range(CALLS)
        ]
        return Response.json({"output": " ".join(prices)})

    return LoopbackServer(handle)


def replay_ms_per_session(text: str, base_dir: Path, sessions: int) -> float:
    loaded = load_config_text(text, base_dir=base_dir, env={})
    started = time.perf_counter()
    result = run_phases(loaded, ["replay"])
    elapsed = (time.perf_counter() - started) * 1000
    outcome = result.phases["replay"]
    assert outcome.score.score == 100.0, [c.reason for c in outcome.cells]
    return elapsed / sessions


def bench_http(sessions: int, invocations: int) -> tuple[float, float]:
    tool_base = [""]
    with (
        LoopbackServer(lambda r: Response.json(QUOTE)) as tool,
        http_agent(tool_base) as agent,
        ChaosProxy() as proxy,
        requests.Session() as client,
    ):
        client.trust_env = False
        tool_base[0] = tool.url
        times = []
        for _ in range(invocations):
            started = time.perf_counter()
            client.post(agent.url_for("/chat"), json={"input": "quote ACME"}).raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
        direct = statistics.median(times[5:])
        tool_base[0] = f"{proxy.url}/tools/quotes"
        text = (
            f"agent: {{endpoint: '{agent.url_for('/chat')}', response_path: output}}\n"
            f"proxy: {{url: '{proxy.url}'}}\n"
            + CONTRACT
            + "replays:\n  sessions:\n"
            + session_lines(sessions)
        )
        with tempfile.TemporaryDirectory() as tmp:
            replay = replay_ms_per_session(text, Path(tmp), sessions)
    return direct, replay


def bench_python(sessions: int, invocations: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "bench_agent.py").write_text(PYTHON_AGENT)
        (base / "bench_tools.py").write_text(PYTHON_TOOLS)
        sys.path.insert(0, tmp)
        import bench_agent

        times = []
        for _ in range(invocations):
            started = time.perf_counter()
            bench_agent.answer("quote ACME")
            times.append((time.perf_counter() - started) * 1000)
        direct = statistics.median(times)
        text = (
            "agent: {type: python, endpoint: 'bench_agent:answer', "
            "tools: ['bench_tools:quotes']}\n" + CONTRACT + "replays:\n  sessions:\n"
        ) + session_lines(sessions)
        replay = replay_ms_per_session(text, base, sessions)
    return direct, replay


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--invocations", type=int, default=55)
    args = parser.parse_args()
    ok = True
    for kind, bench in (("http", bench_http), ("python", bench_python)):
        direct, replay = bench(args.sessions, args.invocations)
        per_call = (replay - direct) / CALLS
        verdict = "ok" if per_call < GOAL_MS else "OVER GOAL"
        ok &= per_call < GOAL_MS
        print(
            f"{kind} agent, {CALLS} tool calls: direct {direct:.2f} ms per invocation, "
            f"replayed {replay:.2f} ms per session; flakestorm overhead {per_call:.3f} ms "
            f"per call (goal < {GOAL_MS} ms: {verdict}); ratio {replay / direct:.2f}x"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
