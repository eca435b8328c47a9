"""A committed baseline (SPEC §14): bless a run, commit the file, judge later runs against it
with ``compare --baseline file:PATH`` and the action's ``baseline: file:PATH``."""

from __future__ import annotations

import datetime
import io
import json
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_entrypoint import entrypoint

from flakestorm.cli import main as cli
from flakestorm.github.client import GitHub
from flakestorm.results import clock

TODAY = datetime.date(2026, 11, 27)
COMMIT = "3e0774a1b2c3d4e5f60718293a4b5c6d7e8f9012"

AGENT = """
import os

def answer(prompt):
    return os.environ["FS_TEST_REPLY"]
"""

CONFIG = """\
agent:
  type: python
  endpoint: "{module}:answer"
golden_prompts: ["greet me"]
contract:
  name: greetings
  invariants:
    - {{id: says-hello, type: contains, value: hello, severity: critical}}
    - {{id: polite, type: contains, value: please, severity: critical}}
  chaos_matrix:
    - name: calm
"""


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "today", lambda: TODAY)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    module = f"blessed_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    (tmp_path / "flakestorm.yaml").write_text(CONFIG.format(module=module), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_agent(monkeypatch: pytest.MonkeyPatch, reply: str, out: str) -> Path:
    monkeypatch.setenv("FS_TEST_REPLY", reply)
    done = CliRunner().invoke(cli, ["contract", "run", "--output", out])
    assert done.exit_code in (0, 1), done.output
    return Path(out) / "results.json"


def cli_run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_bless_writes_a_small_sorted_stable_file(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = run_agent(monkeypatch, "hello there", "main")
    done = cli_run("baseline", "bless", str(results), "--commit", COMMIT)
    assert done.exit_code == 0, done.output
    assert done.output == f"blessed {results} as .flakestorm/baseline.json: 2 cells and mutations\n"
    path = repo / ".flakestorm" / "baseline.json"
    text = path.read_text(encoding="utf-8")
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert document["blessed"] == {"at": "2026-11-27", "commit": COMMIT, "from": str(results)}
    assert document["phases"] == {
        "contract": {
            "polite[calm]": {
                "reason": document["phases"]["contract"]["polite[calm]"]["reason"],
                "severity": "critical",
                "status": "failed",
            },
            "says-hello[calm]": {
                "reason": document["phases"]["contract"]["says-hello[calm]"]["reason"],
                "severity": "critical",
                "status": "passed",
            },
        }
    }
    assert "please" in document["phases"]["contract"]["polite[calm]"]["reason"]
    # the same run blessed again: the same bytes (a baseline never drifts by itself)
    assert cli_run("baseline", "bless", str(results), "--commit", COMMIT).exit_code == 0
    assert path.read_text(encoding="utf-8") == text


def test_a_pull_request_is_judged_against_the_committed_baseline(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = run_agent(monkeypatch, "hello there", "main")
    assert cli_run("baseline", "bless", str(main), "--commit", COMMIT).exit_code == 0
    spec = "file:.flakestorm/baseline.json"
    # breaks one more cell: a new failure, named
    broken = run_agent(monkeypatch, "goodbye", "broken")
    done = cli_run("compare", "--baseline", spec, "--fail-on", "regression", str(broken))
    assert done.exit_code == 1, done.output
    assert "1 new failure vs the blessed baseline (3e0774a, 2026-11-27)" in done.output
    assert "new failure" in done.output and "says-hello[calm]" in done.output
    # keeps only the known failure: passes under fail-on: regression
    known = run_agent(monkeypatch, "hello again", "known")
    done = cli_run("compare", "--baseline", spec, "--fail-on", "regression", str(known))
    assert done.exit_code == 0, done.output
    assert "0 new failures vs the blessed baseline" in done.output
    # and fails under fail-on: any (its own gate)
    assert cli_run("compare", "--baseline", spec, str(known)).exit_code == 1


def test_a_stale_baseline_or_one_of_another_config_is_a_warning(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = run_agent(monkeypatch, "hello there", "main")
    assert cli_run("baseline", "bless", str(main), "--commit", COMMIT).exit_code == 0
    monkeypatch.setattr(clock, "today", lambda: TODAY + datetime.timedelta(days=45))
    config = repo / "flakestorm.yaml"
    config.write_text(config.read_text().replace("greet me", "greet me now"), encoding="utf-8")
    head = run_agent(monkeypatch, "hello there", "head")
    done = cli_run("compare", "--baseline", "file:.flakestorm/baseline.json", str(head))
    assert "is 45 days old (more than 30)" in done.output
    assert "was blessed from another config" in done.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "file:nope.json", "x.json"], "nope.json: no such baseline file"),
        (["--baseline", "nope.json", "x.json"], "expected file:PATH"),
        (["--baseline", "file:b.json", "a.json", "x.json"], "compare takes --baseline"),
        (["a.json"], "compare takes BASE.json HEAD.json (1 file(s) given)"),
    ],
)
def test_bad_baseline_arguments_are_usage_errors(
    repo: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    head = run_agent(monkeypatch, "hello", "head")
    args = [str(head) if a == "x.json" else a for a in args]
    done = cli_run("compare", *args)
    assert done.exit_code == 2 and message in done.output, done.output
    assert "Traceback" not in done.output


def test_bless_refuses_a_shard_and_what_is_not_a_baseline_is_named(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FS_TEST_REPLY", "hello")
    done = CliRunner().invoke(cli, ["contract", "run", "--output", "s1", "--shard", "1/2"])
    assert done.exit_code in (0, 1)
    done = cli_run("baseline", "bless", "s1/results.json")
    assert done.exit_code == 2 and "a shard's part of a run is not a baseline" in done.output
    (repo / "not.json").write_text('{"a": 1}', encoding="utf-8")
    head = run_agent(monkeypatch, "hello", "head")
    done = cli_run("compare", "--baseline", "file:not.json", str(head))
    assert done.exit_code == 2 and "not a blessed baseline" in done.output


def _action(repo: Path, inputs: Mapping[str, str]) -> tuple[int, str]:
    files = repo / "gh"
    files.mkdir(exist_ok=True)
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(repo),
        "GITHUB_OUTPUT": str(files / "output"),
        "GITHUB_STEP_SUMMARY": str(files / "summary"),
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_EVENT_NAME": "push",
        "INPUT_CONFIG": "flakestorm.yaml",
        "INPUT_COMMAND": "contract",
        "INPUT_COMMENT": "off",
        "INPUT_REPORT-DIR": "reports",
        **{f"INPUT_{k.upper()}": v for k, v in inputs.items()},
    }
    out = io.StringIO()
    code = entrypoint.main(env, GitHub(env, out=out))
    return code, out.getvalue()


def test_the_action_judges_a_run_against_the_committed_baseline(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = run_agent(monkeypatch, "hello there", "main")
    assert cli_run("baseline", "bless", str(main), "--commit", COMMIT).exit_code == 0
    inputs = {"BASELINE": "file:.flakestorm/baseline.json", "FAIL-ON": "regression"}
    monkeypatch.setenv("FS_TEST_REPLY", "hello again")
    code, log = _action(repo, inputs)
    assert code == 0, log
    summary = (repo / "gh" / "summary").read_text(encoding="utf-8")
    assert "Baseline: the blessed baseline (3e0774a, 2026-11-27), 0 days old." in summary
    monkeypatch.setenv("FS_TEST_REPLY", "goodbye")
    code, log = _action(repo, inputs)
    assert code == 1, log
    assert "1 new failure vs the blessed baseline (3e0774a, 2026-11-27)" in log
    # a baseline file that is not there: a notice, never a failure of the step
    code, log = _action(repo, {**inputs, "BASELINE": "file:missing.json"})
    assert code == 0, log
    assert "::notice title=flakestorm%3A no baseline::" in log and "missing.json" in log
    # weeks later, the summary says the baseline is stale (and the log warns)
    monkeypatch.setattr(clock, "today", lambda: TODAY + datetime.timedelta(days=45))
    monkeypatch.setenv("FS_TEST_REPLY", "hello again")
    code, log = _action(repo, inputs)
    assert code == 0, log
    summary = (repo / "gh" / "summary").read_text(encoding="utf-8")
    assert "45 days old, stale (more than 30): bless a newer run." in summary
    assert "::warning title=flakestorm%3A baseline::" in log
