"""Cancelling a run as GitHub does (SIGINT, SIGTERM 7.5 s later, SIGKILL at 10 s) or as a user
does (Ctrl-C, Ctrl-C): nothing new starts, work in flight is abandoned after a short grace, and
every report is written with the cells that did not finish ``not_run``; the run exits 3 well
before the SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.server import LoopbackServer, Request, Response

ROOT = Path(__file__).resolve().parent.parent
REPORT_FILES = ("results.json", "junit.xml", "summary.md", "report.html")
EXIT_WITHIN_S = 3.0
"""A cancelled run exits this soon after the first signal (GitHub sends SIGTERM at 7.5 s)."""


def contract_config(endpoint: str, **agent: Any) -> dict[str, Any]:
    return {
        "agent": {"endpoint": endpoint, **agent},
        "golden_prompts": ["p1", "p2"],
        "contract": {
            "name": "c",
            "invariants": [{"id": f"inv{i}", "type": "contains", "value": "ok"} for i in range(3)],
            "chaos_matrix": [{"name": "calm"}],
        },
    }


def start_run(tmp_path: Path, config: dict[str, Any], *extra: str) -> subprocess.Popen[str]:
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(config))
    return subprocess.Popen(
        [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(path), *extra],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def cancel_like_github(proc: subprocess.Popen[str]) -> tuple[float, str, str]:
    """SIGINT; SIGTERM 7.5 s later if still running; SIGKILL at 10 s. The seconds from the
    first signal to the exit, and the output."""
    first = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(7.5)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(2.5)
        except subprocess.TimeoutExpired:
            proc.kill()
    elapsed = time.monotonic() - first
    stdout, stderr = proc.communicate(timeout=10)
    return elapsed, stdout, stderr


def assert_partial_reports(out_dir: Path) -> dict[str, Any]:
    for name in REPORT_FILES:
        assert (out_dir / name).is_file(), f"{name} was not written"
    results: dict[str, Any] = json.loads((out_dir / "results.json").read_text())
    assert results["complete"] is False
    assert results["stop_reason"] == "interrupted"
    assert "interrupted" in (out_dir / "summary.md").read_text()
    return results


def statuses(results: dict[str, Any]) -> list[str]:
    return [c["status"] for c in results["phases"]["contract"]["cells"]]


@pytest.fixture
def hanging_agent() -> Iterator[tuple[LoopbackServer, threading.Event]]:
    """An agent whose every invocation hangs; the event is set when the first one arrives."""
    arrived = threading.Event()
    with LoopbackServer() as server:

        def hang(request: Request) -> Response:
            arrived.set()
            server.released.wait()
            return Response.json({"output": "ok"})

        server.handler = hang
        yield server, arrived


def test_the_runners_sequence_during_a_hung_invocation_leaves_every_report(
    tmp_path: Path, hanging_agent: tuple[LoopbackServer, threading.Event]
) -> None:
    server, arrived = hanging_agent
    proc = start_run(tmp_path, contract_config(server.url_for("/chat"), timeout=600_000))
    try:
        assert arrived.wait(60), "the run never invoked the agent"
        elapsed, stdout, stderr = cancel_like_github(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert elapsed < EXIT_WITHIN_S
    assert "Aborted" not in stdout + stderr
    assert "Run stopped early (interrupted)" in stdout
    results = assert_partial_reports(tmp_path / "flakestorm-reports")
    assert statuses(results) == ["not_run"] * 3


def test_the_runners_sequence_while_waiting_for_readiness_leaves_every_report(
    tmp_path: Path,
) -> None:
    probed = threading.Event()

    def not_ready(request: Request) -> Response:
        probed.set()
        return Response.json({"ready": False}, status=503)

    with LoopbackServer(not_ready) as server:
        config = contract_config(
            server.url_for("/chat"), health_endpoint="/health", ready_timeout=600_000
        )
        proc = start_run(tmp_path, config)
        try:
            assert probed.wait(60), "the run never asked whether the agent is ready"
            elapsed, stdout, stderr = cancel_like_github(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert all(r.path == "/health" for r in server.requests)  # nothing was invoked
    assert proc.returncode == 3, stdout + stderr
    assert elapsed < EXIT_WITHIN_S
    results = assert_partial_reports(tmp_path / "flakestorm-reports")
    assert statuses(results) == ["not_run"] * 3
    assert results["invocations"] == 0


def test_the_runners_sequence_during_a_stalled_reset_leaves_every_report(tmp_path: Path) -> None:
    reset_called = threading.Event()
    with LoopbackServer() as server:

        def agent(request: Request) -> Response:
            if request.path == "/reset":
                reset_called.set()
                server.released.wait()
            return Response.json({"output": "ok"})

        server.handler = agent
        config = contract_config(server.url_for("/chat"), reset_endpoint="/reset", timeout=600_000)
        proc = start_run(tmp_path, config)
        try:
            assert reset_called.wait(60), "the run never reset the agent"
            elapsed, stdout, stderr = cancel_like_github(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert elapsed < EXIT_WITHIN_S
    results = assert_partial_reports(tmp_path / "flakestorm-reports")
    assert set(statuses(results)) == {"not_run"}


def test_a_second_ctrl_c_writes_the_reports_at_once_and_never_aborts(
    tmp_path: Path, hanging_agent: tuple[LoopbackServer, threading.Event]
) -> None:
    server, arrived = hanging_agent
    proc = start_run(tmp_path, contract_config(server.url_for("/chat"), timeout=600_000))
    try:
        assert arrived.wait(60), "the run never invoked the agent"
        first = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        seen = ""
        while "stopping:" not in seen:  # the first signal was handled
            line = proc.stderr.readline()
            assert line, "the run ended without saying it was stopping"
            seen += line
        second = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
        ended = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stdout + seen + stderr
    assert ended - first < EXIT_WITHIN_S
    assert ended - second < 1.5  # no grace after the second signal
    assert "Aborted" not in stdout + seen + stderr
    assert "Traceback" not in seen + stderr
    results = assert_partial_reports(tmp_path / "flakestorm-reports")
    assert statuses(results) == ["not_run"] * 3


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_invocation_that_finishes_within_the_grace_keeps_its_verdict(
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
        proc = start_run(tmp_path, contract_config(server.url_for("/chat")), "--concurrency", "1")
        try:
            assert arrived.wait(60), "the run never reached the first cell"
            proc.send_signal(signum)
            assert proc.stderr is not None
            line = proc.stderr.readline()
            while line and "stopping:" not in line:
                line = proc.stderr.readline()
            release.set()  # the invocation in flight answers within the grace
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert "Run stopped early (interrupted)" in stdout
    results = assert_partial_reports(tmp_path / "flakestorm-reports")
    assert statuses(results) == ["passed", "not_run", "not_run"]
    assert count == 4  # nothing new started after the signal


def test_the_action_says_where_the_partial_reports_are(
    tmp_path: Path, hanging_agent: tuple[LoopbackServer, threading.Event]
) -> None:
    server, arrived = hanging_agent
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = contract_config(server.url_for("/chat"), timeout=600_000)
    (workspace / "flakestorm.yaml").write_text(json.dumps(config))
    files = tmp_path / "files"
    files.mkdir()
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(files / "output"),
        "GITHUB_STEP_SUMMARY": str(files / "summary"),
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_EVENT_NAME": "push",
        "INPUT_CONFIG": "flakestorm.yaml",
        "INPUT_COMMAND": "ci",
        "INPUT_COMMENT": "off",
        "INPUT_GITHUB-TOKEN": "",
    }
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert arrived.wait(60), "the action never invoked the agent"
        elapsed, stdout, stderr = cancel_like_github(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert elapsed < EXIT_WITHIN_S
    assert "flakestorm: cancelled" in stdout
    assert "::warning title=flakestorm%3A cancelled::" in stdout
    assert "the partial reports are in flakestorm-reports" in stdout
    assert_partial_reports(workspace / "flakestorm-reports")
    assert "interrupted" in (files / "summary").read_text()
