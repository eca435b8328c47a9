"""semantics.check on Config values, with a locate hook that records config paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flakestorm.config import Config
from flakestorm.errors import Problem
from flakestorm.semantics import check

AGENT = {"endpoint": "http://localhost:8000/invoke"}


def locate(path: tuple[str | int, ...], message: str, key: bool = False) -> Problem:
    return Problem("f.yaml", 1, 1, ".".join(map(str, path)), message)


def run(data: dict[str, Any], base_dir: Path = Path(".")) -> tuple[list[str], list[str]]:
    errors, warnings = check(Config.model_validate(data), locate, base_dir)
    return [f"{p.path}: {p.message}" for p in errors], [f"{p.path}: {p.message}" for p in warnings]


def contract(invariants: list[dict[str, Any]], matrix: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "c", "invariants": invariants, "chaos_matrix": matrix}


def test_minimal_config_is_clean() -> None:
    assert run({"agent": AGENT}) == ([], [])


def test_invariant_type_fields() -> None:
    errors, _ = run(
        {
            "agent": AGENT,
            "golden_prompts": ["p"],
            "contract": contract([{"id": "a", "type": "latency", "pattern": "x"}], [{"name": "s"}]),
        }
    )
    assert errors == [
        "contract.invariants.0: a 'latency' invariant needs 'max_ms' (its fields: max_ms)",
        "contract.invariants.0.pattern: 'pattern' does not apply to a 'latency' invariant "
        "(its fields: max_ms)",
    ]


def test_weights_show_the_sum() -> None:
    errors, _ = run({"agent": AGENT, "scoring": {"weights": {"mutation": 0.5}}})
    assert errors == [
        "scoring.weights: weights must sum to 1.0, got 1.3 "
        "(mutation 0.5 + chaos 0.35 + contract 0.35 + replay 0.1)"
    ]


def test_weights_tolerance() -> None:
    weights = {"mutation": 0.1, "chaos": 0.2, "contract": 0.3, "replay": 0.4}
    assert run({"agent": AGENT, "scoring": {"weights": weights}}) == ([], [])


def test_python_agent_with_tool_faults_needs_tools() -> None:
    data = {
        "agent": {"type": "python", "endpoint": "m:f"},
        "golden_prompts": ["p"],
        "chaos": {"tool_faults": [{"tool": "search", "mode": "error"}]},
    }
    errors, _ = run(data)
    assert len(errors) == 1 and errors[0].startswith("chaos.tool_faults: chaos has tool faults")
    data["agent"] = {"type": "python", "endpoint": "m:f", "tool_registry": "m:registry"}
    assert run(data) == ([], [])


def test_http_only_and_python_only_fields() -> None:
    errors, _ = run({"agent": {**AGENT, "tools": ["m:search"]}})
    assert errors == [
        "agent.tools: 'tools' applies to python agents only (write type: python, or route an "
        "http agent's traffic through the proxy)"
    ]


def test_probes_make_golden_prompts_optional_for_contract_only() -> None:
    inv = {"id": "a", "type": "completes", "probes": ["hello"]}
    assert run({"agent": AGENT, "contract": contract([inv], [{"name": "s"}])}) == ([], [])
    errors, _ = run({"agent": AGENT, "mutations": {}})
    assert errors == ["golden_prompts: at least one golden prompt is required by mutations"]


def test_when_warning_for_top_level_invariants() -> None:
    data = {
        "agent": AGENT,
        "golden_prompts": ["p"],
        "mutations": {},
        "invariants": [{"type": "completes", "when": "tool_faults_active"}],
    }
    _, warnings = run(data)
    assert warnings == [
        "invariants.0.when: 'tool_faults_active' applies to no scenario of the mutation or "
        "chaos phase, so this invariant is never checked"
    ]


def test_request_template_forms() -> None:
    ok = {"agent": {**AGENT, "request_template": {"messages": [{"content": "{prompt}"}]}}}
    assert run(ok) == ([], [])
    errors, _ = run({"agent": {**AGENT, "request_template": {"input": "fixed"}}})
    assert errors == [
        "agent.request_template: does not contain {prompt}, so the prompt would never be sent"
    ]
