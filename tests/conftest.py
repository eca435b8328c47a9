"""Fixtures shared by the test modules (helpers that are not fixtures live in ``support/``)."""

from __future__ import annotations

import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest_plugins = ["support.proxy_rig"]
"""Fixtures of the chaos proxy's tests: ``upstream`` (the weather tool) and ``proxy`` (a chaos
proxy in front of it); a test module with fixtures of those names uses its own."""

_names = itertools.count()

WriteModule = Callable[[str], str]


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteModule]:
    """``write_module(source) -> name``: a uniquely named module in ``tmp_path``, importable
    for the test (and forgotten by ``sys.modules`` after it)."""
    monkeypatch.setattr(sys, "path", [str(tmp_path.resolve()), *sys.path])
    written: list[str] = []

    def write(source: str) -> str:
        name = f"fs_module_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)
