"""What stops new invocations besides a signal (:mod:`flakestorm.engine.budget`): a config that
reads the agent's reply wrong. The agent answers; ``agent.response_path`` is not in its reply:
the run stops at that first reply and exits 3 with one located error (SPEC §13), instead of a
column of cells FAILED as if the agent had not answered.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.server import LoopbackServer, Request, Response

from flakestorm.cli import main

CONFIG = """\
agent:
  endpoint: {url}/chat
  response_path: data.answer
golden_prompts: ["What is AAPL?", "And MSFT?"]
output: {{dir: {out}, formats: [json, markdown]}}
advanced: {{concurrency: 2}}
contract:
  name: c
  invariants:
    - {{id: answers, type: output_not_empty, severity: critical}}
    - {{id: quotes, type: contains, value: "123"}}
  chaos_matrix:
    - name: calm
    - name: calm-too
"""


@pytest.fixture
def agent() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda r: Response.json({"data": {"result": "123.45"}})) as server:
        yield server


def test_a_response_path_missing_from_the_first_reply_stops_the_run_with_one_located_error(
    agent: LoopbackServer, tmp_path: Path
) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text(CONFIG.format(url=agent.url, out=tmp_path / "reports"))
    result = CliRunner().invoke(main, ["contract", "run", "-c", str(config)])
    assert result.exit_code == 3, result.output
    located = 'flakestorm.yaml:3:1: agent.response_path: "data.answer" not found in the reply'
    assert result.output.count(located) == 1, result.output
    assert "the agent answered, and the config reads its reply wrong" in result.output
    assert "PASS" not in result.output.split("Verdict")[-1]
    # it stopped at the first reply: not the 8 invocations of the matrix and its check
    assert len(agent.requests) <= 3
    doc = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert doc["stop_reason"] == "response_path" and doc["exit_code"] == 3
    statuses = {c["status"] for c in doc["phases"]["contract"]["cells"]}
    assert "failed" not in statuses  # nothing is blamed on the agent
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "agent.response\\_path is not in the agent's first reply" in summary


def test_once_a_reply_was_read_well_a_reply_without_the_path_errors_its_cell_only(
    tmp_path: Path,
) -> None:
    lock = threading.Lock()
    sent: list[str] = []

    def answer(request: Request) -> Response:
        with lock:
            sent.append(request.json()["input"])
            if len(sent) <= 2:  # the stateful check's two replies are read well
                return Response.json({"data": {"answer": "123.45"}})
        if "MSFT" in request.json()["input"]:
            return Response.json({"error": "no such ticker"})
        return Response.json({"data": {"answer": "123.45"}})

    with LoopbackServer(answer) as server:
        config = tmp_path / "flakestorm.yaml"
        config.write_text(CONFIG.format(url=server.url, out=tmp_path / "reports"))
        result = CliRunner().invoke(main, ["contract", "run", "-c", str(config)])
    assert result.exit_code == 3, result.output
    doc = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert doc["complete"] is True and doc["stop_reason"] is None
    cells = doc["phases"]["contract"]["cells"]
    assert {c["status"] for c in cells} == {"errored"}
    assert all("the config reads its reply wrong" in c["reason"] for c in cells)
    assert len(sent) == 2 + 8
