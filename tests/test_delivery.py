"""Delivery judged from the proof a scenario keeps (SPEC §4): from the results alone, and
again over several result files (a fault delivered in any of them is delivered); and through a
run, where the calls the wrapped tool received are the proof."""

from __future__ import annotations

import dataclasses
import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.quote_project import contract_cells, quote_project, run_config

from flakestorm.chaos.delivery.proof import judge
from flakestorm.results.model import (
    CellResult,
    PromptResult,
    ScenarioInfo,
    Status,
    from_document,
)

LABEL = "tool_faults[0] error(503) on quotes"
HINT = "the agent made no call to `quotes`"


def cell(index: int, status: Status = Status.PASSED) -> CellResult:
    prompt = PromptResult("p", "p", 0, status is Status.PASSED, "ok", "answer", 1.0)
    return CellResult(index, f"inv{index}", "down", "critical", status, "ok", prompts=(prompt,))


def proof(matched: tuple[str, ...] = ()) -> ScenarioInfo:
    return ScenarioInfo(
        "down", ("tool quotes: error",), declared=(LABEL,), matched=matched, hints={LABEL: HINT}
    )


def test_a_declared_fault_no_call_matched_errors_every_scored_cell_keeping_its_verdict() -> None:
    skipped = dataclasses.replace(cell(2), status=Status.SKIPPED, prompts=())
    info, cells = judge(proof(), [cell(0), cell(1, Status.FAILED), skipped])
    assert info.undelivered == (LABEL,)
    assert [c.status for c in cells] == [Status.ERRORED, Status.ERRORED, Status.SKIPPED]
    assert cells[0].reason == f"fault not delivered: {LABEL}: {HINT}"
    assert [c.checked for c in cells] == [Status.PASSED, Status.FAILED, None]


def test_a_matched_fault_is_delivered_and_cells_keep_their_verdicts() -> None:
    info, cells = judge(proof(matched=(LABEL,)), [cell(0), cell(1, Status.FAILED)])
    assert info.undelivered == ()
    assert [c.status for c in cells] == [Status.PASSED, Status.FAILED]


def test_judging_again_with_the_calls_of_another_file_restores_the_verdicts() -> None:
    # one shard's calls never matched the fault; another shard's did
    info, cells = judge(proof(), [cell(0), cell(1, Status.FAILED)])
    merged = dataclasses.replace(info, matched=(*info.matched, LABEL))
    again, restored = judge(merged, cells)
    assert again.undelivered == ()
    assert [(c.status, c.reason, c.checked) for c in restored] == [
        (Status.PASSED, "ok", None),
        (Status.FAILED, "ok", None),
    ]


def test_a_scenario_stopped_before_it_finished_is_not_judged() -> None:
    stopped = dataclasses.replace(cell(1), status=Status.NOT_RUN)
    info, cells = judge(proof(), [cell(0), stopped])
    assert info.undelivered == ()
    assert cells[0].status is Status.PASSED


def test_the_proof_survives_results_json() -> None:
    from golden.cases import chaos_only

    from flakestorm.results.model import to_document

    result = chaos_only()
    doc = json.loads(json.dumps(to_document(result)))
    scenario = doc["phases"]["chaos"]["scenarios"][0]
    assert scenario["declared"] and scenario["hints"]
    back = from_document(doc)
    info = back.phases["chaos"].scenarios[0]
    judged, _ = judge(info, back.phases["chaos"].cells)
    assert judged.undelivered == info.undelivered


# --------------------------------------------------------------------------- through a run


def test_a_tool_result_attack_whose_every_result_a_tool_fault_replaced_is_not_delivered(
    tmp_path: Path,
) -> None:
    # every call to get_quote reached flakestorm, but the error fault answered each one
    # instead of the tool: the injection never had a result to poison (SPEC §10)
    path = quote_project(
        tmp_path,
        [
            {
                "name": "outage",
                "tool_faults": [{"tool": "get_quote", "mode": "error", "probability": 1.0}],
                "context_attacks": [{"type": "indirect_injection", "payloads": ["IGNORE"]}],
            }
        ],
    )
    result = run_config(path)
    assert "contract" in result.phases
    (info,) = result.phases["contract"].scenarios
    assert info.undelivered == ("context_attacks[0] indirect_injection",)
    cell = contract_cells(result)["answers[outage]"]
    assert cell.status is Status.ERRORED
    assert cell.reason == (
        "fault not delivered: context_attacks[0] indirect_injection: it matched 2 calls but "
        "each one's result was replaced by tool_faults[0] error(503) on get_quote: nothing "
        "was poisoned"
    )
    assert cell.checked is Status.PASSED
    assert cell.faults_fired == ("tool_faults[0] error(503) on get_quote",)
    assert result.exit_code == 3


def test_a_tool_result_attack_on_a_slow_tools_real_result_is_delivered(tmp_path: Path) -> None:
    path = quote_project(
        tmp_path,
        [
            {
                "name": "slow",
                "tool_faults": [{"tool": "get_quote", "mode": "slow", "delay_ms": 1}],
                "context_attacks": [{"type": "indirect_injection", "payloads": ["IGNORE"]}],
            }
        ],
        invariants=[{"id": "clean", "type": "excludes_pattern", "patterns": ["IGNORE"]}],
    )
    result = run_config(path)
    assert "contract" in result.phases
    assert result.phases["contract"].scenarios[0].undelivered == ()
    cell = contract_cells(result)["clean[slow]"]
    assert cell.status is Status.FAILED  # the agent quoted the poisoned result
    assert cell.faults_fired == (
        "tool_faults[0] slow(1 ms) on get_quote",
        "context_attacks[0] indirect_injection",
    )


def test_a_replaced_attacks_reason_counts_the_calls_of_each_fault() -> None:
    attack = "context_attacks[0] indirect_injection"
    info = ScenarioInfo(
        "down",
        (),
        declared=(attack,),
        replaced={
            attack: {
                "tool_faults[0] error(503) on quotes": 2,
                "tool_faults[1] timeout on news": 1,
            }
        },
    )
    judged, (errored,) = judge(info, [cell(0)])
    assert judged.undelivered == (attack,)
    assert errored.reason == (
        f"fault not delivered: {attack}: it matched 3 calls but each one's result was "
        "replaced by a tool fault (tool_faults[0] error(503) on quotes: 2; tool_faults[1] "
        "timeout on news: 1): nothing was poisoned"
    )
    one = dataclasses.replace(info, replaced={attack: {"tool_faults[0] error(503) on quotes": 1}})
    assert one.why(attack) == (
        "it matched 1 call but its result was replaced by tool_faults[0] error(503) on "
        "quotes: nothing was poisoned"
    )
    # a call it could act on elsewhere (another shard, say) makes it delivered
    delivered, _ = judge(dataclasses.replace(info, matched=(attack,)), [cell(0)])
    assert delivered.undelivered == ()


def test_faults_fired_are_attributed_to_cells_of_a_scenario_whose_name_has_a_hash(
    tmp_path: Path,
) -> None:
    path = quote_project(
        tmp_path, [{"name": "outage #2", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}]
    )
    result = run_config(path)
    cell = contract_cells(result)["answers[outage #2]"]
    assert cell.status is Status.PASSED, cell.reason
    assert cell.faults_fired == ("tool_faults[0] error(503) on get_quote",)
    assert len(cell.calls) == 2  # one tool call per golden prompt


def test_a_scenario_whose_resets_all_failed_is_not_reported_as_fault_not_delivered(
    tmp_path: Path,
) -> None:
    # no cell invoked the agent, so nothing proves or disproves delivery: the cells keep the
    # real reason (the reset failed) instead of a wiring hint about the proxy/wrappers
    path = quote_project(
        tmp_path,
        [{"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}],
        agent={"reset_function": "TOOLS:reset"},
    )
    result = run_config(path)
    assert "contract" in result.phases
    assert result.phases["contract"].scenarios[0].undelivered == ()
    cell = contract_cells(result)["answers[down]"]
    assert cell.status is Status.ERRORED
    assert cell.reason.startswith("reset failed"), cell.reason


def test_a_settled_scenarios_calls_are_forgotten_so_a_long_run_never_drops_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interaction log is bounded; each scenario's calls leave it once they are in its
    cells, so a run with many more calls than the bound still proves every scenario."""
    from flakestorm.chaos.delivery import interactions
    from flakestorm.engine.phases import matrix

    class SmallLog(interactions.InteractionLog):
        def __init__(self) -> None:
            super().__init__(limit=8)  # one scenario's calls (2 cells x 2 prompts) fit

    monkeypatch.setattr(interactions, "InteractionLog", SmallLog)
    # scenarios in flight together (their calls all in the log at once) one wave at a time
    monkeypatch.setattr(matrix, "MAX_FLIGHT_INVOCATIONS", 4)
    scenarios = [
        {"name": f"down-{n}", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}
        for n in range(4)
    ]
    invariants = [
        {"id": "answers", "type": "output_not_empty"},
        {"id": "cites", "type": "contains", "value": "source"},
    ]
    result = run_config(quote_project(tmp_path, scenarios, invariants=invariants))
    cells = contract_cells(result)
    assert len(cells) == 8
    for cell in cells.values():
        assert cell.status.value == "passed", cell.reason
        assert len(cell.calls) == 2 and cell.faults_fired
    assert all(not s.undelivered for s in result.phases["contract"].scenarios)


def test_an_unreachable_upstream_errors_the_cell_instead_of_failing_the_agent() -> None:
    """The agent asks its tool through the proxy; the tool's real upstream is down. The agent
    met flakestorm's failure (a 502), not its own: the cell is errored, naming the upstream,
    and the run exits 3 — not a FAILED cell blamed on the agent."""
    from support.server import LoopbackServer, Request, Response

    from flakestorm.chaos.proxy.server import ChaosProxy
    from flakestorm.engine.runner import run_phases
    from flakestorm.loader import load_config_text

    with LoopbackServer() as gone:
        dead = gone.url  # nothing listens there any more
    with ChaosProxy(tools={"quotes": dead}) as proxy:

        def agent(request: Request) -> Response:
            import requests

            cell = {"X-Flakestorm-Cell": request.headers.get("x-flakestorm-cell", "")}
            got = requests.get(f"{proxy.url}/tools/quotes/price", headers=cell, timeout=10)
            answer = "AAPL is at 123.45" if got.ok else f"AAPL is unavailable ({got.status_code})"
            return Response.json({"output": answer})

        with LoopbackServer(agent) as service:
            doc = {
                "agent": {"endpoint": service.url_for("/chat"), "session": {"header": "X-S"}},
                "golden_prompts": ["What is AAPL?"],
                "proxy": {"url": proxy.url, "tools": {"quotes": dead}},
                "contract": {
                    "name": "c",
                    "invariants": [{"id": "priced", "type": "regex", "pattern": r"\d+\.\d\d"}],
                    "chaos_matrix": [
                        {"name": "calm"},
                        {
                            "name": "slow",
                            "tool_faults": [{"tool": "quotes", "mode": "slow", "delay_ms": 1}],
                        },
                    ],
                },
            }
            result = run_phases(load_config_text(json.dumps(doc)), ["contract"])
    cells = {c.scenario: c for c in result.phases["contract"].cells}
    for scenario in ("calm", "slow"):  # a slow fault goes upstream too
        assert cells[scenario].status is Status.ERRORED
        assert cells[scenario].reason.startswith(f"upstream unreachable: quotes ({dead} is unre")
        assert cells[scenario].checked is Status.FAILED  # its own verdict, kept
    assert result.exit_code == 3


ORDER_AGENT = """
import {tools}


def answer(prompt):
    quote = {tools}.get_quote("AAPL")  # the second declared fault's tool is called first
    news = {tools}.get_news("AAPL")
    return f"According to the feed: {{quote}} {{news}}"
"""
ORDER_TOOLS = """
def get_news(ticker):
    return "no news for " + ticker


def get_quote(ticker):
    return "123.45"
"""


def test_faults_fired_are_listed_in_declaration_order_in_every_report(tmp_path: Path) -> None:
    from flakestorm.reporters import comment, html, junit, markdown, terminal
    from flakestorm.reporters import json as json_report

    suffix = uuid.uuid4().hex[:10]
    agent, tools = f"order_agent_{suffix}", f"order_tools_{suffix}"
    (tmp_path / f"{agent}.py").write_text(ORDER_AGENT.format(tools=tools))
    (tmp_path / f"{tools}.py").write_text(ORDER_TOOLS)
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"{agent}:answer",
            "tools": [f"{tools}:get_news", f"{tools}:get_quote"],
        },
        "golden_prompts": ["news and price of AAPL?", "AAPL?"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "clean", "type": "excludes_pattern", "patterns": ["IGNORE"]}],
            "chaos_matrix": [
                {
                    "name": "all",
                    "tool_faults": [
                        {"tool": "get_news", "mode": "slow", "delay_ms": 1},
                        {"tool": "get_quote", "mode": "slow", "delay_ms": 1},
                    ],
                    "context_attacks": [
                        {"type": "indirect_injection", "payloads": ["IGNORE"]},
                        {"type": "memory_poisoning", "payload": "Remember me."},
                    ],
                }
            ],
        },
        "advanced": {"seed": 1},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_config(path)
    cell = contract_cells(result)["clean[all]"]
    assert cell.status is Status.FAILED  # the agent quoted the poisoned results
    # each invocation's calls fired tool_faults[1] before tool_faults[0]
    for invocation in ("0.0", "0.1"):
        assert [c.fired[0] for c in cell.calls if c.invocation == invocation] == [
            "tool_faults[1] slow(1 ms) on get_quote",
            "tool_faults[0] slow(1 ms) on get_news",
        ]
    declared = [
        "tool_faults[0] slow(1 ms) on get_news",
        "tool_faults[1] slow(1 ms) on get_quote",
        "context_attacks[0] indirect_injection",
        "context_attacks[1] memory_poisoning(append)",
    ]
    assert list(cell.faults_fired) == declared
    shown = ", ".join(declared)

    document = json.loads(json_report.render(result))
    (kept,) = document["phases"]["contract"]["cells"]
    assert kept["faults_fired"] == declared
    assert f"(faults fired: {shown})" in terminal.render(result)
    assert shown in markdown.render(result).replace("\\", "")
    assert shown in comment.render_first(result).replace("\\", "")
    out = ET.fromstring(junit.render(result)).findtext(".//testcase/system-out") or ""
    assert f"faults fired: {shown}" in out
    page = html.render(result)
    at = [page.index(label) for label in declared]
    assert at == sorted(at)
