"""The invariants on what the agent did (SPEC §15), end to end: ``flakestorm contract run`` (the
real CLI) starts an HTTP agent of its own (``support/spend_agent.py``) whose habits under
failure an environment variable chooses, its LLM a fake with fixed usage and its tools a local
server, every call through the in-process chaos proxy. The counts, tokens, costs and verdicts
of each cell are worked out by hand below from the agent's documented habits.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_run import contract_run
from support.server import LoopbackServer, Request, Response, free_port

AGENT = Path(__file__).resolve().parent / "support" / "spend_agent.py"
PYTHONPATH = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
PROMPT_TOKENS, COMPLETION_TOKENS = 100, 20
"""What every call of the fake LLM bills: 120 tokens."""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


USAGE = {
    "prompt_tokens": PROMPT_TOKENS,
    "completion_tokens": COMPLETION_TOKENS,
    "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
}


def fake_llm(request: Request) -> Response:
    """An OpenAI chat completion with fixed usage, whole or streamed (with the usage chunk of
    ``stream_options.include_usage``)."""
    body = request.json()
    if body.get("stream"):
        chunks = [_chunk({"role": "assistant", "content": "ok"}), _chunk({}, "stop")]
        usage = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-test"}
        chunks.append(b"data: " + json.dumps({**usage, "choices": [], "usage": USAGE}).encode())
        chunks += [b"\n\n", b"data: [DONE]\n\n"]
        return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=chunks)
    reply = Response.chat_completion("ok", "gpt-test")
    doc = json.loads(reply.body)
    return Response.json({**doc, "usage": USAGE})


def tools(request: Request) -> Response:
    if request.path.startswith("/payments"):
        return Response.json({"charged": 5})
    return Response.json({"symbol": "AAPL", "price": 190.5})


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[str, str]]:
    with LoopbackServer(fake_llm) as llm, LoopbackServer(tools) as tool:
        yield llm.url, tool.url


INVARIANTS = [
    {"id": "llm-calls", "type": "max_calls", "target": "llm", "max": 2, "severity": "critical"},
    {"id": "amplified", "type": "max_amplification", "max": 2, "severity": "high"},
    {"id": "retries", "type": "retry_discipline", "severity": "high"},
    {"id": "charged-once", "type": "no_duplicate_effects", "target": "payments"},
    {"id": "tokens", "type": "max_tokens", "max": 300},
    {"id": "cost", "type": "max_cost", "max_usd": 0.0003},
]
PRICES = {"gpt-test": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
"""Each billed call: 100 × $1/M + 20 × $2/M = $0.00014."""
SCENARIOS = [
    {"name": "calm"},
    {"name": "quote-down", "tool_faults": [{"tool": "quotes", "mode": "error", "error_code": 503}]},
    {"name": "llm-429", "llm_faults": [{"mode": "rate_limit", "calls": "1"}]},
    {
        "name": "pay-flaky",
        "tool_faults": [{"tool": "payments", "mode": "error", "error_code": 503, "calls": "1"}],
    },
]


def config(upstreams: tuple[str, str], habits: str) -> dict[str, Any]:
    llm, tool = upstreams
    port = free_port()
    return {
        "agent": {
            "endpoint": f"http://127.0.0.1:{port}/chat",
            "response_path": "output",
            "timeout": 20000,
            "health_endpoint": f"http://127.0.0.1:{port}/health",
            "start": {
                "command": f"{sys.executable} {AGENT} --port {port}",
                "env": {"SPEND_HABITS": habits},
            },
        },
        "golden_prompts": ["quote AAPL", "pay 5 for AAPL"],
        "contract": {"name": "spend", "invariants": INVARIANTS, "chaos_matrix": SCENARIOS},
        "proxy": {
            "llm_upstream": llm,
            "tools": {"quotes": f"{tool}/quotes", "payments": f"{tool}/payments"},
        },
        "advanced": {"concurrency": 4},
        "prices": PRICES,
    }


def run(tmp_path: Path, doc: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    return contract_run(tmp_path, doc)


def verdicts(results: dict[str, Any]) -> dict[str, str]:
    return {
        f"{c['invariant_id']}[{c['scenario']}]": c["status"]
        for c in results["phases"]["contract"]["cells"]
    }


def by_id(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{c['invariant_id']}[{c['scenario']}]": c for c in results["phases"]["contract"]["cells"]
    }


# Worked out from the agent's habits (support/spend_agent.py), per invocation:
#   calm:       LLM 1, quotes 1 (+ payments 1 for "pay")
#   quote-down: every quotes call 503 — replan: LLM 3, quotes 3; else LLM 1, quotes 1
#   llm-429:    the first LLM call 429 (Retry-After: 1) — LLM 2 (the 429 an attempt), quotes 1
#   pay-flaky:  the first payments call 503 — "pay": payments 2 (1 faulted), the same body
BAD = {
    "llm-calls[calm]": "passed",  # 1 ≤ 2
    "llm-calls[quote-down]": "failed",  # 3 > 2 (re-plans)
    "llm-calls[llm-429]": "passed",  # 2 ≤ 2
    "llm-calls[pay-flaky]": "passed",  # 1
    "amplified[calm]": "passed",  # 1.0×
    "amplified[quote-down]": "failed",  # 3 vs 1: 3.0× > 2×
    "amplified[llm-429]": "passed",  # 2.0× ≤ 2×
    "amplified[pay-flaky]": "passed",  # 1.0×
    "retries[calm]": "passed",  # no Retry-After given
    "retries[quote-down]": "passed",
    "retries[llm-429]": "failed",  # retried at once after a 429 asking for 1 s
    "retries[pay-flaky]": "passed",
    "charged-once[calm]": "passed",
    "charged-once[quote-down]": "passed",
    "charged-once[llm-429]": "passed",
    "charged-once[pay-flaky]": "failed",  # POST sent twice, no Idempotency-Key
    # 120 tokens and $0.00014 per billed LLM call; the 429 an attempt, never billed
    "tokens[calm]": "passed",  # 120 ≤ 300
    "tokens[quote-down]": "failed",  # 3 × 120 = 360 > 300
    "tokens[llm-429]": "passed",  # 120
    "tokens[pay-flaky]": "passed",
    "cost[calm]": "passed",  # $0.00014 ≤ $0.0003
    "cost[quote-down]": "failed",  # $0.00042 > $0.0003
    "cost[llm-429]": "passed",
    "cost[pay-flaky]": "passed",
}
GOOD = dict.fromkeys(BAD, "passed")  # no re-plan, Retry-After kept, one key for both POSTs


def test_an_agent_that_replans_retries_at_once_and_charges_twice_fails_those_cells(
    tmp_path: Path, upstreams: tuple[str, str]
) -> None:
    code, output, results = run(tmp_path, config(upstreams, "replan,retry_now"))
    assert verdicts(results) == BAD, output
    assert code == 1, output
    cells = by_id(results)
    assert cells["llm-calls[quote-down]"]["reason"] == "prompt 1/2: 3 calls to llm > 2"
    amplified = cells["amplified[quote-down]"]["reason"]
    assert amplified == (
        "prompt 1/2: llm calls 3.0× of the same prompt without chaos (3 vs 1) > 2×"
    ), amplified
    retried = cells["retries[llm-429]"]["reason"]
    hasty = "prompt 1/2: a 429 asked llm calls to wait 1 s (Retry-After); the next came after "
    assert retried.startswith(hasty), retried
    assert retried.endswith(" s"), retried  # the wait it kept, measured
    assert cells["charged-once[pay-flaky]"]["reason"] == (
        "prompt 2/2: POST payments sent 2 times with the same path and body, without an "
        "Idempotency-Key"
    )
    # what each cell spent, per target, faulted among them
    down = cells["llm-calls[quote-down]"]["spend"]
    assert down["calls"] == {"llm": 6, "quotes": 6, "payments": 1}
    assert down["faulted"] == {"quotes": 6}
    flaky = cells["charged-once[pay-flaky]"]["spend"]
    assert flaky["calls"] == {"llm": 2, "quotes": 2, "payments": 2}
    assert flaky["faulted"] == {"payments": 1}
    assert_tokens_and_cost(cells)


def assert_tokens_and_cost(cells: dict[str, dict[str, Any]]) -> None:
    assert cells["tokens[quote-down]"]["reason"] == "prompt 1/2: 360 tokens over 3 LLM calls > 300"
    assert cells["cost[quote-down]"]["reason"] == ("prompt 1/2: $0.0004 over 3 LLM calls > $0.0003")
    down = cells["tokens[quote-down]"]["spend"]  # both prompts: 6 billed calls
    assert down["usage"] == {
        "input": 600,
        "output": 120,
        "cache_read": 0,
        "cache_write": 0,
        "model": "gpt-test",
        "counted": "reported",
    }
    assert down["cost_usd"] == pytest.approx(0.00084)
    limited = cells["tokens[llm-429]"]["spend"]  # 2 attempts a prompt, 1 billed
    assert limited["calls"]["llm"] == 4 and limited["usage"]["input"] == 200
    assert limited["faulted"] == {"llm": 2}


def test_the_same_agent_streaming_from_its_llm_is_judged_the_same(
    tmp_path: Path, upstreams: tuple[str, str]
) -> None:
    """Its LLM streamed, with the usage chunk of ``stream_options.include_usage``: the same
    counts, tokens, costs and verdicts."""
    code, output, results = run(tmp_path, config(upstreams, "replan,retry_now,stream"))
    assert verdicts(results) == BAD, output
    assert code == 1, output
    assert_tokens_and_cost(by_id(results))


def test_an_agent_that_keeps_retry_after_and_idempotency_keys_passes(
    tmp_path: Path, upstreams: tuple[str, str]
) -> None:
    code, output, results = run(tmp_path, config(upstreams, "retry_after,idem"))
    assert verdicts(results) == GOOD, output
    assert code == 0, output
    cells = by_id(results)
    assert cells["llm-calls[quote-down]"]["spend"]["calls"] == {
        "llm": 2,
        "quotes": 2,
        "payments": 1,
    }
