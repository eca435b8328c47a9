"""Result values and the versioned results.json document."""

from __future__ import annotations

import json
from pathlib import Path

from support.quote_project import quote_project, run_config

from flakestorm.results.model import from_document, to_document


def test_results_json_round_trips_a_run_with_both_phases(tmp_path: Path) -> None:
    path = quote_project(
        tmp_path,
        [
            {"name": "calm"},
            {"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]},
        ],
        chaos={"tool_faults": [{"tool": "get_quote", "mode": "malformed"}]},
    )
    result = run_config(path, ("contract", "chaos"))
    doc = json.loads(json.dumps(to_document(result)))
    assert from_document(doc) == result
