"""Cancelling a run as GitHub does (SIGINT, SIGTERM 7.5 s later, SIGKILL at 10 s) or as a user
does (Ctrl-C, Ctrl-C): nothing new starts, work in flight is abandoned after a short grace, and
every report is written with the cells that did not finish ``not_run``; the run exits 3 well
before the SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib
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


def start_run(
    tmp_path: Path, config: dict[str, Any], *extra: str, launcher: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(config))
    return subprocess.Popen(
        [
            *(launcher or (sys.executable, "-m", "flakestorm")),
            *("contract", "run", "-c", str(path), *extra),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def console_script() -> tuple[str, ...]:
    """The installed ``flakestorm`` command, as its console script runs it (pyproject's
    ``[project.scripts]`` entry: ``sys.exit(function())``)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["flakestorm"].split(":")
    return (
        sys.executable,
        "-c",
        f"import sys; from {module} import {function}; sys.exit({function}())",
    )


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (``SigCgt`` in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)


class signal_at:  # named as the function it replaced: signal_at(proc, 0.3, SIGINT)
    """Send ``signum`` ``seconds`` after the process started (the moment is what is tested),
    and never before its first instruction has installed its handling: before that, the
    interpreter is still starting (on a loaded machine, past 0.3 s), and no program can
    handle a signal it has not yet asked for. :meth:`cancel` stops it."""

    def __init__(self, proc: subprocess.Popen[str], seconds: float, signum: int) -> None:
        self._stopped = threading.Event()
        started = time.monotonic()

        def send() -> None:
            while not catches(proc.pid, signum) and proc.poll() is None:
                if self._stopped.wait(0.005):  # polled: the kernel offers no event for it
                    return
            self._stopped.wait(max(0.0, started + seconds - time.monotonic()))
            if not self._stopped.is_set() and proc.poll() is None:
                proc.send_signal(signum)

        threading.Thread(target=send, daemon=True).start()

    def cancel(self) -> None:
        self._stopped.set()


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


def action_env(workspace: Path, files: Path) -> dict[str, str]:
    """The action's environment as GitHub gives it: ``files`` receives outputs and summary."""
    return {
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


def start_action(tmp_path: Path, config: object) -> tuple[subprocess.Popen[str], Path, Path]:
    """The action started as GitHub starts it, on a workspace holding ``config`` (None: a FIFO
    the test writes it into): the process, the workspace and the folder of the files GitHub
    gives (outputs, summary)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    if config is None:
        os.mkfifo(workspace / "flakestorm.yaml")
    else:
        (workspace / "flakestorm.yaml").write_text(json.dumps(config))
    files = tmp_path / "files"
    files.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=workspace,
        env=action_env(workspace, files),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, workspace, files


def assert_partial_reports(out_dir: Path) -> dict[str, Any]:
    for name in REPORT_FILES:
        assert (out_dir / name).is_file(), f"{name} was not written"
    results: dict[str, Any] = json.loads((out_dir / "results.json").read_text())
    assert results["complete"] is False
    assert results["stop_reason"] == "interrupted"
    summary = (out_dir / "summary.md").read_text()
    assert "interrupted" in summary
    assert "(passed)" not in summary  # a phase the run did not finish never reads as passed
    if not any(c["status"] in ("passed", "failed") for c in results["phases"]["contract"]["cells"]):
        # no cell ran to a verdict: the contract scores n/a, never 100.00
        assert "contract c: n/a (no verdict: no cell ran to one)" in summary
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


@pytest.fixture
def never_ready_agent() -> Iterator[tuple[LoopbackServer, threading.Event]]:
    """An agent that is never ready (503 on every health check) and its config's agent; the
    event is set when the first readiness probe arrives (by then the config has been read)."""
    probed = threading.Event()

    def not_ready(request: Request) -> Response:
        probed.set()
        return Response.json({"ready": False}, status=503)

    with LoopbackServer(not_ready) as server:
        yield server, probed


def never_ready_config(server: LoopbackServer) -> dict[str, object]:
    return contract_config(
        server.url_for("/chat"), health_endpoint="/health", ready_timeout=600_000
    )


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
    tmp_path: Path, never_ready_agent: tuple[LoopbackServer, threading.Event]
) -> None:
    server, probed = never_ready_agent
    proc = start_run(tmp_path, never_ready_config(server))
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
    summary = (tmp_path / "flakestorm-reports" / "summary.md").read_text()
    assert "contract c: 100.00 (incomplete: 2 cells not run)" in summary


def test_the_action_says_where_the_partial_reports_are(
    tmp_path: Path, hanging_agent: tuple[LoopbackServer, threading.Event]
) -> None:
    server, arrived = hanging_agent
    config = contract_config(server.url_for("/chat"), timeout=600_000)
    proc, workspace, files = start_action(tmp_path, config)
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


START_UP_SIGNALS = [
    pytest.param(signum, at, id=f"{signum.name}-at-{at}s")
    for signum in (signal.SIGTERM, signal.SIGINT)
    for at in (0.3, 0.8)
]


@pytest.mark.parametrize(("signum", "at"), START_UP_SIGNALS)
@pytest.mark.parametrize("launcher", ["python -m flakestorm", "console script"])
def test_a_signal_during_start_up_exits_3_with_every_report(
    tmp_path: Path,
    hanging_agent: tuple[LoopbackServer, threading.Event],
    signum: signal.Signals,
    at: float,
    launcher: str,
) -> None:
    # the first instruction installs the handling: a signal in the imports, while the config
    # is read or while the agent is asked is kept, and the run then starts stopped, so the
    # config is always read and every report written (the agent hangs: nothing ever passes)
    server, _ = hanging_agent
    config = contract_config(server.url_for("/chat"), timeout=600_000)
    launch = console_script() if launcher == "console script" else ()
    proc = start_run(tmp_path, config, launcher=launch)
    timer = signal_at(proc, at, signum)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert "Aborted" not in stdout + stderr
    assert "Traceback" not in stderr
    assert "Verdict: ERROR (exit 3: the run was interrupted" in stdout
    # progress says of the cells what the matrix says
    assert "scenario calm: 3 not run" in stderr
    assert "inv0       medium    not run" in stdout
    results = assert_partial_reports(tmp_path / "flakestorm-reports")
    assert statuses(results) == ["not_run"] * 3
    assert results["exit_code"] == 3


def test_a_signal_after_the_config_is_read_exits_3_with_every_report(
    tmp_path: Path, never_ready_agent: tuple[LoopbackServer, threading.Event]
) -> None:
    # the config is read by the time the agent is first asked whether it is ready
    server, probed = never_ready_agent
    for signum in (signal.SIGTERM, signal.SIGINT):
        probed.clear()
        out = tmp_path / signum.name
        proc = start_run(tmp_path, never_ready_config(server), "--output", str(out))
        try:
            assert probed.wait(60), "the run never asked whether the agent is ready"
            proc.send_signal(signum)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 3, stdout + stderr
        assert "Aborted" not in stdout + stderr
        results = assert_partial_reports(out)
        assert statuses(results) == ["not_run"] * 3
        assert results["invocations"] == 0


RELAY = ("--proxy", "http://127.0.0.1:9", "--", "cat")


def test_a_command_that_cannot_stop_cleanly_ends_at_a_signal_with_exit_3(tmp_path: Path) -> None:
    # the stdio MCP relay, relaying `cat` (which ends when its input closes): SIGTERM used to
    # kill it (-15), SIGINT to give "Aborted!" and exit 1
    for signum in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen(
            [sys.executable, "-m", "flakestorm", "mcp-stdio", "--name", "m", *RELAY],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        timer = signal_at(proc, 0.8, signum)
        try:
            proc.wait(15)  # its input stays open: the relay runs until the signal
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
        stdout, stderr = proc.communicate(timeout=10)
        assert proc.returncode == 3, stdout + stderr
        assert f"error: interrupted ({signum.name})" in stderr
        assert "Aborted" not in stderr
        assert "Traceback" not in stderr


@pytest.mark.parametrize(("signum", "at"), START_UP_SIGNALS)
def test_the_action_signalled_during_start_up_exits_3_with_every_report(
    tmp_path: Path,
    never_ready_agent: tuple[LoopbackServer, threading.Event],
    signum: signal.Signals,
    at: float,
) -> None:
    server, _ = never_ready_agent
    proc, workspace, files = start_action(tmp_path, never_ready_config(server))
    timer = signal_at(proc, at, signum)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stdout + stderr
    assert "Traceback" not in stderr
    assert "flakestorm: cancelled" in stdout
    results = assert_partial_reports(workspace / "flakestorm-reports")
    assert statuses(results) == ["not_run"] * 3
    assert "interrupted" in (files / "summary").read_text()
    written = (files / "output").read_text()
    outputs = {k: v for k, _, v in re.findall(r"^(\S+)<<(\S+)\n(.*?)\n\2$", written, re.M | re.S)}
    assert outputs["passed"] == "false"


def test_start_up_keeps_a_first_signal_and_ends_at_a_second_or_when_abrupt() -> None:
    from flakestorm.stopping import Interrupted, StartUp

    kept = StartUp()
    kept.handler(signal.SIGINT, None)  # a run's start-up: the first signal is kept
    assert kept.signum == signal.SIGINT
    assert kept.exit_code(0) == 3 and kept.exit_code(1) == 3  # never passed, never a gate
    assert kept.interrupted() == "interrupted (SIGINT): the command's result does not count"
    with pytest.raises(Interrupted) as second:
        kept.handler(signal.SIGTERM, None)
    assert second.value.name == "SIGTERM"

    taken = StartUp()
    taken.handler(signal.SIGTERM, None)
    taken.taken = True  # a run took it over: its own exit code stands (3 when cancelled)
    assert taken.exit_code(3) == 3 and taken.exit_code(0) == 0

    abrupt = StartUp()
    abrupt.abrupt()  # any other command: a signal ends it
    with pytest.raises(Interrupted):
        abrupt.handler(signal.SIGTERM, None)
    late = StartUp()
    late.handler(signal.SIGINT, None)
    with pytest.raises(Interrupted):  # a signal that came before the command was known
        late.abrupt()


BROKEN = {**contract_config("http://127.0.0.1:9/chat"), "scoring": {"min_score": "high"}}
"""A config with one problem: ``scoring.min_score`` is not a number."""


def test_a_run_cancelled_while_its_config_is_read_exits_3_even_when_the_config_is_broken(
    tmp_path: Path,
) -> None:
    # the config is a FIFO: opening it for writing waits until the run reads it, so the
    # signal arrives while the config is being read
    fifo = tmp_path / "flakestorm.yaml"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flakestorm", "contract", "run", "-c", str(fifo)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with fifo.open("w") as config:
            proc.send_signal(signal.SIGTERM)
            config.write(json.dumps(BROKEN))
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stdout + stderr  # cancelled: 3, not the config error's 2
    assert "scoring.min_score" in stderr  # the config's problem is still said
    assert "error: interrupted: the run was cancelled (exit 3)" in stderr
    assert "Traceback" not in stderr


def test_the_action_cancelled_during_start_up_exits_3_even_when_the_config_is_broken(
    tmp_path: Path,
) -> None:
    # the config is a FIFO: opening it for writing waits until the action reads it (its
    # handling of signals installed long before), so the signal arrives during start-up
    proc, workspace, _ = start_action(tmp_path, None)
    fifo = workspace / "flakestorm.yaml"
    read = threading.Event()

    def feed() -> None:
        with fifo.open("w") as config:  # returns once the action opens it to read
            read.set()
            proc.send_signal(signal.SIGINT)
            config.write(json.dumps(BROKEN))

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if not read.is_set():  # the action ended without reading its config: free the feeder
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        feeder.join(10)
    assert read.is_set(), f"the action never read its config:\n{stdout}{stderr}"
    assert proc.returncode == 3, stdout + stderr
    assert "title=flakestorm%3A config error::scoring.min_score" in stdout
    assert "title=flakestorm%3A cancelled::the run was cancelled: exit 3" in stdout
    assert "Traceback" not in stderr
