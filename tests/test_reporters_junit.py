"""JUnit XML: structure viewers rely on, failures vs errors vs skipped, and XML-safe output."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from golden.cases import chaos_only, failing, hostile, large_run, passing
from hypothesis import given, settings
from hypothesis import strategies as st

from flakestorm.reporters import junit
from flakestorm.results.model import Status

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode("utf-8"))


def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_one_suite_per_phase_one_case_per_cell() -> None:
    root = _parse(junit.render(failing()))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.attrib["name"] for s in suites] == ["support-agent", "chaos"]
    suite = suites[0]
    assert (suite.attrib["tests"], suite.attrib["failures"], suite.attrib["errors"]) == (
        "9",
        "2",
        "1",
    )
    assert suite.attrib["skipped"] == "3"
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == (
        "11",
        "3",
        "1",
    )
    cases = _cases(suite)
    assert len(cases) == 9
    assert all(c.attrib["classname"] == "support-agent" for c in cases.values())
    assert cases["mentions_refund[tool_outage]"].attrib["line"] == "12"
    assert cases["mentions_refund[tool_outage]"].attrib["file"] == "flakestorm.yaml"
    chaos = _cases(suites[1])
    assert sorted(chaos) == ["completes[chaos]", "output-not-empty[chaos]"]
    assert all(c.attrib["classname"] == "chaos" for c in chaos.values())
    assert chaos["completes[chaos]"].find("failure") is not None


def test_outcomes_map_to_failure_error_and_skipped() -> None:
    cases = _cases(_parse(junit.render(failing())))
    failure = cases["mentions_refund[tool_outage]"].find("failure")
    assert failure is not None
    # the message ends with what the cell spent: 2 LLM calls, 3 to the tool, every one faulted
    assert failure.attrib["message"] == (
        "failed for 2 of 2 prompts: 'refund' not found in the output (calls: llm 2, "
        "orders_api 3 (3 faulted); tokens 700 in / 120 out; $0.00018)"
    )
    assert failure.text is not None
    assert "prompt (run 1): How do I get a refund?" in failure.text
    assert "I'm sorry, the orders service is unavailable right now." in failure.text
    assert (
        "faults fired: tool_faults[0] error(503) on orders_api, tool_faults[1] slow(2000 ms) on "
        "orders_api"
    ) in failure.text
    assert "\n\ncalls through flakestorm: 5\n1. llm POST " in failure.text
    assert (
        "\n3. tool orders_api GET http://127.0.0.1:8080/tools/orders_api/orders/42 -> 502 "
        "(2003 ms); fired: tool_faults[1] slow(2000 ms) on orders_api; upstream error: "
        "connection refused: orders.internal:443\n"
    ) in failure.text
    assert failure.text.endswith(
        "5. tool orders_api GET http://127.0.0.1:8080/tools/orders_api/orders/43 -> no reply "
        "(30000 ms); fired: tool_faults[0] error(503) on orders_api"
    )
    error = cases["no_injection[tool_outage]"].find("error")
    assert error is not None and error.attrib["message"].startswith("reset failed")
    assert cases["no_injection[tool_outage]"].find("failure") is None
    not_run = cases["mentions_refund[poisoned_memory]"].find("skipped")
    assert not_run is not None and not_run.attrib["message"].startswith("not run:")
    skipped = cases["quick[tool_outage]"].find("skipped")
    assert skipped is not None and "no_chaos" in skipped.attrib["message"]
    passed = cases["mentions_refund[baseline]"]
    assert [child.tag for child in passed] == ["system-out"]


def test_time_is_the_sum_of_latencies_and_severity_is_in_system_out() -> None:
    cases = _cases(_parse(junit.render(failing())))
    case = cases["mentions_refund[tool_outage]"]
    assert float(case.attrib["time"]) == 32.1
    out = case.find("system-out")
    assert out is not None and out.text is not None
    assert out.text.startswith("severity: critical\nstatus: failed\n")
    flaky = cases["no_injection[baseline]"].find("system-out")
    assert flaky is not None and "runs passed: 2 of 3 (flaky)" in (flaky.text or "")


def _properties(suite: ET.Element) -> dict[str, str]:
    return {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}


def test_suite_properties_carry_score_seed_and_digest() -> None:
    contract, chaos = (_properties(s) for s in _parse(junit.render(failing())).iter("testsuite"))
    assert contract["phase"] == "contract"
    assert contract["score"] == "46.15"
    assert contract["seed"] == "1234"
    assert contract["config_digest"].startswith("9f2c1e7a")
    assert contract["passed"] == "false"
    assert contract["overall_score"] == "48.08"
    assert contract["stop_reason"] == "max_invocations"
    assert contract["serial_scenarios"] == "tool_outage"
    assert "prompts" not in contract and "undelivered_faults" not in contract
    assert (chaos["phase"], chaos["score"], chaos["passed"]) == ("chaos", "50.00", "true")
    assert (chaos["prompts"], chaos["prompts_passed"]) == ("2", "1")
    passing_props = _properties(_parse(junit.render(passing())))
    assert not {"stop_reason", "serial_scenarios", "undelivered_faults"} & set(passing_props)


def test_undelivered_faults_are_a_suite_property_and_errored_cases() -> None:
    root = _parse(junit.render(chaos_only()))
    (suite,) = root.findall("testsuite")
    assert suite.attrib["name"] == "chaos"
    assert (suite.attrib["errors"], suite.attrib["failures"]) == ("2", "0")
    props = _properties(suite)
    assert props["undelivered_faults"] == "chaos: tool_faults[0] error(503) on flight_search"
    for case in suite.iter("testcase"):
        error = case.find("error")
        assert error is not None
        assert error.attrib["message"].startswith(
            "fault not delivered: tool_faults[0] error(503) on flight_search: the agent made no "
            "call to `flight_search` through flakestorm"
        )
        assert "calls through flakestorm: 2" in (error.text or "")


def test_hostile_output_parses_and_stays_text() -> None:
    text = junit.render(hostile())
    assert _XML_ILLEGAL.search(text) is None
    root = _parse(text)
    assert root.find(".//script") is None and root.find(".//img") is None
    cases = _cases(root)
    name = "inj<script>x</script>|`*_@user_#9[scn</th><script>alert(1)</script>]"
    failure = cases[name].find("failure")
    assert failure is not None and failure.text is not None
    assert "<script>document.title='pwned'</script>" in failure.text  # as text
    assert "]]><![CDATA[" in failure.text
    assert "\u202e" not in text and "⟨U+202E⟩" in failure.text
    assert "::error" not in text
    assert "1. tool\ufffd[31m x</td><script>document.title='pwned'</script>|`y` GET" in failure.text
    assert "javascript:alert(1)//http://127.0.0.1:9/beacon?q=<script>x</script>" in failure.text
    props = _properties(root)
    assert props["undelivered_faults"] == (
        "dead|`x`</th><img src=x>: tool_faults[0] error(503) on ev`il</td>@org|x"
    )
    assert len(text) < 50_000  # the 2 MiB reply is an excerpt


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(codec=None, exclude_categories=())),
    st.text(),
    st.text(alphabet=st.characters(codec=None, exclude_categories=())),
)
def test_any_agent_output_yields_parseable_xml(output: str, reason: str, url: str) -> None:
    import dataclasses

    base = failing()
    assert "contract" in base.phases
    cells = list(base.phases["contract"].cells)
    cell = cells[1]
    prompt = dataclasses.replace(cell.prompts[0], output=output, prompt=reason)
    call = dataclasses.replace(cell.calls[0], url=url, upstream_error=output, tool=reason)
    cells[1] = dataclasses.replace(
        cell, reason=reason, prompts=(prompt,), invariant_id=reason, calls=(call,)
    )
    contract = dataclasses.replace(base.phases["contract"], cells=tuple(cells), name=reason or "c")
    scenarios = tuple(dataclasses.replace(s, undelivered=(url,)) for s in contract.scenarios)
    contract = dataclasses.replace(contract, scenarios=scenarios)
    text = junit.render(dataclasses.replace(base, phases={**base.phases, "contract": contract}))
    root = _parse(text)
    assert len(list(root.iter("testcase"))) == 11


def test_a_run_without_a_contract_is_an_empty_report() -> None:
    import dataclasses

    root = _parse(junit.render(dataclasses.replace(passing(), phases={})))
    assert root.tag == "testsuites" and root.findall("testsuite") == []


def test_ten_thousand_cells() -> None:
    root = _parse(junit.render(large_run(100, 100, reply_chars=50)))
    cases = list(root.iter("testcase"))
    assert len(cases) == 10_000
    assert sum(1 for c in cases if c.find("failure") is not None) == 5_000
    assert Status.FAILED.value in (cases[1].find("system-out").text or "")  # type: ignore[union-attr]


@pytest.mark.parametrize("outcome", ["failure", "error", "skipped", "passed"])
def test_a_case_made_alone_is_the_element_junit_xml_makes_in_a_suite(outcome: str) -> None:
    from junit_xml import TestCase, TestSuite

    from flakestorm.reporters.junit import _case_xml

    case = TestCase(
        "inv[calm]",
        classname="contract.inv",
        elapsed_sec=0.25,
        stdout='out <&> "q"\n',
        stderr="err",
        assertions=3,
        timestamp="2026-01-01T00:00:00",
        status="ran",
        category="c",
        file="flakestorm.yaml",
        line=7,
        log="log",
        url="http://127.0.0.1/x",
    )
    if outcome == "failure":
        message = 'failed: "no" \x1b\n\tline\r & <b>'  # every character an attribute escapes
        case.add_failure_info(message=message, output="details <&>", failure_type="kind")
    elif outcome == "error":
        case.add_error_info(message="errored", output="details")
    elif outcome == "skipped":
        case.add_skipped_info(message="skipped: when", output="because")
    in_suite = TestSuite("", [case]).build_xml_doc().find("testcase")
    assert in_suite is not None
    ET.indent(in_suite, space="\t", level=2)  # as it stands in the document
    assert _case_xml(case) == ET.tostring(in_suite, "unicode")
