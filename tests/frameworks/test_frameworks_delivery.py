"""A fault that matched a call but could not be applied is not delivered (SPEC §10): the
scenario's cells are ERRORED with the reason and the run exits 3, never a pass."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flakestorm.engine.runner import run_ci
from flakestorm.loader import load_config_text
from flakestorm.results.model import Status

AGENT = '''
def llm(messages, stream=False):
    """An LLM callable that streams plain text deltas: a stream flakestorm cannot edit."""
    def deltas():
        yield "Paris is "
        yield "sunny today"
    return deltas() if stream else "Paris is sunny today"

def answer(prompt):
    return "".join(llm([{"role": "user", "content": prompt}], stream=True))
'''

CONFIG = """
agent: {type: python, endpoint: "streambot:answer", llm: "streambot:llm"}
golden_prompts: ["Weather in Paris?"]
contract:
  name: weather
  invariants: [{id: answers, type: output_not_empty, severity: critical}]
  chaos_matrix:
    - {name: calm}
    - name: cut short
      llm_faults: [{mode: truncated_response, max_tokens: 1}]
"""

REASON = (
    "fault not delivered: llm_faults[0] truncated_response(1 tokens): it matched a call but "
    "could not be applied: the LLM callable returned a generator, a stream flakestorm cannot "
    "edit (it edits the OpenAI and Anthropic SDKs' streams and whole replies)"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "streambot.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "flakestorm.yaml").write_text(CONFIG)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "streambot", raising=False)
    return tmp_path


def test_an_unapplied_fault_errors_its_scenario_with_the_reason(project: Path) -> None:
    result = run_ci(load_config_text(CONFIG, base_dir=project))
    outcome = result.phases["contract"]
    by_scenario = {cell.scenario: cell for cell in outcome.cells}
    assert by_scenario["calm"].status is Status.PASSED
    cut = by_scenario["cut short"]
    assert cut.status is Status.ERRORED and cut.reason == REASON
    assert cut.checked is Status.PASSED  # the invariant held: the fault never reached the agent
    info = next(s for s in outcome.scenarios if s.name == "cut short")
    assert info.undelivered == ("llm_faults[0] truncated_response(1 tokens)",)
    assert result.exit_code == 3


def test_the_cli_exits_3_and_the_report_says_why(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flakestorm", "contract", "run", "-c", "flakestorm.yaml"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads((project / "flakestorm-reports" / "results.json").read_text())
    cells = report["phases"]["contract"]["cells"]
    assert [c["status"] for c in cells if c["scenario"] == "cut short"] == ["errored"]
    assert "could not be applied" in done.stdout
