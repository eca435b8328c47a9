"""The invariants on what the agent did (SPEC §15) on a python agent: its LLM called through the
OpenAI SDK (``agent.llm`` wraps ``chat.completions.create``) and its tools python callables
(``agent.tools``), with the same habits as ``support/spend_agent.py`` and the same verdicts,
worked out by hand. The run is the engine's, in process, as for every python agent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.framework_rig import OPENAI
from support.server import LoopbackServer, Request, Response
from test_spend_run import BAD, GOOD, INVARIANTS, PRICES, USAGE

from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config
from flakestorm.results.model import CellResult

AGENT = """
import time

import openai

HABITS = {habits!r}


def ask(client, prompt):
    for attempt in range(3):
        try:
            return client.chat.completions.create(
                model="gpt-test", messages=[{{"role": "user", "content": prompt}}]
            )
        except openai.RateLimitError as error:
            if attempt == 2:
                raise
            if "retry_after" in HABITS:
                time.sleep(float(error.response.headers.get("retry-after", "1")))


def get_quote(symbol):
    return {{"symbol": symbol, "price": 190.5}}


def charge(amount, idempotency_key=None):
    return {{"charged": amount}}


def answer(prompt):
    with openai.OpenAI(base_url={url!r}, api_key="k", max_retries=0) as client:
        ask(client, prompt)
        for attempt in range(3):
            try:
                get_quote("AAPL")
                break
            except Exception:
                if "replan" not in HABITS or attempt == 2:
                    break
                ask(client, "the quote tool failed: what now? " + prompt)
        if "pay" in prompt:
            key = {{"idempotency_key": "k-" + prompt}} if "idem" in HABITS else {{}}
            try:
                charge(5, **key)
            except Exception:
                charge(5, **key)
    return "done: " + prompt
"""


def fake_llm(request: Request) -> Response:
    doc = json.loads(Response.chat_completion("ok", "gpt-test").body)
    return Response.json({**doc, "usage": USAGE})


@pytest.fixture(scope="module")
def llm() -> Iterator[LoopbackServer]:
    with LoopbackServer(fake_llm) as server:
        yield server


def run(tmp_path: Path, llm: LoopbackServer, habits: set[str]) -> dict[str, CellResult]:
    tmp_path.mkdir()
    module = f"spend_agent_{uuid.uuid4().hex[:10]}"
    text = AGENT.format(habits=habits, url=llm.url_for("/v1"))
    (tmp_path / f"{module}.py").write_text(text)
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"{module}:answer",
            "llm": OPENAI,
            "tools": [f"{module}:get_quote", f"{module}:charge"],
        },
        "golden_prompts": ["quote AAPL", "pay 5 for AAPL"],
        "contract": {
            "name": "spend",
            "invariants": [
                {**i, "target": "charge"} if i.get("target") == "payments" else i
                for i in INVARIANTS
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {
                    "name": "quote-down",
                    "tool_faults": [{"tool": "get_quote", "mode": "error", "error_code": 503}],
                },
                {"name": "llm-429", "llm_faults": [{"mode": "rate_limit", "calls": "1"}]},
                {
                    "name": "pay-flaky",
                    "tool_faults": [
                        {"tool": "charge", "mode": "error", "error_code": 503, "calls": "1"}
                    ],
                },
            ],
        },
        "advanced": {"concurrency": 4},
        "prices": PRICES,
        "output": {"dir": str(tmp_path / "reports")},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    assert result.exit_code == (1 if "replan" in habits else 0)
    return {c.id: c for c in result.phases["contract"].cells}


def verdicts(cells: dict[str, CellResult]) -> dict[str, str]:
    return {name: cell.status.value for name, cell in cells.items()}


def test_a_python_agent_through_the_openai_sdk_is_judged_on_its_calls(
    tmp_path: Path, llm: LoopbackServer
) -> None:
    cells = run(tmp_path / "bad", llm, {"replan", "retry_now"})
    assert verdicts(cells) == BAD
    spend = cells["llm-calls[quote-down]"].spend  # 2 prompts × (LLM 3, get_quote 3), 1 charge
    assert spend is not None
    assert dict(spend.calls) == {"llm": 6, "get_quote": 6, "charge": 1}
    assert dict(spend.faulted) == {"get_quote": 6}
    assert spend.usage is not None and (spend.usage.input, spend.usage.output) == (600, 120)
    assert spend.cost_usd == pytest.approx(0.00084)  # 6 billed calls × $0.00014
    assert cells["tokens[quote-down]"].reason == "prompt 1/2: 360 tokens over 3 LLM calls > 300"
    assert cells["retries[llm-429]"].reason.startswith(
        "prompt 1/2: a 429 asked llm calls to wait 1 s (Retry-After); the next came after "
    )
    assert verdicts(run(tmp_path / "good", llm, {"retry_after", "idem"})) == GOOD


SILENT = """
def ask(messages):
    return "never called"


def answer(prompt):
    return "done: " + prompt
"""


def test_a_count_of_calls_flakestorm_never_saw_is_no_verdict(tmp_path: Path) -> None:
    """The agent never calls the LLM flakestorm wraps (its calls go elsewhere): counting none
    would pass every cell, so they are errored, saying why — but ``max: 0``, which asks for
    none, passes."""
    module = f"silent_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(SILENT)
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer", "llm": f"{module}:ask"},
        "golden_prompts": ["quote AAPL"],
        "contract": {
            "name": "silent",
            "invariants": [
                {"id": "few", "type": "max_calls", "target": "llm", "max": 3},
                {"id": "none", "type": "max_calls", "target": "llm", "max": 0},
            ],
            "chaos_matrix": [{"name": "calm"}],
        },
        "output": {"dir": str(tmp_path / "reports")},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    cells = {c.id: c for c in result.phases["contract"].cells}
    assert cells["few[calm]"].status.value == "errored"
    assert cells["few[calm]"].reason == (
        "counted nothing: no call to llm reached flakestorm in scenario 'calm', so max_calls "
        "has nothing to judge (are the agent's calls to llm pointed at flakestorm?)"
    )
    assert cells["none[calm]"].status.value == "passed"
    assert result.exit_code == 3
