"""Config -> cells: order, prompts, applicability, and invariants without prompts refused."""

from __future__ import annotations

import json

import pytest

from flakestorm.chaos.faults.labels import tool_fault_label
from flakestorm.config import Config, Contract
from flakestorm.engine.matrix_plan import build_plan, mcp_server_of
from flakestorm.errors import UsageError
from flakestorm.loader import load_config_text


def contract(**extra: object) -> Contract:
    data = {
        "name": "c",
        "invariants": [
            {"id": "cite", "type": "regex", "pattern": "source", "severity": "critical"},
            {"id": "leak", "type": "excludes_pattern", "patterns": ["SYSTEM"], "probes": ["p1"]},
            {"id": "same", "type": "behavior_unchanged", "when": "any_chaos_active"},
        ],
        "chaos_matrix": [
            {"name": "calm"},
            {"name": "poisoned", "context_attacks": [{"type": "memory_poisoning", "payload": "x"}]},
        ],
    }
    data.update(extra)
    return Contract.model_validate(data)


def test_cells_are_invariant_major_with_probes_replacing_golden_prompts() -> None:
    plan = build_plan(contract(), ["g1", "g2"])
    assert [c.id for c in plan.cells] == [
        "cite[calm]",
        "cite[poisoned]",
        "leak[calm]",
        "leak[poisoned]",
        "same[calm]",
        "same[poisoned]",
    ]
    assert [c.index for c in plan.cells] == list(range(6))
    assert plan.cells[0].prompts == ("g1", "g2")
    assert plan.cells[2].prompts == ("p1",)


def test_when_decides_applicability_and_baselines() -> None:
    plan = build_plan(contract(), ["g1", "g2"])
    assert [c.applicable for c in plan.cells] == [True, True, True, True, False, True]
    assert plan.baselines == ("g1", "g2")


def test_an_invariant_without_any_prompt_is_refused() -> None:
    with pytest.raises(UsageError, match="'cite' has no prompts"):
        build_plan(contract(), [])


MCP_FAULTS = [
    {"tool": "get_quote", "mode": "error"},
    {"tool": "quotes.get_news", "mode": "error"},
    {"tool": "weather", "mode": "error"},
    {"tool": "*", "mode": "error"},
    {"tool": "feed", "mode": "error", "match_url": "https://feed.example/*"},
]


def mcp_config(agent: dict[str, object], mcp: dict[str, str]) -> Config:
    doc = {
        "agent": agent,
        "golden_prompts": ["AAPL?"],
        "proxy": {"tools": {"weather": "http://127.0.0.1:9/w"}, "mcp": mcp},
        "contract": {
            "name": "c",
            "invariants": [{"id": "ok", "type": "contains", "value": "x"}],
            "chaos_matrix": [{"name": "down", "tool_faults": MCP_FAULTS}],
        },
    }
    return load_config_text(json.dumps(doc)).config


def fault_labels(config: Config) -> list[str]:
    assert config.contract is not None
    plan = build_plan(config.contract, config.golden_prompts, mcp_server_of(config))
    (scenario,) = plan.scenarios
    assert all(cell.scenario is scenario for cell in plan.cells)
    return [tool_fault_label(i, f) for i, f in enumerate(scenario.tool_faults)]


HTTP_AGENT = {"endpoint": "http://127.0.0.1:9/chat"}


def test_a_fault_on_the_one_mcp_servers_tool_names_the_server() -> None:
    config = mcp_config(HTTP_AGENT, {"quotes": "http://127.0.0.1:9/mcp"})
    assert fault_labels(config) == [
        "tool_faults[0] error(503) on quotes.get_quote",  # a bare name: the server's tool
        "tool_faults[1] error(503) on quotes.get_news",  # already named
        "tool_faults[2] error(503) on weather",  # an HTTP tool route
        "tool_faults[3] error(503) on *",
        "tool_faults[4] error(503) on feed",  # matched by URL
    ]


def test_a_stdio_server_is_named_as_well() -> None:
    config = mcp_config(HTTP_AGENT, {"quotes": "stdio"})
    assert fault_labels(config)[0] == "tool_faults[0] error(503) on quotes.get_quote"


def test_with_several_servers_a_bare_name_stays_as_written() -> None:
    config = mcp_config(HTTP_AGENT, {"quotes": "http://127.0.0.1:9/a", "news": "stdio"})
    assert fault_labels(config)[:2] == [
        "tool_faults[0] error(503) on get_quote",
        "tool_faults[1] error(503) on quotes.get_news",
    ]


def test_a_python_agent_that_wraps_tools_keeps_the_names_it_wraps() -> None:
    server = {"quotes": "http://127.0.0.1:9/mcp"}
    wrapping = {"type": "python", "endpoint": "agent:run", "tools": ["tools:get_quote"]}
    assert fault_labels(mcp_config(wrapping, server))[0] == (
        "tool_faults[0] error(503) on get_quote"
    )
    routed = {"type": "python", "endpoint": "agent:run"}  # its HTTP clients routed only
    assert fault_labels(mcp_config(routed, server))[0] == (
        "tool_faults[0] error(503) on quotes.get_quote"
    )
