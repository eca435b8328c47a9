"""JUnit XML: structure viewers rely on, failures vs errors vs skipped, and XML-safe output."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from golden.cases import failing, hostile, large_run, passing
from hypothesis import given, settings
from hypothesis import strategies as st

from flakestorm.reporters import junit
from flakestorm.results import Status

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode("utf-8"))


def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_one_suite_per_phase_one_case_per_cell() -> None:
    root = _parse(junit.render(failing()))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.attrib["name"] for s in suites] == ["support-agent"]
    suite = suites[0]
    assert (suite.attrib["tests"], suite.attrib["failures"], suite.attrib["errors"]) == (
        "9",
        "2",
        "1",
    )
    assert suite.attrib["skipped"] == "3"
    cases = _cases(root)
    assert len(cases) == 9
    assert all(c.attrib["classname"] == "support-agent" for c in cases.values())
    assert cases["mentions_refund[tool_outage]"].attrib["line"] == "12"
    assert cases["mentions_refund[tool_outage]"].attrib["file"] == "flakestorm.yaml"


def test_outcomes_map_to_failure_error_and_skipped() -> None:
    cases = _cases(_parse(junit.render(failing())))
    failure = cases["mentions_refund[tool_outage]"].find("failure")
    assert failure is not None
    assert failure.attrib["message"] == (
        "failed for 2 of 2 prompts: 'refund' not found in the output"
    )
    assert failure.text is not None
    assert "prompt (run 1): How do I get a refund?" in failure.text
    assert "I'm sorry, the orders service is unavailable right now." in failure.text
    assert "faults fired: tool_error(orders_api, 503), slow(orders_api, 2000 ms)" in failure.text
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


def test_suite_properties_carry_score_seed_and_digest() -> None:
    root = _parse(junit.render(failing()))
    props = {p.attrib["name"]: p.attrib["value"] for p in root.iter("property")}
    assert props["score"] == "40.00"
    assert props["seed"] == "1234"
    assert props["config_digest"].startswith("9f2c1e7a")
    assert props["passed"] == "false"
    assert props["stop_reason"] == "max_invocations"
    assert "stop_reason" not in {
        p.attrib["name"] for p in _parse(junit.render(passing())).iter("property")
    }


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
    assert len(text) < 50_000  # the 2 MiB reply is an excerpt


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())), st.text())
def test_any_agent_output_yields_parseable_xml(output: str, reason: str) -> None:
    import dataclasses

    base = failing()
    assert base.contract is not None
    cells = list(base.contract.cells)
    cell = cells[1]
    prompt = dataclasses.replace(cell.prompts[0], output=output, prompt=reason)
    cells[1] = dataclasses.replace(cell, reason=reason, prompts=(prompt,), invariant_id=reason)
    contract = dataclasses.replace(base.contract, cells=tuple(cells), name=reason or "c")
    text = junit.render(dataclasses.replace(base, contract=contract))
    root = _parse(text)
    assert len(list(root.iter("testcase"))) == 9


def test_a_run_without_a_contract_is_an_empty_report() -> None:
    import dataclasses

    root = _parse(junit.render(dataclasses.replace(passing(), contract=None)))
    assert root.tag == "testsuites" and root.findall("testsuite") == []


def test_ten_thousand_cells() -> None:
    root = _parse(junit.render(large_run(100, 100, reply_chars=50)))
    cases = list(root.iter("testcase"))
    assert len(cases) == 10_000
    assert sum(1 for c in cases if c.find("failure") is not None) == 5_000
    assert Status.FAILED.value in (cases[1].find("system-out").text or "")  # type: ignore[union-attr]
