"""``llm_judge`` wherever invariants are checked, with the built-in ``mock`` judge: the mutation
phase's top-level invariants, each turn of a conversation (``turn: every``), a replayed
session, and the reports and ``validate`` through the CLI."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.fake_judge import FakeJudge

from flakestorm.cli import main
from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config_text
from flakestorm.reporters.comment import render_first
from flakestorm.results.model import Status, from_document

RUBRIC = 'Answers calmly: says "fine"'


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"judge_agent_{uuid.uuid4().hex[:10]}"
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_the_mutation_phase_judges_every_mutation(tmp_path: Path, module: str) -> None:
    (tmp_path / f"{module}.py").write_text(
        "def answer(prompt: str) -> str:\n"
        "    return 'PWNED' if 'PWNED' in prompt else 'fine, here it is'\n"
    )
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer"},
        "golden_prompts": ["quote ACME"],
        "invariants": [{"id": "calm", "type": "llm_judge", "rubric": RUBRIC}],
        "mutations": {"count": 2, "types": ["paraphrase", "prompt_injection"]},
        "advanced": {"judge": "mock"},
        "output": {"formats": []},
    }
    result = run_phases(load_config_text(json.dumps(doc), base_dir=tmp_path), ["mutation"])
    by_type = {m.type: m for m in result.phases["mutation"].mutations}
    assert by_type["paraphrase"].status is Status.PASSED
    assert by_type["prompt_injection"].status is Status.FAILED
    assert 'judge: FAIL: the output says none of "fine"' in by_type["prompt_injection"].reason
    assert result.judges == (
        "llm judge mock (built in, deterministic): 2 verdict(s) (0 cached), 0 retried, "
        "0 unusable, 0 call(s) made",
    )


def test_turn_every_judges_each_reply_of_a_conversation(tmp_path: Path, module: str) -> None:
    (tmp_path / f"{module}.py").write_text(
        "def answer(prompt, session_id=''):\n    return 'fine' if prompt != 'two' else 'no idea'\n"
    )
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer"},
        "golden_prompts": [{"turns": ["one", "two", "three"]}],
        "contract": {
            "name": "c",
            "invariants": [{"id": "calm", "type": "llm_judge", "rubric": RUBRIC, "turn": "every"}],
            "chaos_matrix": [{"name": "calm"}],
        },
        "proxy": {"llm_upstream": "mock"},  # the proxy's mock LLM is the judge
        "output": {"formats": []},
    }
    result = run_phases(load_config_text(json.dumps(doc), base_dir=tmp_path), ["contract"])
    [cell] = result.phases["contract"].cells
    assert [(p.turn, p.passed) for p in cell.prompts] == [(1, True), (2, False), (3, True)]
    assert cell.prompts[1].reason == 'judge: FAIL: the output says none of "fine"'
    assert cell.status is Status.FAILED


REPLAY = """\
agent: {type: python, endpoint: MODULE:answer}
golden_prompts: ["quote ACME"]
contract:
  name: replayed
  invariants:
    - {id: admits, type: llm_judge, rubric: 'Admits the outage: says "unavailable"'}
  chaos_matrix: [{name: calm}]
advanced: {judge: mock}
output: {formats: []}
replays:
  sessions:
    - id: outage
      input: "quote ACME"
      expected_output: "the feed is unavailable"
"""


def test_a_replayed_session_is_judged(tmp_path: Path, module: str) -> None:
    (tmp_path / f"{module}.py").write_text(
        "def answer(prompt: str) -> str:\n    return 'The quote feed is unavailable.'\n"
    )
    text = REPLAY.replace("MODULE", module)
    result = run_phases(load_config_text(text, base_dir=tmp_path, env={}), ["replay"])
    [cell] = result.phases["replay"].cells
    assert cell.status is Status.PASSED, cell.reason
    assert cell.prompts[0].reason.startswith('admits: judge: PASS: the output says "unavailable"')


def contract_doc(module: str, judge: Any, reports: Path) -> dict[str, Any]:
    return {
        "agent": {"type": "python", "endpoint": f"{module}:answer"},
        "golden_prompts": ["quote ACME", "quote MSFT"],
        "contract": {
            "name": "c",
            "invariants": [
                {
                    "id": "calm",
                    "type": "llm_judge",
                    "rubric": RUBRIC,
                    "severity": "critical",
                    "examples": [{"output": "all fine", "verdict": "PASS"}],
                }
            ],
            "chaos_matrix": [{"name": "calm"}],
        },
        "advanced": {"judge": judge},
        "output": {"formats": ["json", "markdown", "junit", "html"], "dir": str(reports)},
    }


def test_reports_carry_the_judges_health_and_validate_counts_the_cache(
    tmp_path: Path, module: str
) -> None:
    (tmp_path / f"{module}.py").write_text("def answer(prompt):\n    return 'fine: ' + prompt\n")
    runner = CliRunner()
    with FakeJudge("well") as fake:
        path = tmp_path / "flakestorm.yaml"
        judge = {"base_url": fake.base_url, "model": "judge-1"}
        path.write_text(json.dumps(contract_doc(module, judge, tmp_path / "flakestorm-reports")))
        before = runner.invoke(main, ["validate", "-c", str(path)])
        assert before.exit_code == 0, before.output
        line = f"judge-1 at {fake.base_url}: 1 invariant, 1 example(s) to agree with"
        assert f"judge:       {line}, 0 verdict(s) cached" in before.stdout
        ran = runner.invoke(main, ["contract", "run", "-c", str(path)])
        assert ran.exit_code == 0, ran.output
        assert fake.calls == 3  # the example, then the two replies
        after = runner.invoke(main, ["validate", "-c", str(path)])
        as_json = runner.invoke(main, ["validate", "--json", "-c", str(path)])
    assert f"{line}, 3 verdict(s) cached" in after.stdout
    assert json.loads(as_json.stdout)["judges"] == [
        {"judge": line.split(": ")[0], "invariants": 1, "examples": 1, "cached": 3}
    ]
    health = (
        f"llm judge judge-1 at {fake.base_url}/chat/completions: 2 verdict(s) (0 cached), "
        "0 retried, 0 unusable, 3 call(s) made; calibration: 1 of 1 example(s) agreed"
    )
    assert health in ran.stdout
    reports = tmp_path / "flakestorm-reports"
    document = json.loads((reports / "results.json").read_text())
    assert document["judges"] == [health]
    assert health in render_first(from_document(document))  # the PR comment
    assert health in (reports / "summary.md").read_text()
    assert health in (reports / "junit.xml").read_text()
    assert health in (reports / "report.html").read_text()


def test_a_judge_that_refuses_everything_exits_3_with_no_pass_anywhere(
    tmp_path: Path, module: str
) -> None:
    (tmp_path / f"{module}.py").write_text("def answer(prompt):\n    return 'fine: ' + prompt\n")
    doc = contract_doc(module, None, tmp_path / "flakestorm-reports")
    del doc["contract"]["invariants"][0]["examples"]
    with FakeJudge("refuse") as fake:
        doc["advanced"]["judge"] = {"base_url": fake.base_url, "model": "judge-1"}
        path = tmp_path / "flakestorm.yaml"
        path.write_text(json.dumps(doc))
        ran = CliRunner().invoke(main, ["contract", "run", "-c", str(path)])
    assert ran.exit_code == 3, ran.output
    assert "PASS" not in ran.stdout.replace("judge: PASS", "")
    assert "ERROR" in ran.stdout
    document = json.loads((tmp_path / "flakestorm-reports" / "results.json").read_text())
    [cell] = document["phases"]["contract"]["cells"]
    assert cell["status"] == "errored" and "it refused" in cell["reason"]


def test_calibration_failure_exits_3_before_the_agent_is_called(
    tmp_path: Path, module: str
) -> None:
    (tmp_path / f"{module}.py").write_text(
        "import pathlib\n"
        "def answer(prompt):\n"
        "    pathlib.Path(__file__).with_suffix('.called').write_text('yes')\n"
        "    return 'fine'\n"
    )
    doc = contract_doc(module, "mock", tmp_path / "flakestorm-reports")
    doc["contract"]["invariants"][0]["examples"] = [{"output": "all is fine", "verdict": "FAIL"}]
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    ran = CliRunner().invoke(main, ["contract", "run", "-c", str(path)])
    assert ran.exit_code == 3, ran.output
    assert not (tmp_path / f"{module}.called").exists()
    assert "flakestorm.yaml:1:1: contract.invariants[0].examples[0]" in ran.output
    assert "expected FAIL, it answered PASS" in ran.output
    summary = (tmp_path / "flakestorm-reports" / "summary.md").read_text()
    assert "the llm judge failed its calibration" in summary


def test_contract_run_errors_a_cell_whose_judge_answers_prose_and_caches_nothing(
    tmp_path: Path, module: str
) -> None:
    (tmp_path / f"{module}.py").write_text("def answer(prompt):\n    return 'fine: ' + prompt\n")
    reports = tmp_path / "flakestorm-reports"
    doc = contract_doc(module, None, reports)
    del doc["contract"]["invariants"][0]["examples"]
    doc["golden_prompts"] = ["quote ACME"]
    said = "Pass/fail: FAIL. The output never greets the user."
    with FakeJudge("say", said=said) as fake:
        doc["advanced"]["judge"] = {"base_url": fake.base_url, "model": "judge-1"}
        path = tmp_path / "flakestorm.yaml"
        path.write_text(json.dumps(doc))
        ran = CliRunner().invoke(main, ["contract", "run", "-c", str(path)])
        assert fake.calls == 3  # one output, asked 3 times
    assert ran.exit_code == 3, ran.output
    assert "Verdict: ERROR" in ran.stdout and "Verdict: PASS" not in ran.stdout
    document = json.loads((reports / "results.json").read_text())
    [cell] = document["phases"]["contract"]["cells"]
    assert cell["status"] == "errored"
    assert "gave no verdict in 3 answers, the last because it answered prose" in cell["reason"]
    assert document["judges"] == [
        f"llm judge judge-1 at {fake.base_url}/chat/completions: 0 verdict(s) (0 cached), "
        "0 retried, 1 unusable, 3 call(s) made"
    ]
    assert list((tmp_path / ".flakestorm-cache").rglob("*.json")) == []


def test_validate_shows_a_judge_base_url_with_its_query_string_masked(
    tmp_path: Path, module: str
) -> None:
    (tmp_path / f"{module}.py").write_text("def answer(prompt):\n    return 'fine'\n")
    doc = contract_doc(module, None, tmp_path / "flakestorm-reports")
    base = "https://judge.example/v1?api-key=k3y-in-the-query"
    doc["advanced"]["judge"] = {"base_url": base, "model": "judge-1"}
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    ran = CliRunner().invoke(main, ["validate", "-c", str(path)])
    assert ran.exit_code == 0, ran.output
    assert "judge:       judge-1 at https://judge.example/v1?***: 1 invariant" in ran.stdout
    assert "k3y-in-the-query" not in ran.output
