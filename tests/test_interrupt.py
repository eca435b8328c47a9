"""Ctrl-C / SIGTERM during `flakestorm contract run`: invocations in flight finish, nothing new
starts, and what finished is scored and written (results.json says the run is partial)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.server import LoopbackServer, Request, Response


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_cleanly_and_keeps_what_finished(
    tmp_path: Path, signum: signal.Signals
) -> None:
    arrived = threading.Event()
    release = threading.Event()
    count = 0
    lock = threading.Lock()

    def agent(request: Request) -> Response:
        nonlocal count
        with lock:
            count += 1
            n = count
        if n == 4:  # 2 stateful-check calls, then the first cell's two prompts
            arrived.set()
            release.wait(30)
        return Response.json({"output": "ok"})

    with LoopbackServer(agent) as server:
        config = {
            "agent": {"endpoint": server.url_for("/chat")},
            "golden_prompts": ["p1", "p2"],
            "contract": {
                "name": "c",
                "invariants": [
                    {"id": f"inv{i}", "type": "contains", "value": "ok"} for i in range(3)
                ],
                "chaos_matrix": [{"name": "calm"}],
            },
        }
        path = tmp_path / "flakestorm.yaml"
        path.write_text(json.dumps(config))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flakestorm",
                "contract",
                "run",
                "-c",
                str(path),
                "--concurrency",
                "1",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert arrived.wait(60), "the run never reached the first cell"
            proc.send_signal(signum)
            release.set()
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert "stopping: finishing invocations in flight" in stderr
    assert "Run stopped early (interrupted)" in stdout
    results = json.loads((tmp_path / "flakestorm-reports" / "results.json").read_text())
    assert results["complete"] is False
    assert results["stop_reason"] == "interrupted"
    statuses = [c["status"] for c in results["phases"]["contract"]["cells"]]
    assert statuses == ["passed", "not_run", "not_run"]
    assert count == 4  # nothing new started after the signal
    # the other report formats were written too
    assert (tmp_path / "flakestorm-reports" / "junit.xml").is_file()
