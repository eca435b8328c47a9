"""Config -> cells: order, prompts, applicability, and invariants without prompts refused."""

from __future__ import annotations

import pytest

from flakestorm.config import Contract
from flakestorm.errors import UsageError
from flakestorm.plan import build_plan


def contract(**extra: object) -> Contract:
    data = {
        "name": "c",
        "invariants": [
            {"id": "cite", "type": "regex", "pattern": "source", "severity": "critical"},
            {"id": "leak", "type": "excludes_pattern", "patterns": ["SYSTEM"], "probes": ["p1"]},
            {"id": "same", "type": "behavior_unchanged", "when": "any_chaos_active"},
        ],
        "chaos_matrix": [
            {"name": "calm"},
            {"name": "poisoned", "context_attacks": [{"type": "memory_poisoning", "payload": "x"}]},
        ],
    }
    data.update(extra)
    return Contract.model_validate(data)


def test_cells_are_invariant_major_with_probes_replacing_golden_prompts() -> None:
    plan = build_plan(contract(), ["g1", "g2"])
    assert [c.id for c in plan.cells] == [
        "cite[calm]",
        "cite[poisoned]",
        "leak[calm]",
        "leak[poisoned]",
        "same[calm]",
        "same[poisoned]",
    ]
    assert [c.index for c in plan.cells] == list(range(6))
    assert plan.cells[0].prompts == ("g1", "g2")
    assert plan.cells[2].prompts == ("p1",)


def test_when_decides_applicability_and_baselines() -> None:
    plan = build_plan(contract(), ["g1", "g2"])
    assert [c.applicable for c in plan.cells] == [True, True, True, True, False, True]
    assert plan.baselines == ("g1", "g2")


def test_an_invariant_without_any_prompt_is_refused() -> None:
    with pytest.raises(UsageError, match="'cite' has no prompts"):
        build_plan(contract(), [])
