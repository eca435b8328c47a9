"""Accepted failures (SPEC §14): an accepted critical failure does not fail the gate until its
date, every report says so, and an expired or mistaken entry is said as it is."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fake_judge import FakeJudge
from support.runs import run_of

from flakestorm.cli import main as cli
from flakestorm.config import Accepted
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config
from flakestorm.reporters import comment
from flakestorm.results import acceptance, clock
from flakestorm.results.model import MutationResult, Status, from_document

TODAY = datetime.date(2026, 11, 27)

AGENT = """
def answer(prompt):
    return "no greeting here"
"""

CONFIG = """\
agent:
  type: python
  endpoint: "{module}:answer"
golden_prompts: ["say hello"]
contract:
  name: greetings
  invariants:
    - {{id: says-hello, type: contains, value: hello, severity: critical}}
    - {{id: not-empty, type: output_not_empty, severity: critical}}
  chaos_matrix:
    - name: calm
accepted:
  - cell: "says-hello[calm]"
    reason: "the greeting comes back with the new prompt (FIN-12)"
    until: {until}
    issue: https://example.com/FIN-12
{more}"""


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "today", lambda: TODAY)


def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, until: str, more: str = "") -> Path:
    module = f"acc_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    path = tmp_path / "flakestorm.yaml"
    path.write_text(CONFIG.format(module=module, until=until, more=more), encoding="utf-8")
    return path


def run(path: Path, *args: str) -> tuple[int, str, Path]:
    out = path.parent / "reports"
    done = CliRunner().invoke(
        cli, ["contract", "run", "-c", str(path), "--output", str(out), *args]
    )
    return done.exit_code, done.output, out


def test_an_accepted_critical_failure_passes_the_gate_and_every_report_says_until_when(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, output, out = run(project(tmp_path, monkeypatch, "2026-12-31"))
    assert code == 0, output
    line = (
        "says-hello[calm]: accepted until 2026-12-31 (the greeting comes back with the new "
        "prompt (FIN-12), https://example.com/FIN-12)"
    )
    assert "Verdict: PASS" in output and f"  - {line}" in output
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "Accepted failures (`accepted:`):" in summary and "accepted until 2026-12-31" in summary
    result = from_document(json.loads((out / "results.json").read_text(encoding="utf-8")))
    assert result.overall.passed and result.overall.reasons == ()
    assert result.phases["contract"].score.score == 50.0  # the score still counts it failed
    (judged,) = result.accepted or ()
    assert (judged.state.value, judged.failed) == ("accepted", ("says-hello[calm]",))
    assert "accepted until 2026-12-31" in comment.render_first(result)
    assert "accepted until 2026-12-31" in (out / "report.html").read_text(encoding="utf-8")
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("failures"), suite.get("skipped")) == ("0", "1")
    (case,) = [c for c in suite.iter("testcase") if c.get("name") == "says-hello[calm]"]
    skipped = case.find("skipped")
    assert skipped is not None and case.find("failure") is None
    assert skipped.get("message", "").startswith(
        "accepted until 2026-12-31: the greeting comes back with the new prompt (FIN-12); failed: "
    )


def test_after_its_date_the_acceptance_expires_and_the_gate_fails_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, output, out = run(project(tmp_path, monkeypatch, "2026-11-26"))
    assert code == 1, output
    assert "says-hello[calm] (acceptance expired on 2026-11-26)" in output
    summary = (out / "summary.md").read_text(encoding="utf-8")
    # the gate's reason and the entry's line (markdown escapes the brackets)
    assert "failed: says-hello\\[calm\\] (acceptance expired on 2026-11-26)" in summary
    assert "- says-hello\\[calm\\]: acceptance expired on 2026-11-26 (the greeting" in summary
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"


def test_an_acceptance_of_a_passing_cell_says_remove_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    more = '  - {cell: "not-empty[calm]", reason: "flaky last week", until: 2026-12-01}\n'
    code, output, _ = run(project(tmp_path, monkeypatch, "2026-12-31", more))
    assert code == 0, output
    assert "not-empty[calm]: accepted but passing: remove the entry (flaky last week)" in output


def test_an_entry_naming_no_cell_is_a_located_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    more = '  - {cell: "says-helo[calm]", reason: "typo", until: 2026-12-01}\n'
    path = project(tmp_path, monkeypatch, "2026-12-31", more)
    code, output, out = run(path)
    assert code == 2
    assert (
        f"{path}:17:12: accepted[1].cell: 'says-helo[calm]' is no cell of this contract (a "
        "cell is INVARIANT[SCENARIO], e.g. 'says-hello[calm]'); did you mean "
        "'says-hello[calm]'?"
    ) in output
    assert not out.exists()


def test_validate_says_an_entry_has_expired_or_is_far_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    more = '  - {cell: "not-empty[calm]", reason: "r", until: 2027-06-01}\n'
    path = project(tmp_path, monkeypatch, "2026-01-31", more)
    done = CliRunner().invoke(cli, ["validate", "-c", str(path)])
    assert done.exit_code == 0, done.output
    assert (
        "accepted[0].until: this acceptance expired on 2026-01-31: it accepts nothing any more"
    ) in done.output
    assert "accepted[1].until: 2027-06-01 is more than 90 days ahead" in done.output


def test_a_mutation_type_is_accepted_and_must_be_one_the_config_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = project(tmp_path, monkeypatch, "2026-12-31")
    text = path.read_text(encoding="utf-8").replace(
        "accepted:\n",
        "invariants:\n  - {type: contains, value: hello, severity: critical}\n"
        "mutations: {count: 2, types: [prompt_injection]}\naccepted:\n"
        '  - {mutation: prompt_injection, reason: "model swap", until: 2026-12-20}\n',
    )
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "reports"
    done = CliRunner().invoke(cli, ["ci", "-c", str(path), "--output", str(out)])
    assert done.exit_code == 0, done.output
    assert "mutation: prompt_injection: accepted until 2026-12-20 (model swap)" in done.output
    wrong = text.replace("mutation: prompt_injection,", "mutation: prompt_injektion,")
    path.write_text(wrong, encoding="utf-8")
    done = CliRunner().invoke(cli, ["validate", "-c", str(path)])
    assert done.exit_code == 2
    assert "'prompt_injektion' is not a mutation type this config runs (did you mean" in (
        done.output
    )


def test_the_merge_of_shards_judges_the_acceptances_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = project(tmp_path, monkeypatch, "2026-12-31")
    for k in (1, 2):
        code, output, _ = run(path, "--shard", f"{k}/2", "--output", str(tmp_path / f"s{k}"))
        assert code in (0, 1), output
    merged = tmp_path / "merged"
    shards = [str(tmp_path / f"s{k}" / "results.json") for k in (1, 2)]
    done = CliRunner().invoke(cli, ["merge", *shards, "-o", str(merged)])
    assert done.exit_code == 0, done.output
    result = from_document(json.loads((merged / "results.json").read_text(encoding="utf-8")))
    assert [(a.target, a.state.value) for a in result.accepted or ()] == [
        ("says-hello[calm]", "accepted")
    ]
    monkeypatch.setattr(clock, "today", lambda: datetime.date(2027, 1, 1))
    done = CliRunner().invoke(cli, ["merge", *shards, "-o", str(merged)])
    assert done.exit_code == 1 and "acceptance expired on 2026-12-31" in done.output


def test_an_accepted_cell_that_errored_is_errored_not_accepted_but_passing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = project(tmp_path, monkeypatch, "2026-12-31")
    rubric = 'Greets the user: says "hello"'
    judged = f"    - {{id: greets, type: llm_judge, rubric: '{rubric}', severity: critical}}\n"
    text = path.read_text(encoding="utf-8").replace(
        "  chaos_matrix:\n", judged + "  chaos_matrix:\n"
    )
    text = text.replace('cell: "says-hello[calm]"', 'cell: "greets[calm]"')
    with FakeJudge("refuse") as judge:  # the judge never gives a verdict: the cell errors
        text += f"advanced:\n  judge: {{base_url: '{judge.base_url}', model: judge-1}}\n"
        path.write_text(text, encoding="utf-8")
        code, output, out = run(path)
    assert code == 3, output
    line = (
        "greets[calm]: errored, so not judged: an acceptance covers a failure, not an error "
        "(the greeting comes back with the new prompt (FIN-12), https://example.com/FIN-12)"
    )
    assert f"  - {line}" in output
    assert "accepted but passing" not in output and "Verdict: ERROR" in output
    result = from_document(json.loads((out / "results.json").read_text(encoding="utf-8")))
    (acceptance,) = result.accepted or ()
    assert (acceptance.target, acceptance.state.value) == ("greets[calm]", "errored")
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "greets\\[calm\\]: errored, so not judged" in summary
    assert "accepted but passing" not in summary
    assert "errored, so not judged" in comment.render_first(result)
    assert "accepted but passing" not in (out / "report.html").read_text(encoding="utf-8")


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    return [str(p) for p in raised.value.problems]


@pytest.mark.parametrize(
    ("until", "message"),
    [
        # a number is no date: pydantic read it as seconds since 1970 (2100-01-01)
        ("4102444800", "expected a date written YYYY-MM-DD (e.g. 2026-12-31), got 4102444800"),
        ("20261231", "expected a date written YYYY-MM-DD (e.g. 2026-12-31), got 20261231"),
        ("31.12.2026", "expected a date written YYYY-MM-DD (e.g. 2026-12-31), got '31.12.2026'"),
        ('"12/31/2026"', "expected a date written YYYY-MM-DD (e.g. 2026-12-31), got '12/31/2026'"),
        (
            "2026-12-31T00:00:00",
            "expected a date written YYYY-MM-DD (e.g. 2026-12-31), got 2026-12-31T00:00:00 (a "
            "time, not a day)",
        ),
        (
            '"2026-02-30"',
            "'2026-02-30' is no day of the calendar: expected a date written YYYY-MM-DD (e.g. "
            "2026-12-31)",
        ),
    ],
)
def test_until_is_a_yyyy_mm_dd_date_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, until: str, message: str
) -> None:
    path = project(tmp_path, monkeypatch, until)
    assert problems_of(path) == [f"{path}:15:12: accepted[0].until: {message}"]


@pytest.mark.parametrize("until", ["2026-12-31", '"2026-12-31"'])
def test_until_is_read_written_plain_or_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, until: str
) -> None:
    (entry,) = load_config(project(tmp_path, monkeypatch, until)).config.accepted
    assert entry.until == datetime.date(2026, 12, 31)


def test_a_blank_reason_is_a_located_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    more = '  - {cell: "not-empty[calm]", reason: "  ", until: 2026-12-01}\n'
    path = project(tmp_path, monkeypatch, "2026-12-31", more)
    assert problems_of(path) == [
        f"{path}:17:39: accepted[1].reason: must not be blank: say why the failure is accepted"
    ]


def test_two_entries_for_one_cell_are_a_config_error_naming_both_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one open, one expired: which one the run goes by is no choice to leave to it
    more = '  - {cell: "says-hello[calm]", reason: "old", until: 2026-01-01}\n'
    path = project(tmp_path, monkeypatch, "2026-12-31", more)
    assert problems_of(path) == [
        f"{path}:17:12: accepted[1].cell: 'says-hello[calm]' is accepted twice: here and at "
        "accepted[0].cell (line 13); keep one entry for it"
    ]
    code, output, out = run(path)
    assert code == 2, output
    assert "'says-hello[calm]' is accepted twice" in output and not out.exists()


@pytest.mark.parametrize(
    ("statuses", "state"),
    [
        (["errored"], "errored"),
        (["passed", "errored"], "errored"),  # one errored: not known to pass
        (["failed", "errored"], "accepted"),  # the failure is accepted; the error stays one
        (["passed"], "passing"),
        (["not_run"], "absent"),  # an interrupted run did not see it pass
        (["skipped"], "absent"),
    ],
)
def test_an_entry_is_passing_only_when_its_items_passed(statuses: list[str], state: str) -> None:
    run = run_of({"mutation": []})
    mutations = tuple(
        MutationResult(
            index=i,
            id=f"paraphrase#0.{i}",
            type="paraphrase",
            transform="template_1",
            generator="template",
            weight=1.0,
            original="o",
            sent="m",
            request=None,
            changes=(),
            status=Status(status),
            reason="",
        )
        for i, status in enumerate(statuses)
    )
    outcome = dataclasses.replace(run.phases["mutation"], mutations=mutations)
    entry = Accepted(mutation="paraphrase", reason="r", until=datetime.date(2026, 12, 31))
    (judged,) = acceptance.judge([entry], {"mutation": outcome}, TODAY)
    assert judged.state.value == state
