"""The score's trend (SPEC §14): the action reads the base branch's last runs through the REST
API (the suite's fake GitHub API) and the summary and comment show a sparkline and a table,
the HTML report a chart; ``flakestorm report --history`` draws the same from files."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fake_github import FakeGitHub, zip_of
from support.runs import results_json, run_of
from test_baseline_source import REPO, _action_env, _Agent, api  # noqa: F401 (the fixture)
from test_entrypoint import entrypoint

from flakestorm.cli import main as cli
from flakestorm.github.baseline_source import History, Query, find_history
from flakestorm.github.client import GitHub
from flakestorm.results.model import Overall, from_document
from flakestorm.results.trend import Trend, TrendPoint, trend_of

GOLDEN = Path(__file__).parent / "trend" / "summary.md"
SCORES = [96.0, 95.5, 95.5, 95.0, 94.0, 94.5, 93.0, 92.5, 40.0, 92.0]
SCORES += [91.5, 91.0, 90.5, 90.0, 90.5, 89.5, 89.0, 88.5, 88.0, 88.0]
EXPIRED = {4, 11}
OTHER_CONFIG = {8}


def _earlier(i: int, digest: str) -> bytes:
    """Run ``i`` of the base branch (day ``i + 1`` of October): its score, verdict, digest."""
    run = run_of({"contract": ["says-hello[calm]=passed"]}, exit_code=0 if i != 8 else 1)
    run = dataclasses.replace(
        run,
        started_at=f"2026-10-{i + 1:02d}T09:00:00+00:00",
        config_digest="f" * 64 if i in OTHER_CONFIG else digest,
        overall=dataclasses.replace(run.overall, score=SCORES[i], passed=i != 8),
    )
    return zip_of({"results.json": results_json(run)})


def _trend_block(summary: str) -> str:
    start = summary.index("**Score trend**")
    return summary[start : summary.index("</details>", start) + len("</details>")]


def test_the_summary_and_comment_show_the_base_branchs_trend(
    api: FakeGitHub,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    agent = _Agent()
    with agent.server:
        env = _action_env(tmp_path, api, agent, 1)
        assert entrypoint.main(env, GitHub(env, out=io.StringIO())) == 0
        first = Path(env["GITHUB_WORKSPACE"]) / "flakestorm-reports" / "results.json"
        digest = from_document(json.loads(first.read_text(encoding="utf-8")))
        for i in range(20):
            api.add_run(
                REPO,
                "ci.yml",
                "main",
                f"{i:02d}" + "a" * 38,
                created_at=f"2026-10-{i + 1:02d}T09:00:00Z",
                artifacts={"flakestorm-reports": _earlier(i, digest.config_digest)},
                expired=i in EXPIRED,
            )
        env = _action_env(tmp_path, api, agent, 2, BASELINE="auto")
        out = io.StringIO()
        before = len(api.requests)
        assert entrypoint.main(env, GitHub(env, out=out)) == 0, out.getvalue()
        zips = [r.path for r in api.requests[before:] if r.path.endswith("/zip")]
    # each readable run's report downloaded once: the baseline's is not read again
    assert len(zips) == len(set(zips)) == 20 - len(EXPIRED), zips
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    block = _trend_block(summary)
    # this run's row carries today's date: the fixture names it TODAY
    block = re.sub(r"\| \d{4}-\d\d-\d\d \| this run \|", "| TODAY | this run |", block)
    assert block + "\n" == GOLDEN.read_text(encoding="utf-8"), block
    assert "flakestorm: trend: Score over the last 18 runs on main and this one" in out.getvalue()
    comment = api.comments(REPO, 7)[-1]["body"]
    short = _trend_block(comment)
    assert short.splitlines()[0] == block.splitlines()[0]  # the same sparkline line
    assert "The last 5 runs" in short and short.count("\n| 2026-10-") == 4
    html = (Path(env["GITHUB_WORKSPACE"]) / "flakestorm-reports" / "report.html").read_text()
    assert '<div id="trend">' in html and html.count('<circle class="trend-') == 19
    assert html.count('class="trend-other"') == 1 and html.count('class="trend-current"') == 1


def test_the_sparkline_scales_between_the_lowest_and_highest_score() -> None:
    points = tuple(
        TrendPoint(f"2026-10-0{i}", "abc1234", score, "PASS")
        for i, score in enumerate([96.0, 92.0, 88.0, 40.0], 1)
    )
    marked = dataclasses.replace(points[3], other_config=True)
    trend = Trend((*points[:3], marked), "main")
    assert trend.sparkline() == "█▅▁"  # the run of another config is not mixed in
    assert trend.headline().endswith(": █▅▁ 96.00 → 88.00 (1 of another config, marked †)")
    assert trend.rows()[3] == ("2026-10-04", "abc1234", "40.00 †", "PASS")
    assert Trend.from_document(trend.document()) == trend


def test_report_history_draws_the_trend_of_saved_runs(tmp_path: Path) -> None:
    for i, score in enumerate([90.0, 85.0, 80.0]):
        run = run_of({"contract": ["a[x]=passed"]})
        run = dataclasses.replace(
            run,
            started_at=f"2026-11-0{i + 1}T00:00:00+00:00",
            overall=Overall(score, True, 0.0, {}, ("contract",), ()),
        )
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        (folder / "results.json").write_text(results_json(run), encoding="utf-8")
    out = tmp_path / "out"
    done = CliRunner().invoke(
        cli,
        [
            "report",
            str(tmp_path / "run2" / "results.json"),
            "--history",
            str(tmp_path),
            "-o",
            str(out),
        ],
    )
    assert done.exit_code == 0, done.output
    assert "Score over the last 2 runs and this one: █▅▁ 90.00 → 80.00" in done.output
    assert "| 2026-11-03 | this run | 80.00 | PASS |" in done.output
    assert "**Score trend**" in (out / "summary.md").read_text(encoding="utf-8")
    assert '<div id="trend">' in (out / "report.html").read_text(encoding="utf-8")


def _saved(folder: Path, day: int, score: float) -> Path:
    """A run of 2026-11-DAY scoring ``score``, saved as ``folder/results.json``."""
    run = run_of({"contract": ["a[x]=passed"]})
    run = dataclasses.replace(
        run,
        started_at=f"2026-11-{day:02d}T00:00:00+00:00",
        overall=Overall(score, True, 0.0, {}, ("contract",), ()),
    )
    folder.mkdir(parents=True)
    path = folder / "results.json"
    path.write_text(results_json(run), encoding="utf-8")
    return path


def test_report_history_skips_and_counts_unreadable_files(tmp_path: Path) -> None:
    history = tmp_path / "history"
    good = _saved(history / "run1", 1, 90.0)
    _saved(history / "run2", 2, 85.0)
    text = good.read_text(encoding="utf-8")
    (history / "corrupt").mkdir()
    (history / "corrupt" / "results.json").write_text("<<<<<<< HEAD\n{", encoding="utf-8")
    (history / "truncated").mkdir()
    (history / "truncated" / "results.json").write_text(text[: len(text) // 2], encoding="utf-8")
    for name, score in (("nan", "NaN"), ("infinite", "-Infinity")):
        (history / name).mkdir()
        nan = text.replace('"overall": {"score": 90.0', f'"overall": {{"score": {score}', 1)
        assert nan != text
        (history / name / "results.json").write_text(nan, encoding="utf-8")
    this = _saved(tmp_path / "this", 3, 80.0)
    done = CliRunner().invoke(
        cli, ["report", str(this), "--history", str(history), "-o", str(tmp_path / "out")]
    )
    assert done.exit_code == 0, done.output
    assert "Traceback" not in done.output
    assert "--history: skipped 4 unreadable:\n" in done.output
    corrupt = history / "corrupt" / "results.json"
    assert f"  {corrupt}: not JSON (Expecting value: character 0)" in done.output
    assert f"  {history / 'truncated' / 'results.json'}: not JSON (" in done.output
    assert f"  {history / 'nan' / 'results.json'}: overall.score is nan, not a finite" in (
        done.output
    )
    assert f"  {history / 'infinite' / 'results.json'}: overall.score is -inf" in done.output
    # the trend is drawn from the two good runs and this one; the skipped ones are counted
    headline = "Score over the last 2 runs and this one: █▅▁ 90.00 → 80.00 (4 without a readable"
    assert headline in done.output
    summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert headline in summary and summary.count("| 2026-11-0") == 3


def test_a_nan_score_in_the_report_read_is_a_usage_error(tmp_path: Path) -> None:
    path = _saved(tmp_path / "run", 1, 90.0)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"overall": {"score": 90.0', '"overall": {"score": NaN'))
    done = CliRunner().invoke(cli, ["report", str(path), "--history", str(path)])
    assert done.exit_code == 2, done.output
    assert f"{path}: overall.score is nan, not a finite number" in done.output


def test_report_history_never_rewrites_its_input_and_counts_a_run_once(tmp_path: Path) -> None:
    _saved(tmp_path / "run1", 1, 90.0)
    this = _saved(tmp_path / "run2", 2, 80.0)
    copy = tmp_path / "copies" / "again" / "results.json"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(this.read_bytes())  # the same run under another name
    before = this.read_bytes()
    os.utime(this, (1_000_000_000, 1_000_000_000))
    # no -o: the reports go beside the results.json read, which is in the history directory
    done = CliRunner().invoke(cli, ["report", str(this), "--history", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert this.read_bytes() == before and this.stat().st_mtime == 1_000_000_000
    assert f"kept {this}: it is an input of this report, never rewritten" in done.output
    assert f"--history: {copy} holds the run of {this}" in done.output
    assert "Score over the last 1 run and this one: █▁ 90.00 → 80.00" in done.output
    summary = (this.parent / "summary.md").read_text(encoding="utf-8")
    assert summary.count("| 2026-11-02 |") == 1 and summary.count("| 2026-11-01 |") == 1
    # into the folder of an earlier run: its results.json is an input too
    earlier = tmp_path / "run1" / "results.json"
    kept = earlier.read_bytes()
    args = ["report", str(this), "--history", str(earlier), "-o", str(earlier.parent)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert earlier.read_bytes() == kept and (earlier.parent / "summary.md").exists()


def test_the_action_skips_and_counts_a_base_branch_run_with_a_nan_score(
    api: FakeGitHub,  # noqa: F811
) -> None:
    for day, score in ((1, "90.0"), (2, "NaN"), (3, "Infinity"), (4, "80.0")):
        run = run_of({"contract": ["a[x]=passed"]})
        run = dataclasses.replace(run, started_at=f"2026-10-0{day}T09:00:00+00:00")
        text = results_json(run).replace(
            '"overall": {"score": 50.0', f'"overall": {{"score": {score}'
        )
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            f"{day:02d}" + "a" * 38,
            created_at=f"2026-10-0{day}T09:00:00Z",
            artifacts={"flakestorm-reports": zip_of({"results.json": text})},
        )
    gh = GitHub({"GITHUB_API_URL": api.url}, out=io.StringIO(), token="rw")
    query = Query(REPO, "main", "flakestorm-reports", "ci.yml", run_id=1)
    history = find_history(gh, query, "0" * 64)
    assert isinstance(history, History)
    assert [(p.at, p.score) for p in history.points] == [("2026-10-01", 90.0), ("2026-10-04", 80.0)]
    assert history.skipped == 2
    assert trend_of(history.points, None, "main", history.skipped).sparkline() == "█▁"
