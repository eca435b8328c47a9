"""``flakestorm contract run`` on a config document, as a user runs it: the real CLI in a
process of its own (the test run's ``PYTHONPATH``, so the flakestorm under test), in a folder
of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PYTHONPATH = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}


def contract_run(tmp_path: Path, doc: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    """The run of ``doc`` written to ``tmp_path/flakestorm.yaml``: its exit code, its output
    (stdout then stderr) and its results.json."""
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **PYTHONPATH},
        timeout=240,
    )
    results = json.loads((tmp_path / "flakestorm-reports" / "results.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, results
