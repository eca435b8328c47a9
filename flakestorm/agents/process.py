"""An agent process flakestorm starts and stops itself (``agent.start``, local runs only).

::

    with AgentProcess(config.agent, base_dir, report_dir / "agent.log", extra_env=env) as process:
        if process.already_running:
            ...  # the agent was already answering: nothing was started
        run()

If the endpoint already answers, nothing is started. Otherwise ``start.command`` runs through
the shell in its own session (so its whole process tree is one process group), in
``start.cwd`` relative to the config directory, with ``os.environ + start.env + extra_env``,
its output going to ``log_path`` (``agent.log`` in the report directory). flakestorm waits for
readiness, failing fast with the log's tail if the process exits first. On exit (normal,
exception or Ctrl-C) the group gets SIGTERM, then SIGKILL after a grace period: no orphans.

A request may bring the agent down mid-run (a request-level mutation). :meth:`AgentProcess.revive`
brings it back: when the process it started has exited, it runs ``start.command`` again (the log
goes on in the same file) and waits for readiness again; an agent it did not start is waited
for, like :class:`~flakestorm.agents.readiness.ReadyAgain`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from flakestorm.agents.closing import Closing
from flakestorm.agents.readiness import Clock, Sleep, Waiting, probe, wait_ready
from flakestorm.config import AgentConfig
from flakestorm.errors import AgentNotReady, UsageError

LOG_NAME = "agent.log"
"""The log's usual name, in the report directory."""
TAIL_LINES = 20
GRACE_S = 5.0
STOPPING_GRACE_S = 1.0
"""The grace a run that is stopping (SIGINT, SIGTERM) gives the agent process."""
_POLL_S = 0.02


class AgentProcess(Closing):
    """Starts ``agent.start.command`` unless the agent already answers; a context manager."""

    def __init__(
        self,
        config: AgentConfig,
        base_dir: Path,
        log_path: Path,
        *,
        extra_env: Mapping[str, str] | None = None,
        grace_s: float = GRACE_S,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
        stop: threading.Event | None = None,
        on_waiting: Callable[[Waiting], None] | None = None,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        """``on_restart`` hears why :meth:`revive` starts the agent again, before it does."""
        if config.start is None:
            raise UsageError("agent.start is not configured: there is no command to run")
        self.config = config
        self.start_config = config.start
        self.base_dir = base_dir
        self.log_path = log_path
        self._extra_env = dict(extra_env or {})
        self._grace_s = grace_s
        self._clock = clock
        self._sleep = sleep
        self._stop = stop
        self._on_waiting = on_waiting
        self._on_restart = on_restart
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.started = False
        """True once this object started the agent process."""
        self.already_running = False
        """True when ``start()`` found the agent already answering and started nothing."""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> bool:
        """Start the agent and wait until it is ready; False if it was already answering."""
        if probe(self.config) is None:
            self.already_running = True
            return False
        self._launch("wb")
        return True

    def revive(self) -> bool:
        """Bring the agent back after a request may have brought it down: nothing when it
        answers (False); when the process flakestorm started has exited (or exits while waited
        for), ``start.command`` runs again, its output appended to the log; otherwise a wait
        for readiness (True: it was down, and answers again). :class:`AgentNotReady` when it
        does not answer within ``agent.ready_timeout``."""
        if probe(self.config) is None:
            return False
        process = self._process
        if process is None or process.poll() is None:
            try:
                self._wait_ready()
                return True
            except _ExitedEarly:
                process = self._process
        code = process.returncode if process is not None else None
        self.stop()
        if self._on_restart is not None:
            self._on_restart(
                f"the agent process exited (code {code}): starting it again "
                f"(agent.start.command: {self.start_config.command}, log: {self.log_path})"
            )
        self._launch("ab")
        return True

    def _wait_ready(self) -> None:
        """Wait until the agent answers; _ExitedEarly when the process exits meanwhile."""
        wait_ready(
            self.config,
            clock=self._clock,
            sleep=self._sleep,
            check=self._check_alive,
            stop=self._stop,
            on_waiting=self._on_waiting,
        )

    def _launch(self, mode: str) -> None:
        """Run ``start.command`` (its output to the log, opened with ``mode``) and wait until
        the agent is ready; the process stopped and AgentNotReady when it is not."""
        cwd = self.base_dir / (self.start_config.cwd or ".")
        env = {**os.environ, **self.start_config.env, **self._extra_env}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open(mode)
        try:
            self._process = subprocess.Popen(
                self.start_config.command,
                shell=True,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._close_log()
            raise AgentNotReady(
                f"could not start the agent (agent.start.command in {cwd}): {exc.strerror or exc}"
            ) from None
        self.started = True
        try:
            self._wait_ready()
        except _ExitedEarly as exc:
            self.stop()
            raise AgentNotReady(str(exc)) from None
        except AgentNotReady as exc:
            message = f"{exc}\n{self._tail_text()}"
            self.stop()
            raise AgentNotReady(message) from None
        except BaseException:  # KeyboardInterrupt included: never leave the process behind
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after the grace period."""
        process, self._process = self._process, None
        if process is not None:
            stopping = self._stop is not None and self._stop.is_set()
            # a run that is stopping has seconds left before it is killed: a short grace
            _stop_group(
                process, min(self._grace_s, STOPPING_GRACE_S) if stopping else self._grace_s
            )
        self._close_log()

    def __enter__(self) -> AgentProcess:
        self.start()
        return self

    def close(self) -> None:
        self.stop()

    # -- early exit

    def _check_alive(self) -> None:
        message = self._process_exited_message()
        if message is not None:
            raise _ExitedEarly(f"{message}\n{self._tail_text()}")

    def _process_exited_message(self) -> str | None:
        process = self._process
        if process is None or process.poll() is None:
            return None
        return (
            f"the agent process exited with code {process.returncode} before it was ready "
            f"(agent.start.command: {self.start_config.command})"
        )

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of ``agent.log``."""
        if self._log is not None:
            self._log.flush()
        try:
            text = self.log_path.read_bytes()[-16_384:].decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _tail_text(self) -> str:
        tail = self.log_tail()
        if not tail.strip():
            return f"({self.log_path} is empty)"
        return f"last lines of {self.log_path}:\n{tail}"

    def _close_log(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            log.close()


class _ExitedEarly(AgentNotReady):
    pass


def _stop_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    group = process.pid  # start_new_session: the leader's pid is the group id
    _signal_group(group, signal.SIGTERM)
    if _wait_gone(process, group, grace_s):
        return
    _signal_group(group, signal.SIGKILL)
    # a process in uninterruptible sleep survives even SIGKILL for a while: give up on it then
    _wait_gone(process, group, grace_s)


def _wait_gone(process: subprocess.Popen[bytes], group: int, timeout_s: float) -> bool:
    """Wait until the leader is reaped and no member of the group runs; False on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        process.poll()
        if process.returncode is not None and not _group_alive(group):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _group_alive(group: int) -> bool:
    """Whether any process of the group is still running (zombies awaiting reaping are not)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # no /proc: trust killpg
        return True
    return any(_is_running_member(pid, group) for pid in pids)


def _is_running_member(pid: int, group: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses
    fields = stat[stat.rfind(")") + 2 :].split()
    return len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z"
