"""Under ``CI=true`` a test that needs what the machine lacks fails; elsewhere it skips."""

from __future__ import annotations

import pytest
from support.unavailable import unavailable


def test_a_missing_engine_skips_on_a_developers_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="a Docker engine is not available: no"):
        unavailable("a Docker engine", "no /var/run/docker.sock")


def test_a_missing_engine_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="tests may not skip there"):
        unavailable("chromium", "apt-get failed")
