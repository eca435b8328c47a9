"""`flakestorm report`: re-render any format from a results.json."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from golden.cases import failing

from flakestorm.cli import main
from flakestorm.reporters import json as json_report
from flakestorm.reporters.comment import parse_state


@pytest.fixture
def results(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "results.json"
    path.parent.mkdir()
    path.write_text(json_report.render(failing()), encoding="utf-8")
    return path


def test_default_writes_every_format_beside_the_json(results: Path) -> None:
    before = results.read_bytes()
    os.utime(results, (1_000_000_000, 1_000_000_000))
    outcome = CliRunner().invoke(main, ["report", str(results)])
    assert outcome.exit_code == 0, outcome.output
    names = sorted(p.name for p in results.parent.iterdir())
    assert names == ["junit.xml", "report.html", "results.json", "summary.md"]
    ET.parse(results.parent / "junit.xml")
    assert (results.parent / "summary.md").read_text(encoding="utf-8").startswith("## flakestorm")
    # the results.json read is the input: left as it is, not written again
    assert results.read_bytes() == before and results.stat().st_mtime == 1_000_000_000
    assert f"kept {results}: it is an input of this report, never rewritten" in outcome.output
    assert f"wrote {results.parent / 'junit.xml'}" in outcome.output


def test_chosen_formats_into_another_directory(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    outcome = CliRunner().invoke(
        main, ["report", str(results), "--format", "comment", "-f", "junit", "--output", str(out)]
    )
    assert outcome.exit_code == 0, outcome.output
    assert sorted(p.name for p in out.iterdir()) == ["comment.md", "junit.xml"]
    assert parse_state((out / "comment.md").read_text(encoding="utf-8")) is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        (b"\xff\xfe", "not UTF-8"),
        (b"{not json", "not JSON"),
        (b"[]", "not a results document"),
        (b'{"schema_version": 99}', "schema_version 99 is not supported"),
        (b'{"schema_version": 2}', "malformed"),
    ],
)
def test_unreadable_results_are_a_usage_error(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_bytes(content)
    outcome = CliRunner().invoke(main, ["report", str(path)])
    assert outcome.exit_code == 2
    assert message in outcome.output
    assert "Traceback" not in outcome.output


def test_an_unknown_format_is_a_usage_error(results: Path) -> None:
    outcome = CliRunner().invoke(main, ["report", str(results), "--format", "pdf"])
    assert outcome.exit_code == 2
