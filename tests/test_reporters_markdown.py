"""The job summary: escaping of untrusted text, structure, and the 1 MiB limit."""

from __future__ import annotations

import dataclasses
import re

from golden.cases import chaos_only, failing, hostile, hostile_url, large_run, passing

from flakestorm.reporters import markdown
from flakestorm.reporters.markdown import SUMMARY_LIMIT_BYTES
from flakestorm.results.model import CallRecord

# --------------------------------------------------------------------------- the summary


def test_verdict_and_scores_come_first() -> None:
    out = markdown.render(failing())
    head = out.split("### Contract", 1)[0]
    # the run exits 3 (an errored cell): its verdict is ERROR, with the cause, never FAIL
    assert head.startswith("## flakestorm: 💥 ERROR\n\n**Exit 3: flakestorm could not carry")
    assert "1 cell errored: reset failed: POST /reset returned 500" in head
    assert "**Overall score: 48.08**" in head and "min\\_score 80" in head
    assert "contract support-agent: 46.15 (failed) · chaos: 50.00 (1 of 2 prompts passed)" in head
    assert "The gate failed:" in head and "mentions\\_refund\\[tool\\_outage\\]" in head
    assert "phases: chaos, contract" in head and "seed 1234" in head
    assert "13 invocations" in head
    assert "stopped early (max\\_invocations)" in head
    assert "No reset\\_endpoint configured" in head
    # the chaos phase's warning, which the contract phase also gave, is listed once
    assert head.count("forwards no attribution to its tool and LLM calls") == 1


def test_the_chaos_phase_has_its_own_section_after_the_contract() -> None:
    out = markdown.render(failing())
    contract, _, chaos = out.partition("### Chaos: 50.00 (1 of 2 prompts passed)")
    assert "### Contract support-agent: 46.15 (failed)" in contract
    assert "| invariant | severity | chaos |" in chaos
    assert "| completes | medium | ❌ |" in chaos and "| output-not-empty | medium | ✅ |" in chaos
    assert "#### Failed and errored cells (1)" in chaos
    assert "<summary>❌ completes[chaos] · medium ·" in chaos


def test_a_chaos_only_run_has_only_the_chaos_section() -> None:
    out = markdown.render(chaos_only())
    assert "### Contract" not in out and "contract" not in out.split("### Chaos", 1)[0]
    assert "**Overall score: 0.00** · min\\_score 70 · chaos: 0.00 (0 of 2 prompts passed)" in out
    assert markdown.render(dataclasses.replace(chaos_only(), phases={})).endswith("No phase ran.\n")


def test_undelivered_faults_are_flagged_near_the_top_with_the_hint() -> None:
    out = markdown.render(chaos_only())
    head = out.split("### Chaos", 1)[0]
    block = head[head.index("> [!WARNING]") :]
    assert block.startswith("> [!WARNING]\n> **🚫 Faults not delivered:**")
    assert (
        "> - the chaos phase: tool\\_faults\\[0\\] error(503) on flight\\_search — the agent made "
        "no call to \\`flight\\_search\\` through flakestorm — is its base URL for that tool "
        "pointed at the proxy (http://127.0.0.1:8080/tools/flight\\_search)"
    ) in block
    assert head.index("Faults not delivered") < head.index("phases: chaos")
    assert "Faults not delivered" not in markdown.render(failing())


def test_an_undelivered_fault_that_matched_calls_is_listed_with_why_not_a_wiring_hint() -> None:
    result = chaos_only()
    outcome = result.phases["chaos"]
    (info,) = outcome.scenarios
    attack, fault = "context_attacks[0] indirect_injection", "tool_faults[0] error(503) on search"
    replaced = dataclasses.replace(
        info, undelivered=(attack,), declared=(attack,), replaced={attack: {fault: 2}}
    )
    chaos = dataclasses.replace(outcome, scenarios=(replaced,))
    out = markdown.render(dataclasses.replace(result, phases={"chaos": chaos}))
    assert (
        "> - the chaos phase: context\\_attacks\\[0\\] indirect\\_injection — it matched 2 calls "
        "but each one's result was replaced by tool\\_faults\\[0\\] error(503) on search: "
        "nothing was poisoned"
    ) in out
    unapplied = dataclasses.replace(replaced, replaced={}, unapplied={attack: "a streamed reply"})
    chaos = dataclasses.replace(outcome, scenarios=(unapplied,))
    out = markdown.render(dataclasses.replace(result, phases={"chaos": chaos}))
    assert (
        "indirect\\_injection — it matched a call but could not be applied: a streamed reply"
    ) in out


def test_an_undelivered_scenario_is_marked_in_the_matrix_and_the_legend() -> None:
    out = markdown.render(chaos_only())
    assert "| invariant | severity | chaos 🚫 |" in out
    assert f"{markdown.LEGEND} · {markdown.UNDELIVERED_LEGEND}" in out
    assert (
        "| chaos 🚫 | tool flight\\_search: error<br>llm: truncated\\_response | 🚫 not delivered: "
        "tool\\_faults\\[0\\] error(503) on flight\\_search |" in out
    )
    assert markdown.UNDELIVERED_LEGEND not in markdown.render(failing())
    contract = markdown.render(hostile())
    assert "| calm | dead\\|\\`x\\`&lt;/th&gt;&lt;img src=x&gt; 🚫 |" in contract
    assert (
        "scenario **dead\\|\\`x\\`&lt;/th&gt;&lt;img src=x&gt;**: tool\\_faults\\[0\\]" in contract
    )


def test_the_scenarios_table_lists_declared_faults_and_how_they_ran() -> None:
    out = markdown.render(failing())
    assert "<summary>Scenarios (3) and their declared faults</summary>" in out
    assert "| baseline | none |  |" in out
    assert (
        "| tool\\_outage | tool orders\\_api: error<br>tool orders\\_api: slow | cells ran one "
        "at a time (no call showed forwarded attribution; tool\\_faults\\[0\\] error(503) on "
        "orders\\_api: probability 0.5) |"
    ) in out
    # the calls of a scenario whose cells ran side by side, not attributed: counted and listed
    assert (
        "| poisoned\\_memory | memory\\_poisoning: append | 3 calls not attributed to a cell "
        "(cells ran side by side; no attribution forwarded) |"
    ) in out
    assert "| 2 | tool orders\\_api GET `http://127.0.0.1:8080/tools/orders_api/orders/42`" in out
    # no notes column when no scenario has a note
    passing_out = markdown.render(passing())
    assert "| scenario | faults declared |\n|---|---|\n| baseline | none |" in passing_out


def test_matrix_marks_every_status_with_a_legend() -> None:
    out = markdown.render(failing())
    assert "| mentions\\_refund | critical | ✅ | ❌ | ⏸ |" in out
    assert "| no\\_injection | high | ⚠️ | 💥 | ❌⚠️ |" in out
    assert "| quick | low | ✅ | ➖ | ➖ |" in out
    assert markdown.LEGEND in out


def test_failed_and_errored_cells_have_details_critical_first() -> None:
    out = markdown.render(failing())
    summaries = re.findall(r"<summary>(.*)</summary>", out)
    assert [s.split(" · ")[0] for s in summaries if "[" in s] == [
        "❌ mentions_refund[tool_outage]",
        "💥 no_injection[tool_outage]",
        "❌⚠️ no_injection[poisoned_memory]",
        "❌ completes[chaos]",
    ]
    assert "tool\\_faults\\[0\\] error(503) on orders\\_api" in out
    assert "No reply: timeout: no reply within 30000 ms" in out
    assert "Sent to the agent (after context attacks):" in out


def test_failed_cells_list_the_calls_with_faults_and_upstream_errors() -> None:
    out = markdown.render(failing())
    assert "- **Calls through flakestorm:** 5\n\n| # | call | status | faults fired | ms |" in out
    assert (
        "| 3 | tool orders\\_api GET `http://127.0.0.1:8080/tools/orders_api/orders/42` | 502 · "
        "upstream error: connection refused: orders.internal:443 | tool\\_faults\\[1\\] "
        "slow(2000 ms) on orders\\_api | 2003 |"
    ) in out
    assert (
        "| 5 | tool orders\\_api GET `http://127.0.0.1:8080/tools/orders_api/orders/43` | no "
        "reply | tool\\_faults\\[0\\] error(503) on orders\\_api | 30000 |"
    ) in out
    # a reset failure never invoked the agent: nothing to say about calls
    reset = out[out.index("💥 no_injection[tool_outage]") :]
    assert "Calls through" not in reset[: reset.index("</details>")]


def test_no_calls_under_declared_faults_is_said() -> None:
    base = failing()
    assert "contract" in base.phases
    cells = list(base.phases["contract"].cells)
    cells[1] = dataclasses.replace(cells[1], calls=(), faults_fired=(), spend=None)
    contract = dataclasses.replace(base.phases["contract"], cells=tuple(cells))
    out = markdown.render(dataclasses.replace(base, phases={**base.phases, "contract": contract}))
    assert "- **Faults fired:** none\n- **Calls through flakestorm:** none\n" in out


def test_the_calls_of_a_cell_are_capped_with_a_count() -> None:
    base = failing()
    assert "contract" in base.phases
    cells = list(base.phases["contract"].cells)
    calls = tuple(
        CallRecord("tool", "orders_api", "GET", f"http://p/tools/orders_api/{i}", 200)
        for i in range(25)
    )
    cells[1] = dataclasses.replace(cells[1], calls=calls)
    contract = dataclasses.replace(base.phases["contract"], cells=tuple(cells))
    out = markdown.render(dataclasses.replace(base, phases={**base.phases, "contract": contract}))
    assert "- **Calls through flakestorm:** 25, the first 10 below" in out
    assert "`http://p/tools/orders_api/9`" in out
    assert "`http://p/tools/orders_api/10`" not in out


def test_a_passing_run_has_no_cell_details() -> None:
    out = markdown.render(passing())
    assert out.startswith("## flakestorm: ✅ PASS")
    assert out.count("<details>") == 1  # the scenarios table
    assert "Failed and errored cells" not in out


def test_hostile_output_stays_text() -> None:
    out = markdown.render(hostile())
    outside_code = re.sub(r"(`{3,})text\n.*?\n\1\n", "", out, flags=re.S)
    assert "<script" not in outside_code and "<img" not in outside_code
    assert "<!--" not in outside_code and "<td" not in outside_code and "</th" not in outside_code
    # 4 failed or errored cells, the calls not attributed to a cell and the scenarios table
    assert outside_code.count("<details>") == outside_code.count("</details>") == 6
    assert re.search(r"^::", out, flags=re.M) is None and "::error" not in out
    assert "@team" not in out and "#42" not in out and "@org" not in out
    assert "\u202e" not in out and "\x1b" not in out and "\x00" not in out
    out.encode("utf-8")
    assert len(out) < 30_000  # the 2 MiB reply is an excerpt


def test_a_hostile_call_record_stays_in_its_table_cell() -> None:
    out = markdown.render(hostile())
    rows = out.split("\n")
    (row,) = [line for line in rows if line.startswith("| 1 | tool") and "javascript" in line]
    # 5 columns: the URL's "|" and backticks cannot add cells or end the code span
    assert len(re.findall(r"(?<!\\)\|", row)) == 6
    found = re.search(r"(?<!\\)`javascript[^`]*`", row)
    assert found is not None
    span = found.group()
    assert span.startswith("`javascript:alert(1)//http://127.0.0.1:9/beacon?q=%3Cscript%3Ex")
    assert "%7C%60c%60" in span and span.endswith("…`") and len(span) < 400
    assert hostile_url().split("|")[0] not in out  # never raw
    assert "GET\r\n" not in out and "upstream error: &lt;img src=x" in row


def test_ten_thousand_cells_stay_under_one_mib_with_a_note() -> None:
    result = large_run(100, 100)
    out = markdown.render(result)
    size = len(out.encode("utf-8"))
    assert size < SUMMARY_LIMIT_BYTES
    assert size > SUMMARY_LIMIT_BYTES - 64 * 1024  # it used the room
    assert out.count("\n| invariant\\_") == 100  # the whole matrix
    assert out.count("\n| scenario\\_") == 100  # the whole scenarios table
    note = re.search(r"_(\d+) of 5000 failed or errored cells omitted", out)
    assert note is not None
    assert out.count("<details>\n<summary>❌") == 5000 - int(note.group(1))
    assert "`report.html` and `results.json`" in out


def test_a_huge_matrix_is_cut_too() -> None:
    out = markdown.render(large_run(10_000, 1, reply_chars=10), limit_bytes=64 * 1024)
    assert len(out.encode("utf-8")) < 64 * 1024
    assert re.search(r"_\d+ of 10000 matrix rows omitted", out)


def test_two_large_phases_share_the_one_mib() -> None:
    large = large_run(100, 100)
    chaos = dataclasses.replace(large.phases["contract"], phase="chaos", name="chaos")
    out = markdown.render(dataclasses.replace(large, phases={**large.phases, "chaos": chaos}))
    assert len(out.encode("utf-8")) < SUMMARY_LIMIT_BYTES
    contract, _, chaos = out.partition("\n### Chaos: ")
    # both matrices are whole; the details that did not fit are counted
    assert contract.count("\n| invariant\\_") == 100 and chaos.count("\n| invariant\\_") == 100
    assert re.search(r"_\d+ of 5000 failed or errored cells omitted", chaos)
