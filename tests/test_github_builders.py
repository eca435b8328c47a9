"""The action's GitHub concerns as pure builders (``flakestorm/github/``): results and settings in,
the data the step writes out (outputs, the comment's body, notices, log lines) — no GitHub.

The action end to end (``entrypoint.main``) is tested in test_entrypoint.py and the baseline
tests; these pin the builders' own values."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from support.runs import run_of

from flakestorm.baseline.delta import FailOn, compare
from flakestorm.baseline.judgement import Judgement
from flakestorm.errors import Problem
from flakestorm.github.annotations import config_annotations
from flakestorm.github.baseline_step import judge_step, no_baseline
from flakestorm.github.notes import Annotation, Level, Note
from flakestorm.github.outputs import failed_outputs, outputs_of
from flakestorm.github.pr_comment import COMMENT_LIMIT, Comment, marked, sticky_body
from flakestorm.github.progress import run_title
from flakestorm.github.settings import BaselineFile, BaselineMode, Command, Settings
from flakestorm.github.step import Step
from flakestorm.github.verdict import cancelling
from flakestorm.reporters.delta import compared_of
from flakestorm.reporters.view import run_verdict
from flakestorm.results.shards import Shard

BASE = run_of({"contract": ["a[calm]=passed", "b[calm]=failed"]})
HEAD = run_of({"contract": ["a[calm]=failed", "b[calm]=passed"]})


def test_outputs_in_action_yml_order_and_unset_without_a_baseline() -> None:
    outputs = outputs_of(HEAD, run_verdict(HEAD), None, "flakestorm-reports")
    assert list(outputs.items()) == [
        ("score", "50.00"),
        ("passed", "false"),
        ("contract-score", "50.00"),
        ("critical-failures", "0"),
        ("report-dir", "flakestorm-reports"),
    ]


def test_outputs_count_new_failures_and_fixed_against_the_baseline() -> None:
    judged = Judgement(FailOn.ANY, delta=compare(BASE, HEAD), against="main @ abc1234")
    outputs = outputs_of(HEAD, run_verdict(HEAD), compared_of(judged), "out")
    assert dict(outputs.items())["new-failures"] == "1"  # a: passed -> failed
    assert dict(outputs.items())["fixed"] == "1"  # b: failed -> passed


def test_an_error_before_a_result_sets_passed_false_and_the_report_dir_only() -> None:
    assert list(failed_outputs("r").items()) == [("passed", "false"), ("report-dir", "r")]


def test_the_marked_comment_is_the_first_whose_body_holds_the_marker() -> None:
    page = [
        {"id": 1, "body": "no marker here"},
        "not a comment",
        {"id": "2", "body": "<!-- M -->"},  # an id that is no number
        {"id": 3, "body": "before <!-- M --> after"},
        {"id": 4, "body": "<!-- M -->"},
    ]
    assert marked(page, "<!-- M -->") == Comment(3, "before <!-- M --> after")
    assert marked(page[:3], "<!-- M -->") is None


def test_a_body_gets_its_marker_and_is_cut_to_the_limit_with_the_marker_last() -> None:
    assert sticky_body("score 83", "<!-- M -->") == "<!-- M -->\nscore 83"
    cut = sticky_body("<!-- M -->\n" + "x" * COMMENT_LIMIT, "<!-- M -->")
    assert len(cut) == COMMENT_LIMIT
    assert cut.endswith("x…\n<!-- M -->")


def test_no_baseline_is_a_notice_that_says_what_fail_on_regression_makes_of_it() -> None:
    judged, notes = no_baseline(FailOn.REGRESSION, "no run on main")
    why = (
        "no run on main — fail-on: regression has nothing to compare with, so no failure "
        "counts as new (only an infrastructure error fails this step)"
    )
    assert judged == Judgement(FailOn.REGRESSION, missing=why)
    assert notes == [
        Note(f"flakestorm: no baseline: {why}", Level.NOTICE, "flakestorm: no baseline")
    ]


def test_a_cancelled_run_or_a_shard_is_not_compared(tmp_path: Path) -> None:
    settings = Settings(baseline=BaselineMode.AUTO, fail_on=FailOn.REGRESSION)
    cancelled = replace(HEAD, stop_reason="interrupted")
    assert judge_step(settings, {}, _NO_API, cancelled, tmp_path) == (
        Judgement(FailOn.REGRESSION),
        [Note("flakestorm: baseline: not compared (the run was cancelled)")],
    )
    shard = replace(HEAD, shard=Shard(1, 2))
    assert judge_step(settings, {}, _NO_API, shard, tmp_path)[1] == [
        Note("flakestorm: baseline: shard 1/2 is compared by the merge job")
    ]


def test_a_missing_baseline_file_is_a_notice_and_a_broken_one_an_error(tmp_path: Path) -> None:
    settings = Settings(baseline=BaselineFile(".flakestorm/baseline.json"))
    judged, notes = judge_step(settings, {}, _NO_API, HEAD, tmp_path)
    assert judged.error is None and judged.missing is not None
    assert judged.missing.startswith(".flakestorm/baseline.json: no such baseline file")
    assert [n.level for n in notes] == [Level.NOTICE]
    (tmp_path / ".flakestorm").mkdir()
    (tmp_path / ".flakestorm" / "baseline.json").write_text('{"a": 1}', encoding="utf-8")
    judged, notes = judge_step(settings, {}, _NO_API, HEAD, tmp_path)
    assert judged.error is not None
    assert judged.error.startswith("the baseline file .flakestorm/baseline.json")
    assert judged.exit_code(HEAD) == 2  # a config error over the gate's 1
    assert [n.level for n in notes] == [None]  # a log line: the annotation says exit 2


def test_config_problems_are_placed_on_their_lines() -> None:
    problems = [
        Problem("flakestorm.yaml", 7, 11, "contract.invariants[0].type", "unknown type"),
        Problem("flakestorm.yaml", 2, 1, "", "x"),
    ]
    assert config_annotations(problems, "ci/flakestorm.yaml", "config error") == [
        Annotation(
            "contract.invariants[0].type: unknown type",
            file="ci/flakestorm.yaml",
            line=7,
            title="flakestorm: config error",
        ),
        Annotation("x", file="ci/flakestorm.yaml", line=2, title="flakestorm: config error"),
    ]


def test_the_run_log_group_names_the_command_and_the_shard() -> None:
    assert run_title(Settings()) == "flakestorm ci: every configured phase"
    contract = Settings(command=Command.CONTRACT, shard=Shard(2, 3))
    assert run_title(contract) == "flakestorm contract: the contract, shard 2/3"


def test_the_cancel_line_names_the_report_directory_once_it_is_known(tmp_path: Path) -> None:
    step = Step.of(Settings(), {"GITHUB_WORKSPACE": str(tmp_path)})
    assert cancelling(step, []) == (
        "flakestorm: cancelled: invocations in flight get 1.5 s, then the partial reports "
        "are written"
    )
    assert cancelling(step, [tmp_path / "out"]).endswith("are written to out")


class _NoApi:
    """The REST reads, which these cases must not make."""

    def get_json(self, path: str, params: object = None) -> object:
        raise AssertionError(f"GET {path}")

    def download(self, path: str, max_bytes: int) -> bytes:
        raise AssertionError(f"GET {path}")


_NO_API = _NoApi()
