"""Attribution (SPEC §4.2): every invocation carries its id as the X-Flakestorm-Cell header, a
W3C baggage entry and a W3C traceparent; the proxy attributes a call by the first of them it
finds. An agent instrumented with OpenTelemetry — and nothing of flakestorm — forwards the
last two on its own, so its cells run side by side and every call lands in its own cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from support.server import LoopbackServer, Request, Response

from flakestorm.agents.attribution import Source, baggage, read, trace_id, traceparent
from flakestorm.chaos.faults.ordering import order_dependence
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config_text
from flakestorm.results.model import RunResult

AGENT = Path(__file__).parent / "support" / "otel_agent.py"
PROMPTS = ["AAPL", "MSFT", "GOOG", "AMZN"]


def headers(**values: str) -> Message:
    message = Message()
    for name, value in values.items():
        message[name.replace("_", "-")] = value
    return message


def attributed(message: Message, known: dict[str, str]) -> tuple[str | None, Source]:
    return read(lambda name: message.get_all(name, []), known.get)


def test_the_sources_are_read_in_order_header_baggage_trace() -> None:
    trace = trace_id(7, "c#0.0")
    known = {trace: "c#0.0"}
    parent = traceparent(7, "c#0.0")
    assert attributed(headers(**{"X-Flakestorm-Cell": "a#0.0"}, traceparent=parent), known) == (
        "a#0.0",
        Source.HEADER,
    )
    assert attributed(
        headers(baggage="k=v, " + baggage("b @x#0.1"), traceparent=parent), known
    ) == ("b @x#0.1", Source.BAGGAGE)
    # OpenTelemetry forwards the trace id with a span id of its own
    child = f"00-{trace}-00f067aa0ba902b7-01"
    assert attributed(headers(traceparent=child), known) == ("c#0.0", Source.TRACE)
    # a trace flakestorm did not start, and a malformed traceparent, name nothing
    assert attributed(headers(traceparent=f"00-{'a' * 32}-00f067aa0ba902b7-01"), known) == (
        None,
        Source.ACTIVE,
    )
    assert attributed(headers(traceparent="00-xyz-01"), known) == (None, Source.ACTIVE)
    assert trace_id(7, "c#0.0") != trace_id(7, "c#0.1") != trace_id(8, "c#0.1")


@pytest.fixture
def proxy() -> Iterator[ChaosProxy]:
    def tool(request: Request) -> Response:
        symbol = urllib.parse.unquote(request.path.rsplit("/", 1)[-1])
        return Response.json({"symbol": symbol, "price": 101.5})

    with (
        LoopbackServer(tool) as quotes,
        ChaosProxy(tools={"quotes": quotes.url}, llm_upstream="mock") as served,
    ):
        yield served


def otel_agent(proxy_url: str, propagators: str | None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and "PROXY" not in k}
    env |= {
        "TOOL_URL": f"{proxy_url}/tools/quotes",
        "OPENAI_BASE_URL": f"{proxy_url}/llm/openai/v1",
        "OTEL_TRACES_EXPORTER": "none",
    }
    if propagators == "off":
        env["AGENT_TRACING"] = "off"
    elif propagators is not None:
        env["OTEL_PROPAGATORS"] = propagators
    return subprocess.Popen(
        [sys.executable, str(AGENT)], env=env, stdout=subprocess.PIPE, text=True
    )


def contract(proxy: ChaosProxy) -> dict[str, Any]:
    return {
        "contract": {
            "name": "traced",
            "invariants": [
                {"id": "answers", "type": "output_not_empty"},
                {"id": "quoted", "type": "contains", "value": "101.5"},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {"name": "quotes-down", "tool_faults": [{"tool": "quotes", "mode": "error"}]},
                {"name": "model-limited", "llm_faults": [{"mode": "rate_limit"}]},
            ],
        },
        "proxy": {"url": proxy.url},
        "advanced": {"concurrency": 8},
    }


def run(
    proxy: ChaosProxy, propagators: str | None, sections: dict[str, Any], phase: str
) -> tuple[RunResult, list[str]]:
    agent = otel_agent(proxy.url, propagators)
    try:
        assert agent.stdout is not None
        port = int(agent.stdout.readline())
        doc = {
            "agent": {"endpoint": f"http://127.0.0.1:{port}/chat", "response_path": "output"},
            "golden_prompts": PROMPTS,
            **sections,
        }
        notices: list[str] = []
        loaded = load_config_text(json.dumps(doc))
        return run_phases(loaded, [phase], on_notice=notices.append), notices
    finally:
        agent.terminate()
        agent.wait(timeout=10)
        if agent.stdout is not None:
            agent.stdout.close()


@pytest.mark.parametrize(
    ("propagators", "source"),
    [(None, "the W3C baggage entry flakestorm-cell"), ("tracecontext", "the W3C trace context")],
)
def test_an_agent_traced_with_opentelemetry_gets_every_call_in_its_own_cell(
    proxy: ChaosProxy, propagators: str | None, source: str
) -> None:
    result, notices = run(proxy, propagators, contract(proxy), "contract")
    phase = result.phases["contract"]
    assert any(n.startswith(f"attribution: the agent forwards {source}") for n in notices)
    assert not any("forwards no attribution" in w for w in phase.warnings)
    for info in phase.scenarios:
        assert (info.serial, info.unattributed) == (False, 0), info.name
    cells = {c.id: c for c in phase.cells}
    for cell in cells.values():
        # two calls per invocation (the tool, the model), each in its own cell and invocation
        assert len(cell.calls) == 2 * len(PROMPTS), cell.id
        for call in cell.calls:
            run_, _, prompt = call.invocation.partition(".")
            assert run_ == "0"
            if call.target == "tool":
                assert call.url.endswith("/quote/" + PROMPTS[int(prompt)]), (cell.id, call.url)
    down = cells["quoted[quotes-down]"]
    assert down.faults_fired == ("tool_faults[0] error(503) on quotes",)
    assert [c.status for c in down.calls if c.target == "tool"] == [503] * len(PROMPTS)
    assert down.status.value == "failed"
    limited = cells["answers[model-limited]"]
    assert [c.status for c in limited.calls if c.target == "llm"] == [429] * len(PROMPTS)
    assert cells["quoted[calm]"].status.value == "passed"


@pytest.mark.parametrize("propagators", [None, "off"])
def test_the_mutation_phase_keeps_each_mutations_calls_or_else_the_phases(
    proxy: ChaosProxy, propagators: str | None
) -> None:
    sections = {
        "invariants": [{"id": "answers", "type": "output_not_empty"}],
        "mutations": {"types": ["paraphrase"], "count": 3},
        "proxy": {"url": proxy.url},
        "advanced": {"concurrency": 8},
    }
    result, _ = run(proxy, propagators, sections, "mutation")
    phase = result.phases["mutation"]
    mutations = list(phase.mutations)
    assert len(mutations) == 3 * len(PROMPTS)
    if propagators is None:  # baggage forwarded: each mutation its own calls
        assert phase.scenarios == ()
        for m in mutations:
            tools = [c.url for c in m.calls if c.target == "tool"]
            assert [t.rsplit("/", 1)[-1] for t in tools] == [urllib.parse.quote(m.sent)]
            assert [c.target for c in m.calls].count("llm") == 1
    else:  # nothing forwarded: the mutations ran side by side, the calls kept for the phase
        assert all(not m.calls for m in mutations)
        (info,) = phase.scenarios
        assert info.unattributed == 2 * len(mutations)
        assert {c.target for c in info.unattributed_calls} == {"tool", "llm"}


def test_which_faults_depend_on_call_order_and_why() -> None:
    doc = {
        "agent": {"endpoint": "http://127.0.0.1:9/chat"},
        "golden_prompts": ["q"],
        "contract": {
            "name": "order",
            "invariants": [{"id": "answers", "type": "output_not_empty"}],
            "chaos_matrix": [
                {
                    "name": "fixed",
                    "tool_faults": [{"tool": "quotes", "mode": "error", "probability": 1}],
                    "llm_faults": [{"mode": "truncated_response", "max_tokens": 5}],
                    "context_attacks": [
                        {"type": "indirect_injection", "payloads": ["one payload"]},
                        {"type": "memory_poisoning", "payload": "note"},
                    ],
                },
                {
                    "name": "ordered",
                    "tool_faults": [
                        {"tool": "quotes", "mode": "error", "probability": 0.25},
                        {"tool": "news", "mode": "timeout", "calls": "2-3"},
                    ],
                    "llm_faults": [{"mode": "garbage"}],
                    "context_attacks": [{"type": "indirect_injection", "payloads": ["a", "b"]}],
                },
            ],
        },
    }
    contract = load_config_text(json.dumps(doc)).config.contract
    assert contract is not None
    fixed, ordered = contract.chaos_matrix
    assert order_dependence(fixed) == ()
    assert order_dependence(ordered) == (
        "tool_faults[0] error(503) on quotes: probability 0.25",
        "tool_faults[1] timeout on news: acts on calls 2-3",
        "llm_faults[0] garbage: draws its payload per call",
        "context_attacks[0] indirect_injection: draws its payload per call",
    )
