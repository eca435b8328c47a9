"""Run the example agent with its fake market data service and fake LLM, as one command.

    python run_local.py --port 8000

Starts ``fake_tool.py`` and ``fake_llm.py`` (on free ports unless ``--tool-port`` /
``--llm-port`` are given), then ``agent.py`` on ``--port`` with ``MARKET_DATA_URL`` and
``OPENAI_BASE_URL`` pointing at them. The first stdout line is the agent's
``listening on http://HOST:PORT``; where the fakes listen goes to stderr. SIGTERM or SIGINT stops
all three (exit 0); if one of them exits on its own, the others are stopped and its exit code is
returned. The children also exit by themselves if this launcher is killed outright.

Where the agent sends its calls, first match wins:

1. ``--market-data-url`` / ``--openai-base-url``;
2. the ``MARKET_DATA_URL`` / ``OPENAI_BASE_URL`` environment variables;
3. ``FLAKESTORM_PROXY_URL``, if set: through the flakestorm chaos proxy, as
   ``<proxy>/tools/market_data_api`` and ``<proxy>/llm/openai/v1`` (the proxy's
   ``tools.market_data_api`` and ``llm_upstream`` then name the fakes, so give them fixed ports);
4. the fakes started here.

Options default from the environment, for containers: ``FINBOT_HOST`` (``--host``, default
127.0.0.1; the fakes bind there too), ``FINBOT_PORT`` (8000), ``FINBOT_TOOL_PORT`` and
``FINBOT_LLM_PORT`` (0 = a free port). ``BAD_AGENT`` and the other ``agent.py`` settings pass
through.
"""

from __future__ import annotations

import argparse
import os
import re
import selectors
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
LISTENING = re.compile(r"^listening on (http://\S+?):(\d+)\s*$")


class Stop(Exception):
    """SIGTERM or SIGINT arrived."""


def parse_args(env: Mapping[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--host", default=env.get("FINBOT_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(env.get("FINBOT_PORT", "8000")))
    parser.add_argument("--tool-port", type=int, default=int(env.get("FINBOT_TOOL_PORT", "0")))
    parser.add_argument("--llm-port", type=int, default=int(env.get("FINBOT_LLM_PORT", "0")))
    parser.add_argument("--market-data-url", help="where the agent calls its tool")
    parser.add_argument("--openai-base-url", help="where the agent calls its LLM")
    return parser.parse_args()


def local_url(host: str, port: int) -> str:
    """A URL that reaches a server bound to ``host`` from this machine."""
    connect = "127.0.0.1" if host in ("", "0.0.0.0") else host
    return f"http://{connect}:{port}"


class Started:
    """A started server script whose port is not known yet."""

    def __init__(self, script: str, process: subprocess.Popen[str]) -> None:
        self.script = script
        self.process = process

    def port(self) -> int:
        """The port the script announced on its first stdout line (waits for it, bounded)."""
        stdout = self.process.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(READY_TIMEOUT_S):
                raise RuntimeError(f"{self.script} did not start within {READY_TIMEOUT_S:.0f} s")
        line = stdout.readline()
        match = LISTENING.match(line)
        if not match:
            raise RuntimeError(f"{self.script} did not start (it printed {line.strip()!r})")
        return int(match.group(2))


class Children:
    """The started processes; stopped together, last started first."""

    def __init__(self) -> None:
        self.started: list[Started] = []
        self.env = {**os.environ, "FINBOT_PARENT_PID": str(os.getpid()), "PYTHONUNBUFFERED": "1"}

    def start(self, script: str, host: str, port: int, env: Mapping[str, str]) -> Started:
        """Start ``script``; :meth:`Started.port` then waits for the port it announces."""
        process = subprocess.Popen(
            [sys.executable, str(HERE / script), "--host", host, "--port", str(port)],
            stdout=subprocess.PIPE,
            text=True,
            env={**self.env, **env},
        )
        started = Started(script, process)
        self.started.append(started)
        return started

    def wait_any(self) -> int:
        """Block until one child exits; return its exit code."""
        pid, status = os.waitpid(-1, 0)
        code = os.waitstatus_to_exitcode(status)
        for started in self.started:
            if started.process.pid == pid:
                started.process.returncode = code
                print(f"run_local: {started.script} exited with code {code}", file=sys.stderr)
        return code if code > 0 else 1

    def stop(self) -> None:
        processes = [started.process for started in reversed(self.started)]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main() -> int:
    env = os.environ
    args = parse_args(env)

    def on_signal(signum: int, frame: object) -> None:
        raise Stop

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    children = Children()
    try:
        # the two fakes start in parallel; the agent needs their addresses
        tool = children.start("fake_tool.py", args.host, args.tool_port, {})
        llm = children.start("fake_llm.py", args.host, args.llm_port, {})
        tool_port, llm_port = tool.port(), llm.port()
        proxy = env.get("FLAKESTORM_PROXY_URL", "").rstrip("/")
        market_data_url = (
            args.market_data_url
            or env.get("MARKET_DATA_URL")
            or (f"{proxy}/tools/market_data_api" if proxy else local_url(args.host, tool_port))
        )
        openai_base_url = (
            args.openai_base_url
            or env.get("OPENAI_BASE_URL")
            or (f"{proxy}/llm/openai/v1" if proxy else f"{local_url(args.host, llm_port)}/v1")
        )
        agent_env = {"MARKET_DATA_URL": market_data_url, "OPENAI_BASE_URL": openai_base_url}
        agent_port = children.start("agent.py", args.host, args.port, agent_env).port()
        print(f"listening on http://{args.host}:{agent_port}", flush=True)
        print(
            f"run_local: fake market data on {local_url(args.host, tool_port)}, "
            f"fake LLM on {local_url(args.host, llm_port)}/v1; the agent calls its tool at "
            f"{market_data_url} and its LLM at {openai_base_url}",
            file=sys.stderr,
            flush=True,
        )
        return children.wait_any()
    except Stop:
        return 0
    except RuntimeError as exc:
        print(f"run_local: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        children.stop()


if __name__ == "__main__":
    sys.exit(main())
