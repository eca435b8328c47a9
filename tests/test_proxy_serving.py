"""The proxy as a service (:mod:`flakestorm.chaos.proxy.serving`): configured from the
environment, the health command, and the ``flakestorm proxy`` command."""

from __future__ import annotations

import os
from typing import Any

import pytest

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.serving import health_check, parse_tools, proxy_from_env
from flakestorm.errors import UsageError


def test_proxy_from_env() -> None:
    proxy = proxy_from_env(
        {
            "FLAKESTORM_PROXY_PORT": "0",
            "FLAKESTORM_PROXY_HOST": "127.0.0.1",
            "FLAKESTORM_LLM_UPSTREAM": "mock",
            "FLAKESTORM_TOOLS": "search=http://search:8000, crm=https://crm.example",
            "FLAKESTORM_PROXY_TOKEN": "tok",
        }
    )
    try:
        assert proxy.tools == {"search": "http://search:8000", "crm": "https://crm.example"}
        assert proxy.llm_source == "mock" and proxy.token == "tok"
        assert proxy.url.startswith("http://127.0.0.1:")
    finally:
        proxy.stop()
    with pytest.raises(UsageError, match="FLAKESTORM_PROXY_PORT"):
        proxy_from_env({"FLAKESTORM_PROXY_PORT": "http"})
    with pytest.raises(UsageError, match="not NAME=URL"):
        parse_tools(["search"], "--tool")
    with pytest.raises(UsageError, match="not an http"):
        parse_tools(["search=ftp://x"], "--tool")
    with pytest.raises(UsageError, match=r"proxy\.llm_upstream"):
        ChaosProxy(llm_upstream="api.openai.com")


def test_port_in_use_is_a_usage_error(proxy: ChaosProxy) -> None:
    with pytest.raises(UsageError, match="cannot listen"):
        ChaosProxy(port=proxy.port)


def test_health_module_command(proxy: ChaosProxy) -> None:
    import subprocess
    import sys

    env = {**os.environ, "FLAKESTORM_PROXY_PORT": str(proxy.port)}
    command = [sys.executable, "-m", "flakestorm.chaos.proxy", "--health"]
    assert subprocess.run(command, env=env, check=False).returncode == 0
    proxy.stop()
    assert subprocess.run(command, env=env, check=False).returncode == 1


def run_proxy_command(*args: str, env: dict[str, str] | None = None) -> tuple[str, str, int]:
    """Start `flakestorm proxy ARGS`, wait for its URL line, check health, SIGTERM it."""
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "flakestorm", "proxy", "--port", "0", *args]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split(" on ", 1)[1].split(" ", 1)[0] if " on " in line else ""
        if url:
            token = (env or {}).get("FLAKESTORM_PROXY_TOKEN")
            assert health_check(url, token=token) == 0
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return line, err, process.returncode


def test_proxy_command(tmp_path: Any) -> None:
    line, err, code = run_proxy_command(
        "--tool", "search=http://search:8000", "--llm-upstream", "mock"
    )
    assert code == 0, err
    assert line.startswith("flakestorm proxy listening on http://127.0.0.1:")
    assert "llm: mock" in line and "tools: search" in line


def test_proxy_command_from_config(tmp_path: Any) -> None:
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        "version: '2.0'\n"
        "agent: {endpoint: 'http://localhost:9/invoke'}\n"
        "golden_prompts: [hi]\n"
        "proxy:\n"
        "  llm_upstream: mock\n"
        "  tools: {crm: 'https://crm.example', search: 'http://search'}\n"
    )
    line, err, code = run_proxy_command("-c", str(config), env={"FLAKESTORM_PROXY_TOKEN": "tok"})
    assert code == 0, err
    assert "tools: crm, search" in line and "llm: mock" in line


def test_proxy_command_usage_errors() -> None:
    line, err, code = run_proxy_command("--tool", "nonsense")
    assert code == 2 and "not NAME=URL" in err and line == ""
