"""AgentProcess: start, readiness, early exit, already running, and no orphans on stop."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys
from pathlib import Path

import pytest
from support.server import LoopbackServer, free_port

from flakestorm.agents.process import AgentProcess
from flakestorm.agents.readiness import Waiting
from flakestorm.config import AgentConfig, AgentStart
from flakestorm.errors import AgentNotReady

PYTHON = shlex.quote(sys.executable)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


def serve_command(port: int) -> str:
    """A server in the background plus a plain child: a process tree, not a single process."""
    return (
        f"{PYTHON} -m http.server {port} --bind 127.0.0.1 & echo $! > server.pid; "
        "sleep 60 & echo $! > sleeper.pid; "
        'echo "env: $FROM_START $FROM_CALLER"; wait'
    )


def config_for(port: int, command: str, **start: object) -> AgentConfig:
    return AgentConfig(
        endpoint=f"http://127.0.0.1:{port}/invoke",
        ready_timeout=10_000,
        start=AgentStart(command=command, **start),  # type: ignore[arg-type]
    )


def test_start_waits_for_readiness_and_stop_leaves_no_orphans(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "agent").mkdir()
    config = config_for(port, serve_command(port), cwd="agent", env={"FROM_START": "s"})
    log = tmp_path / "reports" / "agent.log"
    with AgentProcess(config, tmp_path, log, extra_env={"FROM_CALLER": "c"}) as process:
        assert process.started and not process.already_running
        shell = process.pid
        assert shell is not None
        server, sleeper = (read_pid(tmp_path / "agent" / f) for f in ("server.pid", "sleeper.pid"))
        assert all(alive(pid) for pid in (shell, server, sleeper))
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
    assert not any(alive(pid) for pid in (shell, server, sleeper))
    assert "env: s c" in log.read_text()


def test_children_ignoring_sigterm_are_killed_after_the_grace_period(tmp_path: Path) -> None:
    port = free_port()
    command = (
        f"(trap '' TERM; sleep 60) & echo $! > stubborn.pid; "
        f"{PYTHON} -m http.server {port} --bind 127.0.0.1"
    )
    process = AgentProcess(config_for(port, command), tmp_path, tmp_path / "agent.log", grace_s=0.3)
    with process:
        stubborn = read_pid(tmp_path / "stubborn.pid")
        assert alive(stubborn)
    assert not alive(stubborn)


def test_an_early_exit_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    port = free_port()
    command = "echo 'starting'; echo 'Error: OPENAI_API_KEY is not set' >&2; exit 3"
    process = AgentProcess(config_for(port, command), tmp_path, tmp_path / "agent.log")
    with pytest.raises(AgentNotReady) as caught:
        process.start()
    message = str(caught.value)
    assert "exited with code 3 before it was ready" in message
    assert "Error: OPENAI_API_KEY is not set" in message
    assert str(tmp_path / "agent.log") in message
    assert process.pid is None


def test_a_process_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    port = free_port()
    config = AgentConfig(
        endpoint=f"http://127.0.0.1:{port}/invoke",
        ready_timeout=300,
        start=AgentStart(command="echo waiting; sleep 60 & echo $! > sleeper.pid; wait"),
    )
    process = AgentProcess(config, tmp_path, tmp_path / "agent.log")
    with pytest.raises(AgentNotReady) as caught:
        process.start()
    assert "not ready after 300 ms" in str(caught.value)
    assert "waiting" in str(caught.value)
    assert not alive(read_pid(tmp_path / "sleeper.pid"))


def test_the_wait_for_a_started_agent_is_reported(tmp_path: Path) -> None:
    port = free_port()
    now = [0.0]

    def sleep(seconds: float) -> None:  # time moves only when the wait sleeps
        now[0] += seconds

    config = AgentConfig(
        endpoint=f"http://127.0.0.1:{port}/invoke",
        ready_timeout=25_000,
        start=AgentStart(command="sleep 60"),
    )
    heard: list[Waiting] = []
    process = AgentProcess(
        config,
        tmp_path,
        tmp_path / "agent.log",
        clock=lambda: now[0],
        sleep=sleep,
        on_waiting=heard.append,
    )
    with pytest.raises(AgentNotReady):
        process.start()
    assert [round(w.elapsed_s) for w in heard] == [10, 20]
    assert all(f"127.0.0.1:{port}: connection refused" in w.last_error for w in heard)


def test_ctrl_c_while_waiting_stops_the_process(tmp_path: Path) -> None:
    port = free_port()
    command = "sleep 60 & echo $! > sleeper.pid; wait"

    def interrupt(seconds: float) -> None:
        if (tmp_path / "sleeper.pid").exists() and (tmp_path / "sleeper.pid").read_text():
            raise KeyboardInterrupt
        os.sched_yield()

    process = AgentProcess(
        config_for(port, command), tmp_path, tmp_path / "agent.log", sleep=interrupt
    )
    with pytest.raises(KeyboardInterrupt):
        process.start()
    assert not alive(read_pid(tmp_path / "sleeper.pid"))


def test_an_agent_already_answering_is_not_started(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        config = AgentConfig(
            endpoint=server.url_for("/invoke"), start=AgentStart(command="touch started")
        )
        with AgentProcess(config, tmp_path, tmp_path / "agent.log") as process:
            assert not process.started
            assert process.already_running
            assert process.pid is None
    assert not (tmp_path / "started").exists()
    assert not (tmp_path / "agent.log").exists()


def test_revive_starts_an_agent_that_died_again_and_leaves_one_that_answers(
    tmp_path: Path,
) -> None:
    port = free_port()
    command = f"echo started; exec {PYTHON} -m http.server {port} --bind 127.0.0.1"
    log = tmp_path / "agent.log"
    restarts: list[str] = []
    config = config_for(port, command)
    with AgentProcess(config, tmp_path, log, on_restart=restarts.append) as process:
        first = process.pid
        assert first is not None
        assert process.revive() is False  # it answers: nothing to do
        assert process.pid == first and restarts == []
        os.killpg(first, signal.SIGKILL)  # a request brought it down
        os.waitid(os.P_PID, first, os.WEXITED | os.WNOWAIT)  # dead, left for it to reap
        assert process.revive() is True
        second = process.pid
        assert second is not None and second != first
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        assert len(restarts) == 1
        assert restarts[0].startswith("the agent process exited (code -9): starting it again")
    assert not alive(second)
    assert log.read_text().count("started") == 2  # the log goes on in the same file
