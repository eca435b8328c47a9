"""The terminal report: untrusted text defused for CI logs."""

from __future__ import annotations

import pytest

from flakestorm.reporters.terminal import safe

LEGACY = [
    "x ##[error]pwned",
    "##[set-output name=passed;]true",
    "see ##[stop-commands]tok then",
    "a ##[add-mask]hello",
]


@pytest.mark.parametrize("text", LEGACY)
def test_safe_defuses_the_legacy_workflow_command_form(text: str) -> None:
    """The runner also parses ``##[command]data`` found *anywhere* in a line
    (``ActionCommand.TryParse``), ``stop-commands`` and ``set-output`` included."""
    assert "##[" not in safe(text)
