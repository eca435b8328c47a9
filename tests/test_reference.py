"""The config reference: complete, in step with the model, and committed up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

from flakestorm.authoring import reference
from flakestorm.config import (
    ContextAttackType,
    InvariantType,
    LlmFaultMode,
    MutationType,
    ToolFaultMode,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "config-reference.md"


def test_every_field_and_enum_value_is_described() -> None:
    problems = reference.description_problems()
    assert problems == [], (
        "flakestorm/authoring/reference.py is out of step with flakestorm/config/:\n  "
        + "\n  ".join(problems)
    )


def test_a_stale_description_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {**reference.FIELD_DESCRIPTIONS, "agent.no_such_field": "gone"}
    del table["agent.timeout"]
    monkeypatch.setattr(reference, "FIELD_DESCRIPTIONS", table)
    problems = reference.description_problems()
    assert any("agent.timeout" in p and "no description" in p for p in problems)
    assert any("agent.no_such_field" in p and "does not exist" in p for p in problems)


def test_committed_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == reference.render(), (
        "docs/config-reference.md is stale; regenerate it with "
        "`python -m flakestorm.authoring.reference > docs/config-reference.md`"
    )


def test_reference_covers_the_vocabularies() -> None:
    text = reference.render()
    assert reference.EDITOR_HEADER in text
    for section in ("agent", "contract.chaos_matrix[]", "scoring.weights", "advanced"):
        assert f"## `{section}`" in text
    for enum in (InvariantType, MutationType, ToolFaultMode, LlmFaultMode, ContextAttackType):
        for member in enum:
            assert f"| `{member.value}` |" in text, member
    assert "legacy_form" not in text
    assert "(undocumented)" not in text


def test_invariant_table_lists_type_fields() -> None:
    text = reference.render()
    assert "| `regex` | `pattern` |" in text
    assert "| `similarity` | `expected`, `threshold` (optional) |" in text
