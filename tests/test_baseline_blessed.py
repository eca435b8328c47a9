"""A committed baseline (SPEC §14): bless a run, commit the file, judge later runs against it
with ``compare --baseline file:PATH`` and the action's ``baseline: file:PATH``."""

from __future__ import annotations

import datetime
import io
import json
import re
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.fake_judge import FakeJudge
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


def _blessed_text(repo: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A good blessed baseline of a run that passes (both cells), as `baseline bless` wrote
    it."""
    main = run_agent(monkeypatch, "hello there, please", "main")
    assert cli_run("baseline", "bless", str(main), "--commit", COMMIT).exit_code == 0
    return (repo / ".flakestorm" / "baseline.json").read_text(encoding="utf-8")


def _edited(text: str, edit: str) -> bytes:
    """The blessed baseline ``text`` spoilt as ``edit`` says."""
    if edit == "merge conflict":
        lines = text.splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if '"status"' in line)
        return "".join(
            [
                *lines[:at],
                "<<<<<<< HEAD\n",
                lines[at],
                "=======\n",
                lines[at].replace("passed", "failed"),
                ">>>>>>> theirs\n",
                *lines[at + 1 :],
            ]
        ).encode()
    if edit == "another shape":
        return b'{"a": 1}'
    if edit == "nested 200,000 deep":
        return b"[" * 200_000
    document = json.loads(text)
    cell = document["phases"]["contract"]["says-hello[calm]"]
    if edit == "a commit that is a number":
        document["blessed"]["commit"] = 123
    elif edit == "runs 7 of 5":
        cell["runs"] = [7, 5]
    elif edit == "runs nested 900 deep":  # JSON reads it; a message must say it in one line
        cell["runs"] = "RUNS"
        return dumps_text(document).replace('"RUNS"', "[" * 900 + "]" * 900).encode()
    elif edit == "no phases":
        document["phases"] = {}
    elif edit == "a misspelt phase":
        document["phases"] = {"contrakt": document["phases"]["contract"]}
    elif edit == "a status that is no status":
        cell["status"] = "ok"
    elif edit == "NaN":
        return dumps_text(document).replace('"score": 100.0', '"score": NaN').encode()
    elif edit == "1e999":
        return dumps_text(document).replace('"score": 100.0', '"score": 1e999').encode()
    elif edit == "a cell twice":
        body = dumps_text(document)
        entry = '"says-hello[calm]": {'
        assert entry in body
        return body.replace(
            entry,
            '"says-hello[calm]": {"reason": "", "severity": "critical", '
            '"status": "failed"}, ' + entry,
        ).encode()
    else:
        raise AssertionError(edit)
    return dumps_text(document).encode()


def dumps_text(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=True)


UNREADABLE = [
    ("merge conflict", ": line 15: a merge conflict marker (<<<<<<<)"),
    ("another shape", ": not a blessed baseline (no 'flakestorm_baseline' key)"),
    ("nested 200,000 deep", ": not JSON (nested too deeply)"),
    ("a commit that is a number", ": blessed.commit: 123 is not a string or null"),
    (
        "runs 7 of 5",
        ': phases.contract["says-hello[calm]"].runs: [7, 5] is not [passed, total] (whole '
        "numbers, 0 <= passed <= total, total at least 2)",
    ),
    (
        "runs nested 900 deep",
        ': phases.contract["says-hello[calm]"].runs: [a list of 1 item(s)] is not [passed, total]',
    ),
    ("no phases", ": phases: none (a blessed baseline holds at least one of"),
    (
        "a misspelt phase",
        ': phases: unknown phase "contrakt" (one of mutation, chaos, contract, replay); '
        "did you mean 'contract'?",
    ),
    (
        "a status that is no status",
        ': phases.contract["says-hello[calm]"].status: "ok" is not one of passed, failed, '
        "errored, skipped, not_run",
    ),
    ("NaN", ": not finite: NaN (a number must be finite)"),
    ("1e999", ": not finite: 1e999 (a number must be finite)"),
    ("a cell twice", ': the key "says-hello[calm]" appears twice in one object'),
]


@pytest.mark.parametrize(("edit", "message"), UNREADABLE, ids=[e for e, _ in UNREADABLE])
def test_compare_refuses_a_baseline_that_is_not_a_blessed_one(
    repo: Path, monkeypatch: pytest.MonkeyPatch, edit: str, message: str
) -> None:
    (repo / "bad.json").write_bytes(_edited(_blessed_text(repo, monkeypatch), edit))
    head = run_agent(monkeypatch, "goodbye", "head")  # both critical cells fail
    done = cli_run("compare", "--baseline", "file:bad.json", "--fail-on", "regression", str(head))
    assert done.exit_code == 2, done.output
    assert f"error: bad.json{message}" in done.output
    assert "Traceback" not in done.output and "internal error" not in done.output


def _outputs(repo: Path) -> dict[str, str]:
    text = (repo / "gh" / "output").read_text(encoding="utf-8")
    found = re.finditer(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", text, re.S | re.M)
    return {m[1]: m[3] for m in found}


@pytest.mark.parametrize(("edit", "message"), UNREADABLE, ids=[e for e, _ in UNREADABLE])
def test_the_action_fails_on_an_unreadable_baseline_and_writes_every_report(
    repo: Path, monkeypatch: pytest.MonkeyPatch, edit: str, message: str
) -> None:
    path = repo / ".flakestorm" / "baseline.json"
    path.write_bytes(_edited(_blessed_text(repo, monkeypatch), edit))
    monkeypatch.setenv("FS_TEST_REPLY", "goodbye")  # both critical cells fail
    inputs = {"BASELINE": "file:.flakestorm/baseline.json", "FAIL-ON": "regression"}
    code, log = _action(repo, inputs)
    # a config error, never "nothing is known, so no failure is new" (exit 0, passed=true)
    assert code == 2, log
    assert "Traceback" not in log and "internal error" not in log
    assert "::notice" not in log
    cause = f"the baseline file .flakestorm/baseline.json{message}"
    assert f"flakestorm: ERROR (exit 2: {cause}" in log, log
    assert f"::error title=flakestorm%3A config error::exit 2: {cause}" in log
    reports = repo / "reports"
    assert sorted(p.name for p in reports.iterdir()) == [
        "junit.xml",
        "report.html",
        "results.json",
        "summary.md",
    ]
    document = json.loads((reports / "results.json").read_text(encoding="utf-8"))
    assert document["exit_code"] == 1  # the run's own gate: two critical cells failed
    assert document["step"]["exit_code"] == 2 and cause in document["step"]["error"]
    summary = (repo / "gh" / "summary").read_text(encoding="utf-8")
    assert "## flakestorm: 💥 ERROR" in summary and "**Exit 2: a config error:**" in summary
    assert "could not carry the run out" not in summary
    outputs = _outputs(repo)
    assert outputs["passed"] == "false" and outputs["critical-failures"] == "2"
    assert outputs["report-dir"] == "reports" and outputs["score"] == "0.00"
    # `flakestorm report` renders the same verdict from the file
    again = cli_run("report", str(reports / "results.json"), "-f", "markdown", "-o", "again")
    assert again.exit_code == 0, again.output
    assert "**Exit 2: a config error:**" in (repo / "again" / "summary.md").read_text("utf-8")


JUDGED = """\
agent:
  type: python
  endpoint: "{module}:answer"
golden_prompts: ["greet me"]
contract:
  name: greetings
  invariants:
    - {{id: says-hello, type: contains, value: hello, severity: critical}}
    - id: kind
      type: llm_judge
      rubric: The reply is kind.
      severity: critical
      judge: {{base_url: "${{FS_JUDGE_URL}}", model: judge-1, api_key: k, timeout_s: 10}}
  chaos_matrix:
    - name: calm
"""


def test_a_run_that_errored_is_no_baseline_and_an_old_errored_one_hides_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flakestorm.baseline.blessed import bless, dumps
    from flakestorm.cli.report import read_results

    module = next(p.stem for p in repo.glob("blessed_agent_*.py"))
    (repo / "flakestorm.yaml").write_text(JUDGED.format(module=module), encoding="utf-8")
    with FakeJudge("error", keyword="fine") as judge:  # the judge is down: HTTP 500
        monkeypatch.setenv("FS_JUDGE_URL", judge.base_url)
        monkeypatch.setenv("FS_TEST_REPLY", "hello there")
        done = CliRunner().invoke(cli, ["contract", "run", "--output", "down"])
        assert done.exit_code == 3, done.output
        down = Path("down") / "results.json"
        done = cli_run("baseline", "bless", str(down), "--commit", COMMIT)
        assert done.exit_code == 2, done.output
        assert "a run with errored cells is not a baseline" in done.output
        assert "errored: contract:kind[calm]. Fix what errored" in done.output
        assert not (repo / ".flakestorm" / "baseline.json").exists()
        # what `baseline bless` wrote of such a run before it refused them: kind[calm] errored
        old = bless(read_results(down), on=TODAY, commit=COMMIT, source=str(down))
        assert old["phases"]["contract"]["kind[calm]"]["status"] == "errored"
        (repo / ".flakestorm").mkdir()
        (repo / ".flakestorm" / "baseline.json").write_text(dumps(old), encoding="utf-8")
        # the judge is back and genuinely fails the reply (it lacks "fine")
        judge.mode = "well"
        done = CliRunner().invoke(cli, ["contract", "run", "--output", "head"])
        assert done.exit_code == 1, done.output
    spec = "file:.flakestorm/baseline.json"
    head = str(Path("head") / "results.json")
    done = cli_run("compare", "--baseline", spec, "--fail-on", "regression", head)
    assert done.exit_code == 1, done.output
    assert "1 new failure vs the blessed baseline (3e0774a, 2026-11-27)" in done.output
    assert "still failing" not in done.output
    assert "kind[calm]" in done.output


def test_a_baseline_with_a_byte_order_mark_is_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _blessed_text(repo, monkeypatch)  # both cells passed
    (repo / "bom.json").write_bytes(b"\xef\xbb\xbf" + text.encode())
    head = run_agent(monkeypatch, "goodbye", "head")
    done = cli_run("compare", "--baseline", "file:bom.json", "--fail-on", "regression", str(head))
    assert done.exit_code == 1, done.output
    assert "2 new failures vs the blessed baseline (3e0774a, 2026-11-27)" in done.output


def test_a_baseline_over_64_mib_is_refused_and_never_read_whole(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flakestorm.baseline.blessed import MAX_BYTES, BaselineFileError, load

    assert MAX_BYTES == 64 * 1024 * 1024
    text = _blessed_text(repo, monkeypatch)
    big = repo / "big.json"
    with big.open("wb") as file:  # a good baseline, then spaces to one byte over 64 MiB
        file.write(text.encode())
        file.truncate(MAX_BYTES + 1)
    head = run_agent(monkeypatch, "goodbye", "head")
    done = cli_run("compare", "--baseline", "file:big.json", str(head))
    assert done.exit_code == 2, done.output
    assert "error: big.json: over 67,108,864 bytes, more than a blessed baseline holds" in (
        done.output
    )
    # a file without end (its size unknown beforehand) is read no further than the cap
    with pytest.raises(BaselineFileError, match=r"^/dev/zero: over 1,000 bytes"):
        load(Path("/dev/zero"), max_bytes=1000)


def test_bless_into_a_place_that_cannot_be_written_is_a_usage_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = run_agent(monkeypatch, "hello there", "main")
    done = cli_run("baseline", "bless", str(results), "-o", "/proc/nope/x.json")
    assert done.exit_code == 2, done.output
    assert done.output.startswith("error: -o /proc/nope/x.json: cannot write the baseline there (")
    assert "Traceback" not in done.output
