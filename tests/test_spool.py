"""Cells streamed to disk as they finish (SPEC §9: memory flat in the run's size): the outcome's
cells read back from the spool, redacted, and reports rendered from them as from a tuple."""

from __future__ import annotations

import gc
import io
import json
from pathlib import Path

from flakestorm.loader import load_config
from flakestorm.redaction import Redactor
from flakestorm.reporters import json as json_report
from flakestorm.reports import write_reports
from flakestorm.results import CellResult, Status, from_document, to_document
from flakestorm.runner import Overrides, run_phases
from flakestorm.spool import CellSpool, SpooledCells


def cell(index: int, reason: str = "held") -> CellResult:
    return CellResult(index, f"inv{index}", "calm", "high", Status.PASSED, reason)


def test_cells_come_back_in_index_order_and_a_rewrite_replaces(tmp_path: Path) -> None:
    spool = CellSpool(tmp_path, Redactor(["hunter22"]))
    spool.extend([cell(2), cell(0, "password hunter22"), cell(1)])
    spool.add(cell(2, "settled"))
    cells = spool.cells
    assert [c.index for c in cells] == [0, 1, 2]
    assert cells[0].reason == "password ***"
    assert cells[-1].reason == "settled"
    assert cells == (cell(0, "password ***"), cell(1), cell(2, "settled"))
    assert cells[1:] == (cell(1), cell(2, "settled"))
    assert list(tmp_path.iterdir()) == []  # an anonymous file: nothing is left behind


def test_the_spool_closes_its_file_when_its_cells_are_gone(tmp_path: Path) -> None:
    spool = CellSpool(tmp_path)
    spool.add(cell(0))
    handle = spool._file
    del spool
    gc.collect()
    assert handle.closed


AGENT = """
def answer(prompt):
    return "the token is s3cr3t-value " + prompt
"""


def test_a_runs_cells_are_spooled_redacted_and_reported_as_usual(tmp_path: Path) -> None:
    (tmp_path / "spool_agent.py").write_text(AGENT)
    doc = {
        "agent": {"type": "python", "endpoint": "spool_agent:answer"},
        "golden_prompts": ["one", "two", "${TOKEN}"],
        "contract": {
            "name": "c",
            "invariants": [
                {"id": "answers", "type": "output_not_empty"},
                {"id": "short", "type": "contains", "value": "nothing"},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {"name": "p", "context_attacks": [{"type": "memory_poisoning", "payload": "x"}]},
            ],
        },
    }
    (tmp_path / "flakestorm.yaml").write_text(json.dumps(doc))
    loaded = load_config(tmp_path / "flakestorm.yaml", env={"TOKEN": "s3cr3t-value"})
    out = tmp_path / "out"
    result = run_phases(loaded, ["contract"], Overrides(output_dir=str(out)))
    cells = result.phases["contract"].cells
    assert isinstance(cells, SpooledCells)
    assert [c.id for c in cells] == ["answers[calm]", "answers[p]", "short[calm]", "short[p]"]
    assert "s3cr3t" not in str([p.output for c in cells for p in c.prompts])
    assert result.phases["contract"].score.counts["failed"] == 2

    streamed = io.StringIO()
    json_report.write(result, streamed)
    assert streamed.getvalue() == json_report.render(result)
    write_reports(result, out)
    written = (out / "results.json").read_text()
    assert "s3cr3t" not in written
    again = from_document(json.loads(written))
    assert again.phases["contract"].cells == tuple(cells)
    assert to_document(again) == json.loads(written)
    assert sorted(p.name for p in out.iterdir()) == [
        "junit.xml",
        "report.html",
        "results.json",
        "summary.md",
    ]
