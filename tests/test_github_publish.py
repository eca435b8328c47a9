"""The edge that writes what the builders make (``flakestorm/github/publish.py``), on the path no
other test takes: a bug in flakestorm during the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_entrypoint import CONFIG, Agent, _env, _outputs, _run

from flakestorm.engine import runner


def test_a_bug_during_the_run_is_an_internal_error_with_its_traceback_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("::error::a bug that looks like a command")

    monkeypatch.setattr(runner, "run_ci", broken)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "flakestorm.yaml").write_text(CONFIG, encoding="utf-8")
    agent = Agent()
    with agent.server:
        env = _env(workspace, agent)
        code, stdout = _run(env)
    assert code == 3, stdout
    assert _outputs(env) == {"passed": "false", "report-dir": "flakestorm-reports"}
    lines = stdout.splitlines()
    start = lines.index("flakestorm: internal error (a bug in flakestorm, please report it):")
    # the traceback verbatim, with workflow commands off, then the error annotation
    assert lines[start + 1].startswith("::stop-commands::")
    assert lines[start + 2] == "Traceback (most recent call last):"
    token = lines[start + 1].removeprefix("::stop-commands::")
    end = lines.index(f"::{token}::")
    assert "RuntimeError: ::error::a bug that looks like a command" in lines[start:end]
    assert lines[end + 1] == (
        "::error title=flakestorm%3A internal error::internal error: this is a bug in "
        "flakestorm, please report it at https://github.com/flakestorm/flakestorm/issues with "
        "the log above"
    )
    assert not Path(env["GITHUB_STEP_SUMMARY"]).exists()  # no verdict to summarise
