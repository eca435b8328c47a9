"""The verdict line matches the exit code in every report (SPEC §8): PASS (0), FAIL (1), ERROR
(3, with the cause named). A run that exits 3 never prints PASS.

The exit-3 paths are run for real: a fault no call reached, a reset that fails (harness errors,
errored cells), an interrupted run — each rendered in every format, its gate passing or not —
and the errors raised before there is a result (the agent never ready, a proxy.url that is not a
chaos proxy), through the CLI and the action.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import threading
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from golden.cases import passing
from support.runs import run_of
from support.server import LoopbackServer, Response
from test_entrypoint import SECRET, Agent, _env, _outputs, entrypoint

from flakestorm.baseline.delta import FailOn, compare
from flakestorm.cli import main as cli
from flakestorm.engine.events import CellFinished, Event
from flakestorm.engine.runner import run_phases
from flakestorm.github.client import GitHub
from flakestorm.loader import load_config
from flakestorm.reporters import comment, html, junit, markdown, terminal
from flakestorm.reporters.view import INTERRUPTED_CAUSE, RunVerdict, run_verdict, step_verdict
from flakestorm.results.model import RunResult, Status, from_document, to_document

PASS = re.compile(r"\bPASS\b")

AGENT = """
import {tools}


def answer(prompt):
    return f"The quote is {{{tools}.get_quote('AAPL')}}"
"""
TOOLS = """
def get_quote(ticker):
    return "123.45"


def never_called(ticker):
    return "unused"


def failing_reset():
    raise RuntimeError("the reset service is down")
"""


def project(tmp_path: Path, scenarios: list[dict[str, Any]], **agent: Any) -> Path:
    """A python agent that always calls ``get_quote`` (and never ``never_called``)."""
    suffix = uuid.uuid4().hex[:10]
    agent_mod, tools_mod = f"vl_agent_{suffix}", f"vl_tools_{suffix}"
    (tmp_path / f"{agent_mod}.py").write_text(AGENT.format(tools=tools_mod))
    (tmp_path / f"{tools_mod}.py").write_text(TOOLS)
    if agent.get("reset_function") == "TOOLS":
        agent["reset_function"] = f"{tools_mod}:failing_reset"
    doc = {
        "agent": {
            "type": "python",
            "endpoint": f"{agent_mod}:answer",
            "tools": [f"{tools_mod}:get_quote", f"{tools_mod}:never_called"],
            **agent,
        },
        "golden_prompts": ["price of AAPL?", "quote AAPL"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "answers", "type": "output_not_empty", "severity": "low"}],
            "chaos_matrix": scenarios,
        },
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    return path


def renders(result: RunResult) -> dict[str, str]:
    """Every report that states a verdict (and JUnit, which must not invent one)."""
    return {
        "terminal": terminal.render(result),
        "summary": markdown.render(result),
        "comment": comment.render_first(result),
        # the page without its stylesheet (which styles every verdict, `.verdict.PASS` too)
        "html": re.sub(r"<style>.*?</style>", "", html.render(result), flags=re.S),
        "junit": junit.render(result),
    }


def assert_error_everywhere(result: RunResult, cause: str) -> None:
    assert result.exit_code == 3
    shown = run_verdict(result)
    assert shown.word == "ERROR" and shown.code == 3
    assert any(cause in c for c in shown.causes), shown.causes
    # a results.json read back gives the same verdict
    assert run_verdict(from_document(json.loads(json.dumps(to_document(result))))) == shown
    for name, text in renders(result).items():
        assert not PASS.search(text), f"{name} prints PASS for an exit-3 run"
        if name == "junit":
            continue
        assert "ERROR" in text, name
        assert "exit 3" in text.lower(), name
    lines = terminal.render(result).splitlines()
    verdict = next(line for line in lines if line.startswith("Verdict: "))
    assert verdict.startswith("Verdict: ERROR (exit 3: ") and cause in verdict
    assert markdown.render(result).startswith("## flakestorm: 💥 ERROR\n")
    assert "### flakestorm: 💥 ERROR · score" in comment.render_first(result)
    page = html.render(result)
    assert '<span class="verdict ERROR" id="verdict">ERROR</span>' in page
    assert "<title>flakestorm report: ERROR" in page


def passed_gate(result: RunResult) -> RunResult:
    """``result`` with its gate passed: the exit code alone must decide the verdict."""
    overall = dataclasses.replace(result.overall, passed=True, reasons=())
    return dataclasses.replace(result, overall=overall)


# --------------------------------------------------------------------------- runs that exit 3


def test_a_fault_not_delivered_is_an_error_not_a_pass(tmp_path: Path) -> None:
    path = project(
        tmp_path, [{"name": "unused", "tool_faults": [{"tool": "never_called", "mode": "error"}]}]
    )
    result = run_phases(load_config(path), ["contract"])
    (scenario,) = result.phases["contract"].scenarios
    assert scenario.undelivered == ("tool_faults[0] error(503) on never_called",)
    # the hint says what the wrappers saw instead
    assert scenario.hint(scenario.undelivered[0]).startswith(
        "flakestorm saw 2 calls (2 to tool `get_quote`), none to `never_called` — the agent made "
        "no call to the wrapped tool `never_called`"
    )
    assert result.overall.passed  # the gate alone would say PASS
    assert_error_everywhere(result, "1 fault not delivered (in 1 scenario")


def test_harness_errors_errored_cells_are_an_error_not_a_pass(tmp_path: Path) -> None:
    path = project(tmp_path, [{"name": "calm"}], reset_function="TOOLS")
    result = run_phases(load_config(path), ["contract"])
    cell = result.phases["contract"].cells[0]
    assert cell.status is Status.ERRORED
    assert result.overall.passed
    assert_error_everywhere(result, "1 cell errored: ")
    assert "the reset service is down" in " ".join(run_verdict(result).causes)


def test_an_interrupted_run_is_an_error_not_a_pass(tmp_path: Path) -> None:
    path = project(tmp_path, [{"name": "calm"}, {"name": "again"}, {"name": "third"}])
    stop = threading.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, CellFinished):
            stop.set()

    result = run_phases(load_config(path), ["contract"], stop=stop, on_event=on_event)
    assert result.stop_reason == "interrupted"
    assert_error_everywhere(result, INTERRUPTED_CAUSE)
    assert_error_everywhere(passed_gate(result), INTERRUPTED_CAUSE)


def test_pass_and_fail_follow_the_exit_code() -> None:
    good = passing()
    assert run_verdict(good).word == "PASS" and "Verdict: PASS\n" in terminal.render(good)
    failed = dataclasses.replace(
        good,
        exit_code=1,
        overall=dataclasses.replace(good.overall, passed=False, reasons=("score below",)),
    )
    assert run_verdict(failed).word == "FAIL"
    for name, text in renders(failed).items():
        assert not PASS.search(text) and "ERROR" not in text, name


# --------------------------------------------------------------------------- errors before a result

NOT_READY = {
    "agent": {"endpoint": "URL", "ready_timeout": 300},
    "golden_prompts": ["hi"],
    "contract": {
        "name": "c",
        "invariants": [{"id": "i", "type": "output_not_empty"}],
        "chaos_matrix": [{"name": "calm"}],
    },
}


def _dead_url() -> str:
    with LoopbackServer() as gone:
        return gone.url_for("/chat")


def test_the_cli_prints_an_error_verdict_when_the_agent_never_becomes_ready(
    tmp_path: Path,
) -> None:
    doc = json.loads(json.dumps(NOT_READY).replace("URL", _dead_url()))
    (tmp_path / "flakestorm.yaml").write_text(json.dumps(doc))
    done = CliRunner().invoke(
        cli, ["contract", "run", "-c", str(tmp_path / "flakestorm.yaml"), "--output", str(tmp_path)]
    )
    assert done.exit_code == 3, done.output
    assert not PASS.search(done.output)
    assert "Verdict: ERROR (exit 3: 1 cell errored: not sent: the agent never became ready)" in (
        done.output
    )
    assert done.output.count("the agent was not ready after") == 1  # the detail, once


def test_the_cli_prints_an_error_verdict_when_proxy_url_is_not_a_chaos_proxy(
    tmp_path: Path,
) -> None:
    with (
        LoopbackServer(lambda request: Response.json({"output": "hi"})) as agent,
        LoopbackServer(lambda request: Response(status=404, body=b"nope")) as other,
    ):
        doc = json.loads(json.dumps(NOT_READY).replace("URL", agent.url_for("/chat")))
        doc["proxy"] = {"url": other.url + "/${PROXY_KEY}"}  # a secret the error quotes
        doc["contract"]["chaos_matrix"] = [
            {"name": "down", "tool_faults": [{"tool": "t", "mode": "error"}]}
        ]
        (tmp_path / "flakestorm.yaml").write_text(json.dumps(doc))
        done = CliRunner().invoke(
            cli,
            ["contract", "run", "-c", str(tmp_path / "flakestorm.yaml"), "--output", str(tmp_path)],
            env={"PROXY_KEY": SECRET},
        )
    assert done.exit_code == 3, done.output
    assert not PASS.search(done.output)
    assert "Verdict: ERROR (exit 3: 1 cell errored: not sent: the chaos proxy is unreachable)" in (
        done.output
    )
    assert "/***" in done.output and SECRET not in done.output


def test_the_action_summarises_an_agent_that_never_became_ready_as_an_error(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    doc = json.loads(json.dumps(NOT_READY).replace("URL", "${AGENT_URL}"))
    (workspace / "flakestorm.yaml").write_text(json.dumps(doc))
    gone = Agent()
    with gone.server:
        env = _env(workspace, gone)
    # the agent stopped: its URL never answers
    out = io.StringIO()
    code = entrypoint.main(env, GitHub(env, out=out))
    log = out.getvalue()
    assert code == 3, log
    assert _outputs(env)["passed"] == "false"
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert summary.startswith("## flakestorm: 💥 ERROR\n")
    # the cause once, with how many cells it touched; the detail among the warnings
    cause = "1 cell errored: not sent: the agent never became ready"
    assert f"**Exit 3: flakestorm could not carry the run out:** {cause}" in summary
    assert "the agent was not ready after" in summary
    assert f"flakestorm: ERROR (exit 3: {cause})" in log
    assert not PASS.search(summary) and not PASS.search(log)


def test_the_action_reports_an_exit_3_run_as_an_error_in_the_log_summary_and_annotations(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    doc = json.loads(json.dumps(NOT_READY).replace("URL", "${AGENT_URL}"))
    doc["contract"]["chaos_matrix"] = [
        {"name": "calm"},
        {"name": "down", "tool_faults": [{"tool": "search", "mode": "error"}]},
    ]
    doc["proxy"] = {"tools": {"search": "http://127.0.0.1:9"}}  # the agent never calls it
    (workspace / "flakestorm.yaml").write_text(json.dumps(doc))
    agent = Agent()
    with agent.server:
        env = _env(workspace, agent)
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
    log = out.getvalue()
    assert code == 3, log
    assert _outputs(env)["passed"] == "false"
    assert "flakestorm: ERROR (exit 3: 1 fault not delivered (in 1 scenario" in log
    assert "::error title=flakestorm%3A ERROR::exit 3: 1 fault not delivered" in log
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert summary.startswith("## flakestorm: 💥 ERROR\n")
    assert not PASS.search(summary) and not PASS.search(log)


def test_the_summary_of_an_error_before_a_result_never_shows_a_secret(tmp_path: Path) -> None:
    """``::add-mask::`` hides secrets in the log, not in the job summary."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    doc = json.loads(json.dumps(NOT_READY).replace("URL", "${AGENT_URL}"))
    doc["proxy"] = {"url": _dead_url().replace("/chat", "/${AGENT_TOKEN}")}
    (workspace / "flakestorm.yaml").write_text(json.dumps(doc))
    agent = Agent()
    with agent.server:
        env = _env(workspace, agent)
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
    assert code == 3, out.getvalue()
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "not sent: the chaos proxy is unreachable" in summary
    assert "/\\*\\*\\*" in summary and SECRET not in summary  # markdown-escaped ***


# --------------------------------------------------------------------------- fail-on: regression

KNOWN = run_of({"contract": ["a[x]=failed", "b[x]=passed"]})
"""A run whose own gate fails on a known failure (``a[x]`` fails on the baseline too)."""


def _headings(result: RunResult, shown: RunVerdict) -> dict[str, str]:
    """The verdict heading of every report that states the step's verdict."""
    summary = markdown.render(result, shown=shown).splitlines()[0]
    body = comment.render(result, None, "k", shown=shown).splitlines()
    (heading,) = [line for line in body if line.startswith("### flakestorm: ")]
    return {
        "summary": summary.removeprefix("## flakestorm: "),
        "comment": heading.removeprefix("### flakestorm: ").partition(" · score")[0],
        "terminal": terminal.verdict_line(result, shown).removeprefix("Verdict: "),
    }


def test_only_known_failures_pass_under_fail_on_regression_with_the_own_gate_beside() -> None:
    shown = step_verdict(KNOWN, FailOn.REGRESSION, compare(KNOWN, KNOWN), "main @ abc1234")
    assert KNOWN.exit_code == 1 and shown.code == 0 and shown.word == "PASS"
    note = " — fail-on: regression: no new failures vs main @ abc1234 (the run's own gate: FAIL, "
    note += "1 known failure)"
    assert _headings(KNOWN, shown) == {
        "summary": "✅ PASS" + note,
        "comment": "✅ PASS" + note,
        "terminal": "PASS" + note,
    }
    # why the run's own gate failed, as such
    assert "\nThe run's own gate failed:\n- a cell failed\n" in markdown.render(KNOWN, shown=shown)
    # the run's own verdict is unchanged (results.json, `flakestorm report`)
    assert run_verdict(KNOWN).word == "FAIL"
    assert markdown.render(KNOWN).startswith("## flakestorm: ❌ FAIL\n")
    assert "\nThe gate failed:\n" in markdown.render(KNOWN)


def test_a_new_failure_fails_under_fail_on_regression() -> None:
    broke = run_of({"contract": ["a[x]=failed", "b[x]=failed"]})
    shown = step_verdict(broke, FailOn.REGRESSION, compare(KNOWN, broke), "main @ abc1234")
    assert shown.code == 1
    # the run's own gate says FAIL too: not repeated
    assert set(_headings(broke, shown).values()) == {
        "❌ FAIL — fail-on: regression: 1 new failure vs main @ abc1234",
        "FAIL — fail-on: regression: 1 new failure vs main @ abc1234",
    }
    # a new failure the run's own gate lets pass (a low cell, the score above min_score)
    low = run_of({"contract": ["a[x]=passed", "b[x]=failed"]}, exit_code=0)
    base = run_of({"contract": ["a[x]=passed", "b[x]=passed"]})
    shown = step_verdict(low, FailOn.REGRESSION, compare(base, low), "main @ abc1234")
    assert shown.code == 1
    assert _headings(low, shown)["summary"] == (
        "❌ FAIL — fail-on: regression: 1 new failure vs main @ abc1234 (the run's own gate: PASS)"
    )


def test_what_fail_on_regression_did_not_count_is_named() -> None:
    base = run_of({"contract": ["a[x]=failed", "b[x]=passed 5/5", "c[x]=passed"]})
    head = run_of({"contract": ["a[x]=failed", "b[x]=failed 4/5", "c[x]=passed", "d[x]=failed"]})
    shown = step_verdict(head, FailOn.REGRESSION, compare(base, head), "main")
    assert _headings(head, shown)["terminal"] == (
        "PASS — fail-on: regression: no new failures vs main (the run's own gate: FAIL, "
        "1 known failure, 1 within noise, 1 failing new cell)"
    )


def test_no_baseline_under_fail_on_regression_passes_and_says_why() -> None:
    shown = step_verdict(KNOWN, FailOn.REGRESSION, None)
    assert shown.code == 0
    assert _headings(KNOWN, shown)["summary"] == (
        "✅ PASS — fail-on: regression: no baseline compared, so no failure is known to be new "
        "(the run's own gate: FAIL)"
    )


def test_an_error_stays_an_error_whatever_fail_on_says() -> None:
    errored = run_of({"contract": ["a[x]=errored", "b[x]=passed"]}, exit_code=3)
    passing_base = run_of({"contract": ["a[x]=errored", "b[x]=passed"]}, exit_code=0)
    for delta in (compare(passing_base, errored), None):
        shown = step_verdict(errored, FailOn.REGRESSION, delta, "main")
        assert shown.code == 3 and shown.error and shown.rule is None
        assert any("1 cell errored" in cause for cause in shown.causes)
        headings = _headings(errored, shown)
        assert headings["summary"] == headings["comment"] == "💥 ERROR"
        assert headings["terminal"].startswith("ERROR (exit 3: 1 cell errored: ")
        assert not any(PASS.search(text) for text in headings.values())


def test_the_baseline_name_in_a_heading_is_escaped() -> None:
    shown = step_verdict(KNOWN, FailOn.REGRESSION, compare(KNOWN, KNOWN), "<b>x</b> ::error::")
    headings = _headings(KNOWN, shown)
    assert "<b>" not in headings["summary"] and "&lt;b&gt;" in headings["summary"]
    assert "::error::" not in headings["terminal"]


def test_a_phase_is_never_passed_when_the_run_did_not_finish_or_judge_it() -> None:
    from flakestorm.reporters.view import phase_state
    from flakestorm.results.model import CellResult, PhaseOutcome
    from flakestorm.results.scoring import score_cells

    def contract(*statuses: Status) -> PhaseOutcome:
        cells = tuple(
            CellResult(
                index=i,
                invariant_id=f"i{i}",
                scenario="s",
                severity="medium",
                status=status,
                reason="",
            )
            for i, status in enumerate(statuses)
        )
        return PhaseOutcome("contract", "c", (), (), cells, score_cells(cells))

    p, f, e, n = Status.PASSED, Status.FAILED, Status.ERRORED, Status.NOT_RUN
    assert phase_state(contract(p, p)) == "passed"
    assert phase_state(contract(p, n, n)) == "incomplete: 2 cells not run"
    assert phase_state(contract(f, n)) == "incomplete: 1 cell not run"
    assert phase_state(contract(n, n)) == "no verdict: no cell ran to one"
    assert phase_state(contract(e, n)) == "no verdict: no cell ran to one"
