"""The meaning checks: each check on Config values (with a locate hook that records config
paths), the parts they read when the structure is wrong elsewhere, and one ``validate`` that
lists every kind of problem at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.config_text import problems

from flakestorm.cli import main
from flakestorm.config import Config
from flakestorm.errors import Problem
from flakestorm.meaning import CHECKS, Check, Parts, Scope, check, register

AGENT = {"endpoint": "http://localhost:8000/invoke"}
INVALID = Path(__file__).parent / "configs" / "invalid"


def locate(path: tuple[str | int, ...], message: str, key: bool = False) -> Problem:
    return Problem("f.yaml", 1, 1, ".".join(map(str, path)), message)


def shown(problems: list[Problem]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in problems]


def run(data: dict[str, Any], base_dir: Path = Path(".")) -> tuple[list[str], list[str]]:
    found = check(Parts.of_config(Config.model_validate(data)), locate, base_dir)
    return shown(found.errors), shown(found.warnings)


def run_parts(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The checks over ``data`` whatever its structure, each on the parts that validated."""
    found = check(Parts.of_data(data), locate, Path("."))
    return shown(found.errors), shown(found.warnings)


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
    deep = '{"a": ' + "[" * 50_000 + '"{prompt}"' + "]" * 50_000 + "}"
    errors, _ = run({"agent": {**AGENT, "request_template": deep}})
    assert errors == [
        "agent.request_template: is nested too deeply to read as JSON once {prompt} is substituted"
    ]


# --------------------------------------------------------------------------- one pass


def test_one_validate_lists_structural_and_meaning_problems_of_every_kind(
    tmp_path: Path,
) -> None:
    config = INVALID / "one_pass.yaml"
    result = CliRunner().invoke(main, ["validate", "-c", str(config)])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    expected = [
        # (line, path, what the message says)
        (13, "contract.invariants[0].pattern", "regex '\\\\$[\\\\d,+' does not compile"),
        (14, "contract.invariants[1].id", "duplicate invariant id 'cites-price'"),
        (17, "contract.invariants[1].severity", "'critcal' is not valid"),
        (18, "contract.invariants[2]", "a 'regex' invariant needs 'pattern'"),
        (21, "contract.invariants[3].type", "'sentiment' is not valid"),
        (22, "contract.invariants[4]", "missing required field 'id'"),
        (26, "contract.invariants[5].when", "'llm_faults_active' applies to no scenario"),
        (29, "contract.chaos_matrix[0].tool_faults", "the python agent names no tools"),
        (32, "contract.chaos_matrix[1].name", "duplicate scenario name 'outage'"),
        (35, "scoring.weights", "weights must sum to 1.0, got 1.3"),
        (36, "ouput", "unknown key 'ouput' (did you mean 'output'?"),
    ]
    assert len(lines) == len(expected) + 1
    for line, (line_no, path, what) in zip(lines, expected, strict=False):
        prefix = "warning: " if path.endswith(".when") else ""
        assert line.startswith(f"{prefix}{config}:{line_no}:"), line
        assert f": {path}: " in line and what in line, line
    assert lines[-1] == f"error: 10 problems in {config} (and 1 warning)"


def test_a_check_whose_part_failed_is_skipped_and_the_others_run() -> None:
    data = {
        "agent": AGENT,
        "golden_prompts": ["p"],
        "scoring": {"weights": {"mutation": 2.0}},  # out of range: scoring failed
        "advanced": {"repeat": 1, "min_pass": 2},
    }
    errors, _ = run_parts(data)
    assert errors == ["advanced.min_pass: min_pass (2) cannot exceed repeat (1)"]


def test_each_invariant_and_scenario_is_checked_alone() -> None:
    data = {
        "agent": {"endpoint": "http://localhost:8000/invoke", "timeout": "soon"},
        "golden_prompts": ["p"],
        "contract": contract(
            [
                {"id": "a", "type": "contains", "severity": "bad"},
                {"id": "b", "type": "contains"},
            ],
            [
                {"name": "s", "llm_faults": [{"mode": "nope"}]},
                {"name": "t", "llm_faults": [{"mode": "truncated_response"}]},
                {"name": "s"},
            ],
        ),
    }
    errors, _ = run_parts(data)
    assert errors == [
        "contract.invariants.1: a 'contains' invariant needs 'value' (its fields: value, "
        "case_sensitive)",
        "contract.chaos_matrix.1.llm_faults.0: a 'truncated_response' LLM fault needs 'max_tokens'",
        "contract.chaos_matrix.2.name: duplicate scenario name 's' (also chaos_matrix[0]; "
        "names must be unique)",
    ]


def test_when_is_not_judged_against_a_matrix_with_a_broken_scenario() -> None:
    inv = {"id": "a", "type": "completes", "when": "llm_faults_active"}
    broken = {"name": "s", "llm_faults": [{"mode": "nope"}]}
    assert run_parts(
        {"agent": AGENT, "golden_prompts": ["p"], "contract": contract([inv], [broken])}
    ) == ([], [])


def test_parts_of_a_valid_config_are_the_configs_own() -> None:
    data = {
        "agent": AGENT,
        "golden_prompts": ["p"],
        "invariants": [{"type": "completes"}],
        "contract": contract([{"id": "a", "type": "completes"}], [{"name": "s"}]),
        "scoring": {"weights": {"mutation": 0.1, "chaos": 0.2, "contract": 0.3, "replay": 0.4}},
    }
    config = Config.model_validate(data)
    whole, alone = Parts.of_config(config), Parts.of_data(data)
    assert alone.failed == frozenset()
    assert alone == whole


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """A check registered for the test (and removed after) that records that it ran."""
    ran: list[str] = []

    def record(scope: Scope) -> None:
        ran.append("ran")

    register(Check("test check", ("mutations",), record))
    yield ran
    del CHECKS["test check"]


def test_a_registered_check_runs_only_when_its_parts_validated(registered: list[str]) -> None:
    run_parts({"agent": AGENT, "mutations": {"count": 0}})
    assert registered == []
    run_parts({"agent": AGENT, "mutations": {"count": 1}})
    assert registered == ["ran"]


def test_each_fault_is_checked_alone_in_a_scenario_wrong_elsewhere() -> None:
    scenario = {
        "name": "mixed",
        "tool_faults": [{"tool": "quotes", "mode": "eror"}, {"tool": "quotes", "mode": "slow"}],
        "context_attacks": {"overflow": {}, "memory_poisoning": {"payload": 3}},
    }
    data = {
        "agent": {"type": "python", "endpoint": "m:f"},
        "golden_prompts": ["p"],
        "contract": contract([{"id": "a", "type": "completes"}], [scenario]),
        "chaos": {"tool_faults": [{"tool": "x"}]},
    }
    errors, _ = run_parts(data)
    assert errors == [
        "contract.chaos_matrix.0.tool_faults.1: a 'slow' tool fault needs 'delay_ms'",
        "contract.chaos_matrix.0.context_attacks.0: an 'overflow' context attack needs "
        "'inject_tokens' (its fields: inject_tokens, tool, calls, every, window_ms)",
        "contract.chaos_matrix.0.tool_faults: scenario 'mixed' has tool faults but the python "
        "agent names no tools: set agent.tools (module:attr of each tool), "
        "agent.tool_registry, proxy.tools (the URLs its tools call) or proxy.mcp (its MCP "
        "servers' URLs)",
        "chaos.tool_faults: chaos has tool faults but the python agent names no tools: set "
        "agent.tools (module:attr of each tool), agent.tool_registry, proxy.tools (the "
        "URLs its tools call) or proxy.mcp (its MCP servers' URLs)",
    ]


def test_a_misspelt_key_does_not_hide_the_meaning_of_the_rest() -> None:
    text = """\
        agent:
          type: python
          endpont: quote_agent:answer
          tols: [tools:get_quote]
        golden_prompts: [hi]
        contract:
          name: c
          invariants:
            - {id: a, type: regex, patern: "(unclosed"}
          chaos_matrix:
            - name: s
              tool_faults: [{tool: get_quote, mode: slow, delay_m: 5}]
              llm_faults: [{mode: truncated_response}]
        """
    # (each unknown key's list of valid keys left out)
    assert [p.split("; valid keys")[0] for p in problems(text)] == [
        "flakestorm.yaml:3:3: agent.endpont: unknown key 'endpont' (did you mean 'endpoint'?",
        "flakestorm.yaml:4:3: agent.tols: unknown key 'tols' (did you mean 'tools'?",
        "flakestorm.yaml:9:28: contract.invariants[0].patern: unknown key 'patern' (did you "
        "mean 'pattern'?",
        # read as meant, the regex is checked too, and shown where it is written
        "flakestorm.yaml:9:36: contract.invariants[0].patern: regex '(unclosed' does not "
        "compile: missing ), unterminated subpattern at position 0",
        "flakestorm.yaml:12:51: contract.chaos_matrix[0].tool_faults[0].delay_m: unknown key "
        "'delay_m' (did you mean 'delay_ms'?",
        # the python agent names no agent.llm for the scenario's LLM faults (as the run says)
        "flakestorm.yaml:13:7: contract.chaos_matrix[0].llm_faults: scenario 's' has LLM faults "
        "but the python agent names no `agent.llm` callable to wrap: set agent.llm to the "
        "module:attr the agent calls its LLM through (LLM faults are never skipped silently)",
        # the scenario is wrong in one fault: its other faults are checked
        "flakestorm.yaml:13:20: contract.chaos_matrix[0].llm_faults[0]: a 'truncated_response' "
        "LLM fault needs 'max_tokens'",
    ]


def test_the_mutations_packages_checks_run_beside_structural_errors() -> None:
    data = {
        "agent": {"type": "python", "endpoint": "m:f"},
        "golden_prompts": ["p"],
        "mutations": {"types": ["paraphrase", "http_header_injection", "paraphrase"]},
        "scoring": {"weights": {"mutation": "lots"}},
    }
    errors, _ = run_parts(data)
    assert errors == [
        "mutations.types.1: 'http_header_injection' is a request-level mutation: it changes the "
        "HTTP request, and a python agent has none (remove it, or test the agent over HTTP; by "
        "default python agents get the prompt-level types only)",
        "mutations.types.2: 'paraphrase' is listed twice",
    ]


def test_a_config_of_the_parts_keeps_what_validated() -> None:
    data = {
        "agent": {"type": "python", "endpoint": "m:f"},
        "golden_prompts": ["p"],
        "invariants": [{"type": "completes"}, {"type": "nope"}],
        "scoring": {"weights": {"mutation": "lots"}},
        "advanced": {"seed": 7},
    }
    config = Parts.of_data(data).config()
    assert config.agent.endpoint == "m:f" and config.golden_prompts == ["p"]
    assert [inv.type.value for inv in config.invariants] == ["completes"]
    assert config.scoring == Config.model_fields["scoring"].get_default()
    assert config.advanced.seed == 7 and config.contract is None


def test_a_match_forward_route_is_checked_where_each_url_is() -> None:
    text = "agent:\n  endpoint: http://localhost:8000/invoke\n" + (
        "proxy:\n"
        "  tools:\n"
        "    quotes: {match: 'https://api.market.example/v1', forward: 'http://stub:9000'}\n"
        "    news: {match: 'http://news.example/v1', forward: 'stub'}\n"
    )
    found = problems(text)
    assert found == [
        "flakestorm.yaml:5:21: proxy.tools.quotes.match: an http agent's calls to an https URL "
        "reach the proxy as TLS tunnels, which it can neither read nor send on to "
        "http://stub:9000: point the agent's base URL for quotes at the proxy's /tools/quotes "
        "route (proxy.tools.quotes: http://stub:9000), or match an http:// URL",
        "flakestorm.yaml:6:54: proxy.tools.news.forward: 'stub' is not an http(s) URL",
    ]
    python = text.replace("agent:\n", "agent:\n  type: python\n").replace(
        "http://localhost:8000/invoke", "m:f"
    )
    assert [p for p in problems(python) if "quotes" in p] == []


ROUTED = {"tools": {"quotes": "http://127.0.0.1:9/quotes"}}


def test_an_invariant_on_calls_names_a_target_some_call_can_have() -> None:
    invariants = [
        {"id": "a", "type": "max_calls", "target": "quote", "max": 2},
        {"id": "b", "type": "max_calls", "target": "llm", "max": 2.5},
        {"id": "c", "type": "no_duplicate_effects", "target": "quotes"},
        {"id": "d", "type": "max_calls", "target": "*", "max": 9},
    ]
    doc = {"agent": AGENT, "golden_prompts": ["p"], "proxy": ROUTED}
    errors, _ = run({**doc, "contract": contract(invariants, [{"name": "s"}])})
    assert errors == [
        "contract.invariants.0.target: 'quote' is no target a call can have (did you mean "
        "'quotes'?): a target is llm, '*', a route of proxy.tools, a tool the agent wraps, "
        "SERVER.TOOL of proxy.mcp or an A2A agent of proxy.a2a (llm, *, quotes)",
        "contract.invariants.1.max: max_calls counts whole calls: max must be a whole number, "
        "got 2.5",
    ]


def test_max_amplification_needs_a_scenario_without_faults_to_compare_with() -> None:
    amplified = [{"id": "a", "type": "max_amplification", "max": 2}]
    down = {"name": "down", "tool_faults": [{"tool": "quotes", "mode": "error"}]}
    doc = {"agent": AGENT, "golden_prompts": ["p"], "proxy": ROUTED}
    doc["contract"] = contract(amplified, [down])
    errors, _ = run(doc)
    assert errors == [
        "contract.invariants.0.type: max_amplification compares each cell with the same prompt "
        "without chaos, but contract.chaos_matrix has no scenario without faults: add one "
        "(e.g. `- name: no-chaos`)"
    ]
    doc["contract"] = contract(amplified, [{"name": "calm"}, down])
    assert run(doc) == ([], [])
    only_chaos = [{**amplified[0], "when": "any_chaos_active"}]
    doc["contract"] = contract(only_chaos, [{"name": "calm"}, down])
    assert run(doc)[0] == [
        "contract.invariants.0.when: max_amplification compares each scenario with the one "
        "without faults, so it runs in both: `when: any_chaos_active` leaves one of them out "
        "(use `always`)"
    ]


def test_a_python_agent_whose_calls_flakestorm_cannot_see_has_no_invariant_on_calls() -> None:
    agent = {"type": "python", "endpoint": "m:answer"}
    counted = [{"id": "a", "type": "max_calls", "target": "llm", "max": 2}]
    errors, _ = run(
        {"agent": agent, "golden_prompts": ["p"], "contract": contract(counted, [{"name": "s"}])}
    )
    assert errors == [
        "contract.invariants.0.type: max_calls counts the agent's calls, but flakestorm sees "
        "none of this python agent's: set agent.llm, agent.tools (or agent.tool_registry), or "
        "proxy.tools for the URLs its tools call"
    ]
    with_tools = {**agent, "tools": ["m:get_quote"]}
    doc = {"agent": with_tools, "golden_prompts": ["p"]}
    errors, _ = run({**doc, "contract": contract(counted, [{"name": "s"}])})
    assert errors == [
        "contract.invariants.0.target: target llm: the python agent names no `agent.llm` "
        "callable, so flakestorm sees none of its LLM calls: set agent.llm to the module:attr "
        "it calls its LLM through"
    ]


def test_an_invariant_on_calls_where_mutations_judge_replies_is_a_warning() -> None:
    doc = {
        "agent": AGENT,
        "golden_prompts": ["p"],
        "invariants": [{"type": "max_calls", "target": "llm", "max": 2}],
        "mutations": {"count": 1},
    }
    errors, warnings = run(doc)
    assert errors == []
    assert warnings == [
        "invariants.0.type: max_calls is judged on the calls of the contract and chaos "
        "matrices' cells; the mutation phase judges each mutation's reply, not its calls, so "
        "it does not check this invariant"
    ]
