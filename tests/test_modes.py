"""Fault modes as registered units: every mode of both enums has one."""

from __future__ import annotations

import pytest

from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.modes import Fields, field_names, registry
from flakestorm.chaos.tool_modes import TOOL_MODES
from flakestorm.config import LlmFaultMode, ToolFaultMode

# --------------------------------------------------------------------------- the registries


def test_every_mode_of_both_enums_is_registered() -> None:
    assert set(TOOL_MODES) == set(ToolFaultMode)
    assert set(LLM_MODES) == set(LlmFaultMode)


def test_a_registry_refuses_a_mode_twice() -> None:
    with pytest.raises(ValueError, match="'slow' is registered twice"):
        registry([(ToolFaultMode.SLOW, 1), (ToolFaultMode.SLOW, 2)])


def test_field_names_are_every_units_fields() -> None:
    assert field_names(TOOL_MODES.values()) == {"delay_ms", "message", "error_code", "payload"}
    assert field_names(LLM_MODES.values()) == {"delay_ms", "max_tokens", "drift_type"}
    assert Fields(("a",), ("b", "c")).names == ("a", "b", "c")
