"""Finding the baseline through the REST API (the fake GitHub API on a loopback port), reading
its artifact, and the action's whole baseline flow (``entrypoint.main`` with ``baseline: auto``)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.fake_github import FakeGitHub, zip_of
from support.runs import results_json, run_of

from flakestorm.github.artifact import ArtifactError, results_from_zip
from flakestorm.github.baseline_source import (
    Baseline,
    NoBaseline,
    Query,
    age_text,
    find_baseline,
    query_of,
    workflow_file,
)
from flakestorm.github.client import GitHub

REPO = "o/r"
SHA = "abc1234def5678abc1234def5678abc1234def56"
PASSING = run_of({"contract": ["a[x]=passed", "b[x]=passed"]})
QUERY = Query(REPO, "main", "flakestorm-reports", "ci.yml", run_id=1)


@pytest.fixture
def api() -> Iterator[FakeGitHub]:
    with FakeGitHub(tokens={"rw": "write", "noactions": "write+noactions"}) as fake:
        yield fake


def _gh(api: FakeGitHub, token: str = "rw") -> GitHub:
    return GitHub({"GITHUB_API_URL": api.url}, out=io.StringIO(), token=token)


def _artifact(result: object = PASSING, name: str = "results.json") -> bytes:
    return zip_of({name: results_json(result), "junit.xml": "<testsuites/>"})  # type: ignore[arg-type]


def test_the_newest_successful_run_on_the_base_branch(api: FakeGitHub) -> None:
    older = run_of({"contract": ["a[x]=failed"]})
    api.add_run(
        REPO,
        "ci.yml",
        "main",
        "0" * 40,
        created_at="2026-01-01T00:00:00Z",
        artifacts={"flakestorm-reports": _artifact(older)},
    )
    newest = api.add_run(
        REPO,
        "ci.yml",
        "main",
        SHA,
        created_at="2026-01-03T00:00:00Z",
        artifacts={"flakestorm-reports": _artifact()},
    )
    # never the baseline: a failed run, another branch, another workflow, a fork's PR run on a
    # branch it named main, a run from another repository
    api.add_run(
        REPO,
        "ci.yml",
        "main",
        "1" * 40,
        created_at="2026-01-04T00:00:00Z",
        conclusion="failure",
        artifacts={"flakestorm-reports": _artifact(older)},
    )
    api.add_run(
        REPO,
        "ci.yml",
        "dev",
        "2" * 40,
        created_at="2026-01-05T00:00:00Z",
        artifacts={"flakestorm-reports": _artifact(older)},
    )
    api.add_run(
        REPO,
        "nightly.yml",
        "main",
        "3" * 40,
        created_at="2026-01-05T00:00:00Z",
        artifacts={"flakestorm-reports": _artifact(older)},
    )
    api.add_run(
        REPO,
        "ci.yml",
        "main",
        "4" * 40,
        created_at="2026-01-06T00:00:00Z",
        event="pull_request",
        head_repo="evil/r",
        artifacts={"flakestorm-reports": _artifact(older)},
    )

    found = find_baseline(_gh(api), QUERY)

    assert isinstance(found, Baseline), found
    assert found.run.id == newest and found.run.label == "main @ abc1234"
    assert found.result.phases["contract"].cells[0].status.value == "passed"
    assert found.run.created_at == datetime(2026, 1, 3, tzinfo=timezone.utc)
    paths = [(r.method, r.path.split("?")[0]) for r in api.requests]
    assert paths[0] == ("GET", f"/repos/{REPO}/actions/workflows/ci.yml/runs")
    assert ("GET", f"/repos/{REPO}/actions/runs/{newest}/artifacts") in paths
    assert paths[-1][1].startswith("/_blobs/")  # the 302 was followed
    first = api.requests[0]
    assert "branch=main" in first.path and "status=success" in first.path
    assert first.headers["Authorization"] == "Bearer rw"


def test_a_run_without_the_artifact_is_passed_over(api: FakeGitHub) -> None:
    with_it = api.add_run(
        REPO,
        "ci.yml",
        "main",
        SHA,
        created_at="2026-01-01T00:00:00Z",
        artifacts={"flakestorm-reports": _artifact()},
    )
    api.add_run(
        REPO,
        "ci.yml",
        "main",
        "1" * 40,
        created_at="2026-01-02T00:00:00Z",
        artifacts={"other": _artifact()},
    )
    api.add_run(
        REPO,
        "ci.yml",
        "main",
        "2" * 40,
        created_at="2026-01-03T00:00:00Z",
        artifacts={"flakestorm-reports": _artifact()},
        expired=True,
    )
    found = find_baseline(_gh(api), QUERY)
    assert isinstance(found, Baseline) and found.run.id == with_it


def test_a_workflow_file_name_is_quoted(api: FakeGitHub) -> None:
    api.add_run(REPO, "flake storm.yml", "main", SHA, artifacts={"flakestorm-reports": _artifact()})
    found = find_baseline(_gh(api), Query(REPO, "main", "flakestorm-reports", "flake storm.yml"))
    assert isinstance(found, Baseline), found
    assert api.requests[0].path.startswith(
        f"/repos/{REPO}/actions/workflows/flake%20storm.yml/runs?"
    )


def test_the_workflow_from_the_run_id(api: FakeGitHub) -> None:
    api.add_run(REPO, "ci.yml", "main", SHA, artifacts={"flakestorm-reports": _artifact()})
    this_run = api.add_run(REPO, "ci.yml", "feature", "5" * 40, event="pull_request")
    found = find_baseline(_gh(api), Query(REPO, "main", "flakestorm-reports", None, this_run))
    assert isinstance(found, Baseline), found
    assert any(r.path.startswith("/repos/o/r/actions/workflows/161335/runs") for r in api.requests)


@pytest.mark.parametrize(
    ("setup", "token", "expected", "permission"),
    [
        ("none", "rw", "no successful run of ci.yml on main yet", False),
        ("other-name", "rw", "has an unexpired `flakestorm-reports` artifact", False),
        ("no-results", "rw", "the artifact has no results.json", False),
        ("not-zip", "rw", "the artifact is not a zip archive", False),
        ("two-results", "rw", "the artifact has 2 results.json files", False),
        ("old-schema", "rw", "results schema_version 1 is not supported", False),
        ("too-deep", "rw", "results.json: not JSON (nested too deeply)", False),
        (
            "wrong-type",
            "rw",
            "results.json: results document is malformed: seed: '1' is not an int",
            False,
        ),
        ("nan-score", "rw", "results.json: overall.score is nan, not a finite number", False),
        ("ok", "noactions", "HTTP 403", True),
        ("ok", "unknown", "HTTP 401", False),
    ],
)
def test_no_baseline_says_why(
    api: FakeGitHub, setup: str, token: str, expected: str, permission: bool
) -> None:
    api.add_run(REPO, "nightly.yml", "main", SHA)  # the workflow exists on the fake
    artifact = {
        "none": None,
        "other-name": {"something-else": _artifact()},
        "no-results": {"flakestorm-reports": zip_of({"junit.xml": "<x/>"})},
        "not-zip": {"flakestorm-reports": b"not a zip"},
        "two-results": {
            "flakestorm-reports": zip_of(
                {"a/results.json": results_json(PASSING), "b/results.json": results_json(PASSING)}
            )
        },
        "old-schema": {"flakestorm-reports": zip_of({"results.json": '{"schema_version": 1}'})},
        "too-deep": {
            "flakestorm-reports": zip_of(
                {
                    "results.json": '{"schema_version": 2, "x": '
                    + "[" * 100_000
                    + "]" * 100_000
                    + "}"
                }
            )
        },
        "wrong-type": {
            "flakestorm-reports": zip_of(
                {"results.json": results_json(PASSING).replace('"seed": 1,', '"seed": "1",')}
            )
        },
        "nan-score": {
            "flakestorm-reports": zip_of(
                {
                    "results.json": re.sub(
                        r'("overall": \{"score": )[\d.]+', r"\1NaN", results_json(PASSING)
                    )
                }
            )
        },
        "ok": {"flakestorm-reports": _artifact()},
    }[setup]
    if artifact is not None:
        api.add_run(REPO, "ci.yml", "main", SHA, artifacts=artifact)
    else:
        api.add_run(REPO, "ci.yml", "main", SHA, conclusion="failure")
    found = find_baseline(_gh(api, token), QUERY)
    assert isinstance(found, NoBaseline), found
    assert expected in found.reason
    assert found.permission is permission
    if permission:
        assert "permissions: actions: read" in found.reason


def test_an_unreachable_api_is_no_baseline() -> None:
    gh = GitHub({"GITHUB_API_URL": "http://127.0.0.1:9"}, out=io.StringIO(), token="t")
    found = find_baseline(gh, QUERY)
    assert isinstance(found, NoBaseline) and "could not read" in found.reason


def test_results_from_zip_takes_the_shallowest_and_bounds_the_size() -> None:
    data = zip_of(
        {"reports/deep/results.json": "{}", "reports/results.json": results_json(PASSING)}
    )
    assert results_from_zip(data).phases["contract"].cells[1].invariant_id == "b"
    with pytest.raises(ArtifactError, match="at most 10 are read"):
        results_from_zip(_artifact(), max_bytes=10)


def test_query_of_the_environment(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"ref": "release"}}}))
    env = {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "99",
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/ci.yml@refs/pull/7/merge",
        "GITHUB_EVENT_PATH": str(event),
    }
    assert query_of(env, None, "art") == Query(REPO, "release", "art", "ci.yml", 99)
    assert query_of({**env, "GITHUB_BASE_REF": "main"}, None, "art") == Query(
        REPO, "main", "art", "ci.yml", 99
    )
    assert query_of(env, "stable", "art") == Query(REPO, "stable", "art", "ci.yml", 99)
    push = {k: v for k, v in env.items() if k != "GITHUB_EVENT_PATH"}
    missing = query_of(push, None, "art")
    assert isinstance(missing, NoBaseline) and "baseline-branch" in missing.reason
    assert workflow_file("o/r/.github/workflows/flake storm.yml@refs/heads/x") == "flake storm.yml"
    assert workflow_file("garbage") is None


def test_age_text() -> None:
    now = datetime(2026, 1, 3, 12, tzinfo=timezone.utc)
    assert age_text(datetime(2026, 1, 3, 9, tzinfo=timezone.utc), now) == "3 hours old"
    assert age_text(datetime(2026, 1, 2, 12, tzinfo=timezone.utc), now) == "1 day old"
    assert age_text(now, now) == "less than a minute old"
    assert age_text(None, now) == "age unknown"


# --------------------------------------------------------------------------- the action's flow

CONFIG = """\
version: "2.0"
agent:
  endpoint: ${AGENT_URL}
  ready_timeout: 5000
golden_prompts:
  - "say hello"
contract:
  name: Greeter
  invariants:
    - id: not-empty
      type: output_not_empty
      severity: low
    - id: says-hello
      type: contains
      value: hello
      severity: critical
  chaos_matrix:
    - name: calm
"""


class _Agent:
    def __init__(self) -> None:
        from support.server import LoopbackServer, Request, Response

        self.answer = "hello there"

        def handle(request: Request) -> Response:
            return Response.json({"output": self.answer})

        self.server = LoopbackServer(handle)


def _action_env(
    root: Path, api: FakeGitHub, agent: _Agent, run: int, config: str = CONFIG, **inputs: str
) -> dict[str, str]:
    """The environment of run ``run`` in the one workspace ``root/ws`` (the working directory,
    as in the action: reports then name the config as the repository does)."""
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "flakestorm.yaml").write_text(config, encoding="utf-8")
    files = root / f"files{run}"
    files.mkdir()
    event = files / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "number": 7,
                    "base": {"ref": "main"},
                    "head": {"repo": {"full_name": REPO}},
                }
            }
        ),
        encoding="utf-8",
    )
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(files / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(files / "summary.md"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_BASE_REF": "main",
        "GITHUB_RUN_ID": str(run),
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/ci.yml@refs/pull/7/merge",
        "GITHUB_API_URL": api.url,
        "AGENT_URL": agent.server.url_for("/chat"),
        "INPUT_GITHUB-TOKEN": "rw",
        "INPUT_COMMENT": "always",
    }
    env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    return env


def _outputs(env: dict[str, str]) -> dict[str, str]:
    import re

    text = Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")
    return {m[1]: m[3] for m in re.finditer(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", text, re.S | re.M)}


def test_the_action_judges_a_pull_request_by_what_it_changes(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")

    agent = _Agent()
    with agent.server:
        # main: everything passes; its report becomes the baseline artifact
        env = _action_env(tmp_path, api, agent, 1)
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 0, out.getvalue()
        main_results = Path(env["GITHUB_WORKSPACE"]) / "flakestorm-reports" / "results.json"
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            SHA,
            created_at="2026-01-01T00:00:00Z",
            artifacts={"flakestorm-reports": zip_of({"results.json": main_results.read_text()})},
        )

        # a pull request that breaks one cell
        agent.answer = "good day"
        env = _action_env(tmp_path, api, agent, 2, **{"BASELINE": "auto", "FAIL-ON": "regression"})
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
        log = out.getvalue()
        assert code == 1, log
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert summary.startswith("**1 new failure vs main @ abc1234**\n"), summary[:300]
        assert "Baseline: main @ abc1234, " in summary and " old (" in summary
        # the run's own gate fails too: the heading does not repeat it
        heading = "❌ FAIL — fail-on: regression: 1 new failure vs main @ abc1234"
        assert f"\n## flakestorm: {heading}\n" in summary
        assert "flakestorm: baseline: 1 new failure vs main @ abc1234" in log
        assert f"\nflakestorm: {heading.removeprefix('❌ ')}: score " in log
        (error,) = [line for line in log.splitlines() if line.startswith("::error")]
        assert error.startswith("::error file=flakestorm.yaml,line=13,")
        assert "(known" not in error
        assert _outputs(env)["new-failures"] == "1" and _outputs(env)["fixed"] == "0"
        assert _outputs(env)["passed"] == "false"
        body = api.comments(REPO, 7)[-1]["body"]
        lines = body.splitlines()
        assert lines[3] == "**1 new failure vs main @ abc1234**", body[:400]
        assert f"\n### flakestorm: {heading} · score " in body

        # main now has that failure too: a pull request that only keeps it passes
        bad_results = Path(env["GITHUB_WORKSPACE"]) / "flakestorm-reports" / "results.json"
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            "f" * 40,
            created_at="2026-01-02T00:00:00Z",
            artifacts={"flakestorm-reports": zip_of({"results.json": bad_results.read_text()})},
        )
        env = _action_env(tmp_path, api, agent, 3, **{"BASELINE": "auto", "FAIL-ON": "regression"})
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
        assert code == 0, out.getvalue()
        # every verdict heading says PASS, with the run's own gate beside it
        heading = (
            "✅ PASS — fail-on: regression: no new failures vs main @ fffffff "
            "(the run's own gate: FAIL, 1 known failure)"
        )
        (verdict,) = [line for line in out.getvalue().splitlines() if "fail-on: regression" in line]
        assert verdict.startswith(f"flakestorm: {heading.removeprefix('✅ ')}: score "), verdict
        # the known failure is a warning on its line, not an error: the step passes
        lines = out.getvalue().splitlines()
        assert not [line for line in lines if line.startswith("::error")], lines
        (warning,) = [line for line in lines if line.startswith("::warning file=flakestorm.yaml")]
        assert "critical invariant says-hello failed in 1 of 1 scenario(s) (known: " in warning
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert summary.startswith("**0 new failures vs main @ fffffff, 1 still failing**\n")
        assert f"\n## flakestorm: {heading}\n" in summary
        assert "❌" not in summary.split("\n## flakestorm: ")[1].splitlines()[0]
        body = api.comments(REPO, 7)[-1]["body"]
        assert f"\n### flakestorm: {heading} · score " in body
        assert "❌ FAIL" not in body
        assert _outputs(env)["new-failures"] == "0"
        assert _outputs(env)["passed"] == "true"  # the step passed: so does the output

        # fail-on: any still fails it, and says so (the run's own verdict, no rule)
        env = _action_env(tmp_path, api, agent, 4, **{"BASELINE": "auto"})
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 1
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert "\n## flakestorm: ❌ FAIL\n" in summary
        assert "\nflakestorm: FAIL: score " in out.getvalue()


def test_no_baseline_is_a_notice_never_a_failure(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")

    agent = _Agent()
    with agent.server:
        api.add_run(REPO, "ci.yml", "main", SHA, artifacts={"flakestorm-reports": _artifact()})
        env = _action_env(
            tmp_path, api, agent, 1, **{"BASELINE": "auto", "GITHUB-TOKEN": "noactions"}
        )
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 0, out.getvalue()
        log = out.getvalue()
        notices = [line for line in log.splitlines() if line.startswith("::notice")]
        assert any("no baseline" in n and "actions: read" in n for n in notices), log
        assert not [line for line in log.splitlines() if line.startswith(("::error", "::warning"))]
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert summary.startswith("> [!NOTE]\n> No baseline to compare with: ")
        assert "new-failures" not in _outputs(env)

        # fail-on: regression with nothing to compare: the step passes, the notice says why
        agent.answer = "good day"
        env = _action_env(
            tmp_path,
            api,
            agent,
            2,
            **{"BASELINE": "auto", "FAIL-ON": "regression", "GITHUB-TOKEN": "noactions"},
        )
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 0, out.getvalue()
        assert "no failure counts as new" in out.getvalue()
        heading = (
            "PASS — fail-on: regression: no baseline compared, so no failure is known to be new "
            "(the run's own gate: FAIL)"
        )
        assert f"\nflakestorm: {heading}: score " in out.getvalue()
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert f"\n## flakestorm: ✅ {heading}\n" in summary
        assert "❌ FAIL" not in summary


def test_fail_on_regression_needs_the_baseline() -> None:
    from flakestorm.github.settings import SettingsError, parse_settings

    with pytest.raises(SettingsError, match="input `fail-on`: 'regression' needs a baseline"):
        parse_settings({"INPUT_FAIL-ON": "regression"})


def test_a_push_has_nothing_to_compare_and_says_so_in_the_log(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    agent = _Agent()
    with agent.server:
        env = _action_env(tmp_path, api, agent, 1, BASELINE="auto")
        env["GITHUB_EVENT_NAME"] = "push"
        del env["GITHUB_BASE_REF"], env["GITHUB_EVENT_PATH"]
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 0
    log = out.getvalue()
    assert "flakestorm: baseline: none: not a pull request" in log
    assert "::notice" not in log
    assert not [r for r in api.requests if "/actions/" in r.path]


def test_a_baseline_of_another_config_is_refused(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    other = run_of({"contract": ["says-hello[calm]=passed"]}, config_path="./other.yaml")
    api.add_run(REPO, "ci.yml", "main", SHA, artifacts={"flakestorm-reports": _artifact(other)})
    agent = _Agent()
    with agent.server:
        env = _action_env(tmp_path, api, agent, 1, BASELINE="auto")
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 0
    notices = [line for line in out.getvalue().splitlines() if line.startswith("::notice")]
    assert any("ran ./other.yaml, this run flakestorm.yaml" in n for n in notices), notices
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "give each config its own" in summary.split("\n\n")[0]


def test_a_download_is_bounded(api: FakeGitHub) -> None:
    from flakestorm.errors import RestError

    data = _artifact()
    run = api.add_run(REPO, "ci.yml", "main", SHA, artifacts={"flakestorm-reports": data})
    listing = _gh(api).get_json(f"/repos/{REPO}/actions/runs/{run}/artifacts")
    artifact_id = listing["artifacts"][0]["id"]
    path = f"/repos/{REPO}/actions/artifacts/{artifact_id}/zip"
    assert _gh(api).download(path, 1 << 20) == data
    with pytest.raises(RestError, match="larger than 10 bytes"):
        _gh(api).download(path, 10)
    with pytest.raises(RestError, match="HTTP 404") as raised:
        _gh(api).download(f"/repos/{REPO}/actions/artifacts/1/zip", 1 << 20)
    assert raised.value.status == 404


def test_a_new_failure_that_is_not_critical_is_the_error(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    agent = _Agent()
    with agent.server:
        agent.answer = "good day"  # main: says-hello (critical) fails, not-empty passes
        env = _action_env(tmp_path, api, agent, 1)
        assert entrypoint.main(env, GitHub(env, out=io.StringIO())) == 1
        results = Path("flakestorm-reports/results.json").read_text(encoding="utf-8")
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            SHA,
            artifacts={"flakestorm-reports": zip_of({"results.json": results})},
        )
        agent.answer = ""  # the pull request: not-empty (low) fails too
        env = _action_env(tmp_path, api, agent, 2, BASELINE="auto", **{"FAIL-ON": "regression"})
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 1
    lines = out.getvalue().splitlines()
    errors = [line for line in lines if line.startswith("::error")]
    assert errors == [
        "::error title=flakestorm%3A new failures::1 new failure vs main @ abc1234, "
        "1 still failing: not-empty[calm]"
    ], errors
    assert [line for line in lines if line.startswith("::warning file=flakestorm.yaml")]


ERROR_CONFIG = """\
version: "2.0"
agent:
  endpoint: ${AGENT_URL}
  ready_timeout: 5000
proxy:
  tools:
    search: http://127.0.0.1:9
golden_prompts:
  - "say hello"
contract:
  name: Greeter
  invariants:
    - id: says-hello
      type: contains
      value: hello
      severity: critical
  chaos_matrix:
    - name: calm
    - name: down
      tool_faults:
        - tool: search
          mode: error
"""
"""The agent never calls ``search``: the fault is not delivered, the run exits 3."""


def test_an_error_stays_an_error_under_fail_on_regression(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    known = run_of({"contract": ["says-hello[calm]=failed", "says-hello[down]=failed"]})
    api.add_run(REPO, "ci.yml", "main", SHA, artifacts={"flakestorm-reports": _artifact(known)})
    agent = _Agent()
    with agent.server:
        env = _action_env(
            tmp_path, api, agent, 1, ERROR_CONFIG, BASELINE="auto", **{"FAIL-ON": "regression"}
        )
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
    log = out.getvalue()
    assert code == 3, log
    assert "flakestorm: baseline: 0 new failures vs main @ abc1234, 1 fixed" in log
    assert "\nflakestorm: ERROR (exit 3: 1 fault not delivered (in 1 scenario" in log
    assert "::error title=flakestorm%3A ERROR::exit 3: 1 fault not delivered" in log
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "\n## flakestorm: 💥 ERROR\n" in summary
    body = api.comments(REPO, 7)[-1]["body"]
    assert "\n### flakestorm: 💥 ERROR · score " in body
    for shown in (log, summary, body):
        assert not re.search(r"\bPASS\b", shown)
        assert "fail-on: regression:" not in shown


MUTATION_CONFIG = """\
version: "2.0"
agent:
  endpoint: ${AGENT_URL}
  ready_timeout: 5000
golden_prompts:
  - "say hello"
invariants:
  - id: says-hello
    type: contains
    value: hello
    severity: critical
mutations:
  count: 2
  types: [noise, tone_shift]
"""


def test_a_known_mutation_failure_is_a_warning_under_fail_on_regression(
    api: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_entrypoint import entrypoint

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    agent = _Agent()
    with agent.server:
        agent.answer = "good day"  # main: both mutations fail the critical says-hello
        env = _action_env(tmp_path, api, agent, 1, MUTATION_CONFIG)
        assert entrypoint.main(env, GitHub(env, out=io.StringIO())) == 1
        results = Path("flakestorm-reports/results.json").read_text(encoding="utf-8")
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            SHA,
            artifacts={"flakestorm-reports": zip_of({"results.json": results})},
        )
        # the pull request keeps the known failures: the step passes, and says so as a warning
        env = _action_env(
            tmp_path, api, agent, 2, MUTATION_CONFIG, BASELINE="auto", **{"FAIL-ON": "regression"}
        )
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 0, out.getvalue()
        lines = out.getvalue().splitlines()
        assert not [line for line in lines if line.startswith("::error")], lines
        (warning,) = [line for line in lines if line.startswith("::warning file=flakestorm.yaml")]
        assert warning.startswith("::warning file=flakestorm.yaml,line=8,")
        assert "says-hello failed in 2 of 2 mutation(s) (known: failing on the baseline too)" in (
            warning
        )

        # one mutation newly failing (the baseline had it passing) is the error again
        base = json.loads(results)
        for m in base["phases"]["mutation"]["mutations"]:
            if m["type"] == "noise":
                m.update(status="passed", failed_invariants=[], runs_passed=1)
        api.add_run(
            REPO,
            "ci.yml",
            "main",
            "f" * 40,
            created_at="2026-01-02T00:00:00Z",
            artifacts={"flakestorm-reports": zip_of({"results.json": json.dumps(base)})},
        )
        env = _action_env(
            tmp_path, api, agent, 3, MUTATION_CONFIG, BASELINE="auto", **{"FAIL-ON": "regression"}
        )
        out = io.StringIO()
        assert entrypoint.main(env, GitHub(env, out=out)) == 1, out.getvalue()
        errors = [line for line in out.getvalue().splitlines() if line.startswith("::error")]
        assert len(errors) == 1 and "says-hello failed in 2 of 2 mutation(s): " in errors[0]
