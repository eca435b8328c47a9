"""A whole contract run of an OpenAI Agents SDK agent, as a user configures it: its
``FunctionTool`` in ``agent.tools``, the SDK method in ``agent.llm``, a chaos matrix, and the
verdicts each fault leads to."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.server import LoopbackServer
from support.tool_provider import tool_provider

from flakestorm.engine.runner import run_ci
from flakestorm.loader import load_config_text
from flakestorm.reporters import json as json_report
from flakestorm.results.model import Status

AGENT = """
import asyncio, os
import openai
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool

@function_tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"sunny in {city}"

async def _answer(prompt):
    client = openai.AsyncOpenAI(base_url=os.environ["WEATHER_LLM_URL"], api_key="k", max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
    agent = Agent(name="weather", instructions="Use the tool.", tools=[get_weather], model=model)
    try:
        result = await Runner.run(agent, prompt, run_config=RunConfig(tracing_disabled=True))
        return str(result.final_output)
    finally:
        await client.close()

def answer(prompt):
    return asyncio.run(_answer(prompt))
"""

CONFIG = """
agent:
  type: python
  endpoint: "weather_sdk_agent:answer"
  tools: ["weather_sdk_agent:get_weather"]
  llm: "openai.resources.chat.completions:AsyncCompletions.create"
golden_prompts: ["Weather in Paris?"]
contract:
  name: weather
  invariants:
    - {id: answers, type: output_not_empty, severity: critical}
    - {id: sunny, type: contains, value: "sunny in Paris", severity: high}
  chaos_matrix:
    - {name: calm}
    - name: throttled
      llm_faults: [{mode: rate_limit}]
    - name: weather down
      tool_faults: [{tool: get_weather, mode: error}]
    - name: cut short
      llm_faults: [{mode: truncated_response, max_tokens: 3, after_calls: 1}]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "weather_sdk_agent.py").write_text(textwrap.dedent(AGENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "weather_sdk_agent", raising=False)
    with LoopbackServer(tool_provider) as provider:
        monkeypatch.setenv("WEATHER_LLM_URL", provider.url_for("/v1"))
        yield tmp_path


def test_each_fault_reaches_the_agent_and_is_judged(project: Path) -> None:
    result = run_ci(load_config_text(CONFIG, base_dir=project))
    outcome = result.phases["contract"]
    verdicts = {(c.invariant_id, c.scenario): c for c in outcome.cells}
    status = {key: cell.status for key, cell in verdicts.items()}
    assert status == {
        ("answers", "calm"): Status.PASSED,
        ("sunny", "calm"): Status.PASSED,
        # the SDK's RateLimitError ends the run: the agent gave no answer
        ("answers", "throttled"): Status.FAILED,
        ("sunny", "throttled"): Status.FAILED,
        # the SDK's failure handler told the model the tool failed: an answer, without the data
        ("answers", "weather down"): Status.PASSED,
        ("sunny", "weather down"): Status.FAILED,
        # the reply was cut after three tokens
        ("answers", "cut short"): Status.PASSED,
        ("sunny", "cut short"): Status.FAILED,
    }
    assert "RateLimitError" in verdicts["answers", "throttled"].reason
    assert all(not s.undelivered for s in outcome.scenarios)
    assert verdicts["sunny", "weather down"].faults_fired == (
        "tool_faults[0] error(503) on get_weather",
    )
    assert result.exit_code == 1  # a critical cell failed: the gate fails, nothing errored


TIMINGS = frozenset({"started_at", "duration_s", "latency_ms", "elapsed_ms", "started_ms"})
"""What differs between two identical runs: when they ran and how long things took."""


def _without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_two_identical_runs_write_the_same_results_json(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's arguments are recorded without an object's memory address (the SDK passes
    sentinels such as ``openai.Omit``), and a wiring hint is kept only for a fault no call
    matched: results.json is the same for two identical runs, timings aside."""
    documents = []
    for _ in range(2):
        monkeypatch.delitem(sys.modules, "weather_sdk_agent", raising=False)
        result = run_ci(load_config_text(CONFIG, base_dir=project))
        text = json_report.render(result)
        assert " at 0x" not in text
        documents.append(json.loads(text))
    first, second = (_without_timings(d) for d in documents)
    assert first == second
    for scenario in documents[0]["phases"]["contract"]["scenarios"]:
        assert set(scenario["hints"]) <= set(scenario["declared"]) - set(scenario["matched"])
