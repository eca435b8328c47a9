"""The report directory says what the check said: under ``fail-on: regression`` the artifact's
summary.md, report.html and results.json state the step's verdict (the exit code's, the job
summary's and the comment's) and carry the baseline delta, and ``flakestorm report`` renders
them again identically from that results.json."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fake_github import FakeGitHub, zip_of
from test_baseline_source import REPO, SHA, _action_env, _Agent, _outputs

from flakestorm.cli import main as cli
from flakestorm.github.client import GitHub

KEPT = (
    "PASS — fail-on: regression: no new failures vs main @ abc1234 "
    "(the run's own gate: FAIL, 1 known failure)"
)


@pytest.fixture
def api() -> pytest.FixtureRequest:
    with FakeGitHub(tokens={"rw": "write"}) as fake:
        yield fake


def _run(env: dict[str, str]) -> tuple[int, str]:
    from test_entrypoint import entrypoint

    out = io.StringIO()
    return entrypoint.main(env, GitHub(env, out=out)), out.getvalue()


def test_the_artifact_states_the_steps_verdict_and_the_delta(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    reports = tmp_path / "ws" / "flakestorm-reports"
    agent = _Agent()
    agent.answer = "good day"  # says-hello (critical) fails: the run's own gate fails
    with agent.server:
        code, log = _run(_action_env(tmp_path, api, agent, 1))
        assert code == 1, log
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            SHA,
            created_at="2026-01-01T00:00:00Z",
            artifacts={
                "flakestorm-reports": zip_of(
                    {"results.json": (reports / "results.json").read_text()}
                )
            },
        )
        # the pull request keeps only that known failure: the step passes
        env = _action_env(tmp_path, api, agent, 2, BASELINE="auto", **{"FAIL-ON": "regression"})
        code, log = _run(env)
    assert code == 0, log
    assert _outputs(env)["passed"] == "true"
    assert f"\nflakestorm: {KEPT}: score " in log
    step_summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    body = api.comments(REPO, 7)[-1]["body"]
    assert f"\n### flakestorm: ✅ {KEPT} · score " in body

    # summary.md is the job summary: the delta first, then the step's verdict
    summary = (reports / "summary.md").read_text(encoding="utf-8")
    assert summary == step_summary
    assert summary.startswith("**0 new failures vs main @ abc1234, 1 still failing**\n")
    assert f"\n## flakestorm: ✅ {KEPT}\n" in summary
    assert "The run's own gate failed:" in summary
    assert "❌ FAIL" not in summary

    # report.html: the step's verdict, the rule, and the changed cell
    html = (reports / "report.html").read_text(encoding="utf-8")
    assert '<span class="verdict PASS" id="verdict">PASS</span>' in html
    assert "<title>flakestorm report: PASS " in html
    assert KEPT.replace("'", "&#39;") in html
    assert "0 new failures vs main @ abc1234, 1 still failing" in html
    assert "<td>still failing</td><td>says-hello[calm]</td><td>contract</td>" in html
    assert "The run's own gate failed:" in html

    # results.json: the run's own exit code, and the step's beside it with its delta
    document = json.loads((reports / "results.json").read_text(encoding="utf-8"))
    assert document["exit_code"] == 1
    step = document["step"]
    assert (step["fail_on"], step["exit_code"], step["against"]) == (
        "regression",
        0,
        "main @ abc1234",
    )
    assert [(c["cell_id"], c["change"]) for c in step["delta"]] == [
        ("says-hello[calm]", "still failing")
    ]

    # flakestorm report renders the same files again from results.json alone
    again = tmp_path / "again"
    outcome = CliRunner().invoke(cli, ["report", str(reports / "results.json"), "-o", str(again)])
    assert outcome.exit_code == 0, outcome.output
    for name in ("summary.md", "report.html", "results.json", "junit.xml"):
        assert (again / name).read_bytes() == (reports / name).read_bytes(), name


def test_a_run_outside_the_action_has_no_step(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a rule, a baseline or a missing one, the document is as it always was."""
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    agent = _Agent()
    with agent.server:
        code, log = _run(_action_env(tmp_path, api, agent, 1))
    assert code == 0, log
    document = json.loads(
        (tmp_path / "ws" / "flakestorm-reports" / "results.json").read_text(encoding="utf-8")
    )
    assert "step" not in document


def test_a_step_that_contradicts_its_run_is_refused(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A results.json whose step says an exit code its rule does not give is malformed: no
    report states a verdict the file disagrees with."""
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    agent = _Agent()
    agent.answer = "good day"
    with agent.server:
        code, _ = _run(
            _action_env(tmp_path, api, agent, 1, BASELINE="auto", **{"FAIL-ON": "regression"})
        )
    assert code == 0  # no baseline: nothing is known to be new
    path = tmp_path / "ws" / "flakestorm-reports" / "results.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["step"]["delta"] is None and document["step"]["missing"]
    document["step"]["exit_code"] = 1
    path.write_text(json.dumps(document), encoding="utf-8")
    outcome = CliRunner().invoke(cli, ["report", str(path), "-o", str(tmp_path / "again")])
    assert outcome.exit_code == 2
    assert "step: exit_code 1 is not the exit code its rule gives (0: fail-on regression" in (
        outcome.output
    )
