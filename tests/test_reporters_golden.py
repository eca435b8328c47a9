"""Every reporter against its golden files (tests/golden/README.md: how to regenerate)."""

from __future__ import annotations

import pytest
from golden.regenerate import HERE, golden_names, render_golden

REGENERATE = ".venv/bin/python -m tests.golden.regenerate"


@pytest.mark.parametrize("name", golden_names())
def test_rendering_matches_the_golden_file(name: str) -> None:
    path = HERE / name
    assert path.exists(), f"{path} is missing: run `{REGENERATE}`"
    expected = path.read_bytes().decode("utf-8")
    actual = render_golden(name)
    assert actual == expected, f"{name} differs from its golden file: review, then `{REGENERATE}`"


def test_no_stale_golden_files() -> None:
    known = set(golden_names())
    stale = [
        p.name
        for p in HERE.iterdir()
        if p.is_file() and p.suffix in (".xml", ".md", ".html") and p.name != "README.md"
        if p.name not in known
    ]
    assert not stale, f"golden files no case renders: {stale}"
