"""The score's trend (SPEC §14): the action reads the base branch's last runs through the REST
API (the suite's fake GitHub API) and the summary and comment show a sparkline and a table,
the HTML report a chart; ``flakestorm report --history`` draws the same from files."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fake_github import FakeGitHub, zip_of
from support.runs import results_json, run_of
from test_baseline_source import REPO, _action_env, _Agent, api  # noqa: F401 (the fixture)
from test_entrypoint import entrypoint

from flakestorm.cli import main as cli
from flakestorm.github.client import GitHub
from flakestorm.results.model import Overall, from_document
from flakestorm.results.trend import Trend, TrendPoint

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
