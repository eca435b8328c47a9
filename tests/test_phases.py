"""The phase seam: a phase is one module plus one registration line, and the run loop,
scoring, every report and the action's outputs pick it up; the matrix runner's checks; the
chaos phase after the contract phase, and its score."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.quote_project import quote_project, run_config

from flakestorm.config import Config, Contract
from flakestorm.engine.matrix_plan import MatrixPlan, build_plan
from flakestorm.engine.phases.matrix import STATEFUL_WARNING, count_invocations, run_matrix
from flakestorm.engine.phases.phase import PhaseContext, PhasePlan, PhaseRequest
from flakestorm.engine.phases.registry import PHASES, register
from flakestorm.engine.runner import configured_phases, run_ci
from flakestorm.loader import LoadedConfig, load_config_text
from flakestorm.reporters import comment, html, junit, markdown, terminal
from flakestorm.reporters import json as json_report
from flakestorm.results.model import PhaseOutcome, PhaseScore, Status, from_document
from flakestorm.results.scoring import score_cells

AGENT = """
def answer(prompt):
    return "fine" if "smoke" not in prompt else ""
"""


class SmokePhase:
    """A throwaway phase: one probe that the agent answers with nothing (so it fails)."""

    name = "smoke"

    def configured(self, config: Config) -> bool:
        return True

    def weight(self, config: Config) -> float:
        return 0.5

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> MatrixPlan:
        contract = Contract.model_validate(
            {
                "name": "smoke",
                "invariants": [
                    {"id": "not-empty", "type": "output_not_empty", "probes": ["smoke test"]}
                ],
                "chaos_matrix": [{"name": "smoke"}],
            }
        )
        return build_plan(contract, [])

    def run(self, plan: PhasePlan, context: PhaseContext) -> PhaseOutcome:
        assert isinstance(plan, MatrixPlan)
        return run_matrix(self.name, plan, context, {})

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        return score_cells(outcome.cells)


@pytest.fixture
def smoke() -> Iterator[None]:
    register(SmokePhase())
    try:
        yield
    finally:
        del PHASES["smoke"]


def loaded_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LoadedConfig:
    (tmp_path / "smokebot.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = """
agent: {type: python, endpoint: "smokebot:answer"}
golden_prompts: ["hello"]
contract:
  name: c
  invariants: [{id: answers, type: output_not_empty, severity: critical}]
  chaos_matrix: [{name: calm}]
"""
    return load_config_text(text, base_dir=tmp_path)


def test_a_registered_phase_is_run_scored_weighted_and_reported_everywhere(
    smoke: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = loaded_config(tmp_path, monkeypatch)
    assert configured_phases(loaded) == ["contract", "smoke"]
    result = run_ci(loaded)

    assert list(result.phases) == ["contract", "smoke"]
    smoke_outcome = result.phases["smoke"]
    assert smoke_outcome.score.score == 0.0
    assert result.phases["contract"].score.score == 100.0
    # weighted: contract 0.35 (the config's default) and smoke 0.5
    assert result.overall.weights["smoke"] == 0.5
    assert result.overall.phases_ran == ("contract", "smoke")
    assert result.overall.score == round(100 * 0.35 / 0.85, 2)
    assert result.exit_code == 0  # the smoke cell is medium: no critical failure

    assert from_document(json.loads(json_report.render(result))) == result
    summary = markdown.render(result)
    assert "### Smoke: 0.00 (passed)" in summary and "smoke: 0.00 (passed)" in summary
    assert 'name="smoke"' in junit.render(result)
    page = html.render(result)
    assert 'id="smoke-matrix"' in page and 'id="smoke-score"' in page
    assert "smoke: 0.00" in comment.render(result, None, "k")
    assert "Smoke score: 0.00" in terminal.render(result)


def test_a_section_without_a_phase_is_refused_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flakestorm.engine.phases.registry import PHASES
    from flakestorm.errors import UsageError

    loaded = loaded_config(tmp_path, monkeypatch)
    monkeypatch.delitem(PHASES, "replay")  # a version that cannot run the replay phase
    config = loaded.config.model_copy(update={"replays": {"sessions": []}})
    with pytest.raises(UsageError, match=r"`replays` \(the replay phase\)"):
        configured_phases(LoadedConfig(**{**loaded.__dict__, "config": config}))


@pytest.mark.parametrize(("stateful", "warned"), [(True, True), (False, False)])
def test_the_stateful_warning_is_exact_and_only_when_answers_differ(
    stateful: bool, warned: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"statebot_{stateful}"
    body = "import itertools\nn = itertools.count()\n\ndef answer(prompt):\n"
    body += "    return f'answer {next(n)}'\n" if stateful else "    return 'answer 0'\n"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = f"""
agent: {{type: python, endpoint: "{name}:answer"}}
golden_prompts: ["p"]
contract:
  name: c
  invariants: [{{id: a, type: completes}}]
  chaos_matrix: [{{name: calm}}]
"""
    result = run_ci(load_config_text(text, base_dir=tmp_path))
    assert result.phases["contract"].warnings == ((STATEFUL_WARNING,) if warned else ())
    assert STATEFUL_WARNING == (
        "Warning: No reset_endpoint configured. Contract matrix cells may share state. "
        "Results may be contaminated. Add reset_endpoint to your config for accurate isolation."
    )


def test_invocations_are_counted_by_the_run_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = loaded_config(tmp_path, monkeypatch)
    config = loaded.config
    assert config.contract is not None
    plan = build_plan(config.contract, config.golden_prompts)
    count = count_invocations(plan, config)
    result = run_ci(loaded)
    # one cell of one prompt, plus the stateful check's two calls
    assert count.invocations == 3 == result.invocations


# --------------------------------------------------------------------------- the chaos phase


def test_the_chaos_phase_does_not_reuse_the_contract_phase_interactions(tmp_path: Path) -> None:
    # the contract has a scenario named like the chaos phase's one ("chaos") and the chaos
    # phase's invariant ids are the defaults; its cells must get only their own calls
    path = quote_project(
        tmp_path,
        [{"name": "chaos", "tool_faults": [{"tool": "get_quote", "mode": "error"}]}],
        invariants=[{"id": "completes", "type": "completes"}],
        chaos={"tool_faults": [{"tool": "get_quote", "mode": "slow", "delay_ms": 1}]},
    )
    result = run_config(path, ("contract", "chaos"))
    assert "chaos" in result.phases
    for cell in result.phases["chaos"].cells:
        assert len(cell.calls) == 2, (cell.id, cell.calls)
        assert cell.faults_fired == ("tool_faults[0] slow(1 ms) on get_quote",)


def test_the_chaos_phase_score_honours_min_pass(
    tmp_path: Path, write_module: Callable[[str], str]
) -> None:
    # the first of three repeats of each prompt fails (the agent answers "" the first time it
    # sees a prompt): 2 of 3 runs hold, min_pass 2 -> the cell passes, and so do the prompts
    mod = write_module(
        """
        import threading
        SEEN = {}
        LOCK = threading.Lock()
        def answer(prompt):
            with LOCK:
                n = SEEN[prompt] = SEEN.get(prompt, 0) + 1
            return '' if n == 1 else 'fine'
        """
    )
    doc = {
        "agent": {"type": "python", "endpoint": f"{mod}:answer"},
        "golden_prompts": ["a", "b"],
        "invariants": [{"type": "output_not_empty"}],
        "chaos": {"context_attacks": [{"type": "memory_poisoning", "payload": "x"}]},
        "advanced": {"repeat": 3, "min_pass": 2, "concurrency": 1},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_config(path, ("chaos",))
    assert "chaos" in result.phases
    assert [c.status for c in result.phases["chaos"].cells] == [Status.PASSED]
    assert result.phases["chaos"].cells[0].flaky
    assert result.phases["chaos"].score.score == 100.0
