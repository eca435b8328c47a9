"""What each cell spent and each scenario's amplification, as every report says it (SPEC §15)."""

from __future__ import annotations

import dataclasses
import json

from golden.cases import EVIL_MODEL, failing, hostile

from flakestorm.reporters import comment, html, junit, markdown, terminal
from flakestorm.reporters.spend_view import amplification, cell_spend, money
from flakestorm.results.model import (
    PhaseOutcome,
    RunResult,
    ScenarioInfo,
    from_document,
    to_document,
)
from flakestorm.results.usage import Counted, Spend, Usage

CALM = Spend({"llm": 2, "quotes": 2}, {}, Usage(200, 40, model="gpt-x"), 0.14)
DOWN = Spend({"llm": 6, "quotes": 6}, {"quotes": 6}, Usage(600, 120, model="gpt-x"), 0.84)
CUT = Spend({"llm": 4}, {"llm": 2}, Usage(100, 0, model="gpt-x", counted=Counted.UNKNOWN))


def _with_scenarios(*scenarios: ScenarioInfo) -> tuple[RunResult, PhaseOutcome]:
    base = failing()
    contract = dataclasses.replace(base.phases["contract"], scenarios=scenarios)
    return dataclasses.replace(base, phases={**base.phases, "contract": contract}), contract


def _matrix() -> tuple[RunResult, PhaseOutcome]:
    return _with_scenarios(
        ScenarioInfo("calm", (), spend=CALM),
        ScenarioInfo("quote-down", ("tool quotes: error",), spend=DOWN),
        ScenarioInfo("llm-cut", ("llm: truncate",), spend=CUT),
        ScenarioInfo("not-recorded", ("llm: timeout",)),
    )


def test_a_cell_s_spend_is_one_line_of_calls_tokens_and_cost() -> None:
    spend = Spend({"llm": 6, "quotes": 6}, {"quotes": 6}, Usage(720, 120, model="m"), 0.0008)
    assert (
        cell_spend(spend) == "calls: llm 6, quotes 6 (6 faulted); tokens 720 in / 120 out; $0.0008"
    )
    cached = Spend({"llm": 1}, {}, Usage(100, 5, cache_read=900, model="m"), 1.5)
    assert cell_spend(cached) == "calls: llm 1; tokens 1,000 in (900 cache read) / 5 out; $1.50"


def test_estimated_unknown_and_unpriced_are_said_never_made_up() -> None:
    estimated = Spend({"llm": 1}, {}, Usage(30, 7, model="m", counted=Counted.ESTIMATED), 0.000021)
    assert (
        cell_spend(estimated)
        == "calls: llm 1; tokens 30 in / 7 out (estimated); $0.000021 (estimated)"
    )
    assert (
        cell_spend(CUT)
        == "calls: llm 4 (2 faulted); tokens unknown (a reply cut before its usage); cost unknown"
    )
    unpriced = Spend({"llm": 1}, {}, Usage(10, 2, model="mystery"), None, ("mystery",))
    assert (
        cell_spend(unpriced)
        == "calls: llm 1; tokens 10 in / 2 out; cost unknown: no price for 'mystery'"
    )
    # no prices in the config: the tokens, and no cost at all
    assert (
        cell_spend(Spend({"llm": 1}, {}, Usage(10, 2, model="m")))
        == "calls: llm 1; tokens 10 in / 2 out"
    )
    assert cell_spend(Spend({"quotes": 2}, {"quotes": 1})) == "calls: quotes 2 (1 faulted)"
    assert cell_spend(Spend()) == "calls: none"
    assert cell_spend(None) is None
    assert [money(v) for v in (0.0, 0.000081, 0.0099999, 0.84, 1234.5)] == [
        "$0", "$0.000081", "$0.01", "$0.84", "$1,234.50",
    ]  # fmt: skip


def test_each_scenario_with_faults_is_compared_with_the_one_without() -> None:
    _, contract = _matrix()
    shown = amplification(contract)
    assert shown is not None
    assert shown.heading == "Spend against calm, the scenario without faults:"
    # 6/2 LLM calls, 720/240 tokens; the cut one's tokens and cost are unknown, and the scenario
    # with no spend recorded has no line
    assert shown.lines == (
        "quote-down: LLM calls 3.0×, tokens 3.0×, $0.84 vs $0.14",
        "llm-cut: LLM calls 2.0×, tokens unknown, cost unknown",
    )


def test_no_line_without_a_scenario_without_faults_or_without_spend() -> None:
    _, no_base = _with_scenarios(ScenarioInfo("quote-down", ("tool quotes: error",), spend=DOWN))
    assert amplification(no_base) is None
    _, unrecorded = _with_scenarios(
        ScenarioInfo("calm", ()), ScenarioInfo("quote-down", ("tool quotes: error",), spend=DOWN)
    )
    assert amplification(unrecorded) is None
    result, _ = _with_scenarios(ScenarioInfo("calm", ()))
    assert "Spend against" not in markdown.render(result)
    assert "Spend against" not in comment.render_first(result)


def test_a_base_with_no_llm_call_counts_rather_than_divides_by_zero() -> None:
    _, contract = _with_scenarios(
        ScenarioInfo("calm", (), spend=Spend({"quotes": 1})),
        ScenarioInfo("re-plan", ("tool quotes: error",), spend=DOWN),
    )
    shown = amplification(contract)
    assert shown is not None
    assert shown.lines == ("re-plan: LLM calls 6 vs 0, tokens 720 vs 0",)


def test_the_summary_the_comment_and_the_html_report_show_the_amplification() -> None:
    result, _ = _matrix()
    lines = (
        "**Spend against calm, the scenario without faults:**\n\n"
        "- quote-down: LLM calls 3.0×, tokens 3.0×, \\$0.84 vs \\$0.14\n"
        "- llm-cut: LLM calls 2.0×, tokens unknown, cost unknown\n"
    )
    assert lines in markdown.render(result)
    assert lines in comment.render_first(result)
    page = html.render(result)
    assert (
        '<p class="label" id="contract-spend">Spend against calm, the scenario without faults:</p>'
        in page
    )
    assert "<li>quote-down: LLM calls 3.0×, tokens 3.0×, $0.84 vs $0.14</li>" in page


def test_every_format_shows_a_failing_cell_s_spend() -> None:
    result = failing()
    line = "calls: llm 2, orders_api 3 (3 faulted); tokens 700 in / 120 out; $0.00018"
    assert f"    spent: {line}\n" in terminal.render(result) + "\n"
    assert (
        f"- **Spent:** {line.replace('_', chr(92) + '_').replace('$', chr(92) + '$')}\n"
        in markdown.render(result)
    )
    assert f'<p class="label">spent: {line}</p>' in html.render(result)
    assert f"output ({line})" in junit.render(result)


def test_a_hostile_model_name_is_escaped_in_every_format() -> None:
    result = hostile(huge=False)
    shown = [line for line in terminal.render(result).splitlines() if "spent:" in line]
    assert len(shown) == 1 and "no price for" in shown[0]
    assert "::error" not in shown[0] and "\u202e" not in shown[0]
    for document in (markdown.render(result), comment.render_first(result)):
        spent = [line for line in document.splitlines() if "no price for" in line]
        assert spent  # the amplification line, and in the summary the cell's
        for line in spent:
            assert "<" not in line and "**b**" not in line and "::error" not in line
            assert "\\*\\*b\\*\\*" in line and "&lt;script&gt;document.title" in line
            assert "@\u200dteam" in line and "#\u200d7" in line
    page = html.render(result)
    assert "<li>scn&lt;/th&gt;&lt;script&gt;alert(1)&lt;/script&gt;: LLM calls 1.0×" in page
    assert "m&lt;/li&gt;&lt;script&gt;" in page and EVIL_MODEL not in page
    report = junit.render(result)
    assert "no price for &quot;m&lt;/li&gt;&lt;script&gt;" in report and ":\u200b:error" in report


def test_many_scenarios_are_counted_past_the_limit_and_long_names_cut() -> None:
    name = "s" * 150
    faulted = [ScenarioInfo(f"{name}{i}", ("llm: timeout",), spend=DOWN) for i in range(12)]
    result, contract = _with_scenarios(ScenarioInfo("calm", (), spend=CALM), *faulted)
    shown = amplification(contract)
    assert shown is not None and len(shown.lines) == 12
    assert shown.lines[0] == f"{'s' * 99}…: LLM calls 3.0×, tokens 3.0×, $0.84 vs $0.14"
    body = comment.render_first(result)
    assert body.count(": LLM calls 3.0×") == 10
    assert "- … and 2 more scenarios (report.html, results.json)\n" in body


def test_flakestorm_report_renders_the_same_from_results_json() -> None:
    result, _ = _matrix()
    read = from_document(json.loads(json.dumps(to_document(result))))
    assert markdown.render(read) == markdown.render(result)
    assert html.render(read) == html.render(result)
    assert junit.render(read) == junit.render(result)
