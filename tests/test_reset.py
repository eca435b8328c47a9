"""Resetting the agent: endpoint (relative/absolute) and function (sync/async), and failures."""

from __future__ import annotations

import itertools
import socket
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.server import LoopbackServer, Response

from flakestorm.agents.reset import EndpointReset, FunctionReset, Resets, build_resetter
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import ConfigError, HarnessError

_names = itertools.count()


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda r: Response.json({"ok": True})) as s:
        yield s


@pytest.mark.parametrize("path", ["/reset", "reset"])
def test_a_relative_reset_endpoint_is_posted_on_the_endpoint_origin(
    server: LoopbackServer, path: str
) -> None:
    config = AgentConfig(
        endpoint=server.url_for("/api/invoke"),
        reset_endpoint=path,
        headers={"Authorization": "Bearer k"},
    )
    resetter = build_resetter(config, Path("."))
    assert isinstance(resetter, EndpointReset)
    resetter.reset()
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/reset")
    assert request.headers["Authorization"] == "Bearer k"


def test_an_absolute_reset_endpoint(server: LoopbackServer) -> None:
    config = AgentConfig(endpoint="http://agent.invalid/x", reset_endpoint=server.url_for("/r"))
    resetter = build_resetter(config, Path("."))
    assert resetter is not None
    resetter.reset()
    assert server.requests[0].path == "/r"


def test_a_failing_reset_endpoint_is_a_harness_error(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(500)
    resetter = EndpointReset(server.url_for("/reset"), 30_000)
    with pytest.raises(HarnessError) as caught:
        resetter.reset()
    assert str(caught.value) == f"reset failed: POST {server.url}/reset returned 500"


def test_an_unreachable_reset_endpoint_is_a_harness_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/reset"
        with pytest.raises(HarnessError, match=f"reset failed: POST {url}: connection refused"):
            EndpointReset(url, 30_000).reset()


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"fs_reset_{next(_names)}"
    source = """
        import asyncio
        calls = []
        def reset():
            calls.append("sync")
        async def areset():
            await asyncio.sleep(0)
            calls.append("async")
        def broken():
            raise RuntimeError("db is down")
        not_callable = 3
    """
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    yield name
    sys.modules.pop(name, None)


@pytest.mark.parametrize(("attr", "expected"), [("reset", "sync"), ("areset", "async")])
def test_a_reset_function(tmp_path: Path, module: str, attr: str, expected: str) -> None:
    config = AgentConfig(
        type=AgentType.PYTHON, endpoint="x:agent", reset_function=f"{module}:{attr}"
    )
    resetter = build_resetter(config, tmp_path)
    assert isinstance(resetter, FunctionReset)
    resetter.reset()
    resetter.reset()
    assert sys.modules[module].calls == [expected, expected]


def test_a_raising_reset_function_is_a_harness_error(tmp_path: Path, module: str) -> None:
    config = AgentConfig(
        type=AgentType.PYTHON, endpoint="x:agent", reset_function=f"{module}:broken"
    )
    resetter = build_resetter(config, tmp_path)
    assert resetter is not None
    with pytest.raises(HarnessError) as caught:
        resetter.reset()
    assert str(caught.value).startswith(
        f"reset failed: {module}:broken raised RuntimeError: db is down (at {module}.py:"
    )


def test_reset_function_config_errors(tmp_path: Path, module: str) -> None:
    for attr, expected in [("nope", "has no attribute"), ("not_callable", "is not callable")]:
        config = AgentConfig(
            type=AgentType.PYTHON, endpoint="x:agent", reset_function=f"{module}:{attr}"
        )
        with pytest.raises(ConfigError) as caught:
            build_resetter(config, tmp_path)
        (problem,) = caught.value.problems
        assert problem.path == "agent.reset_function"
        assert expected in problem.message


def test_a_relative_reset_endpoint_needs_an_http_agent(tmp_path: Path) -> None:
    config = AgentConfig(type=AgentType.PYTHON, endpoint="x:agent", reset_endpoint="/reset")
    with pytest.raises(ConfigError, match=r"agent\.reset_endpoint"):
        build_resetter(config, tmp_path)


def test_both_resets_run_endpoint_first(
    server: LoopbackServer, tmp_path: Path, module: str
) -> None:
    config = AgentConfig(
        endpoint=server.url_for("/invoke"),
        reset_endpoint="/reset",
        reset_function=f"{module}:reset",
    )
    resetter = build_resetter(config, tmp_path)
    assert isinstance(resetter, Resets)
    resetter.reset()
    assert len(server.requests) == 1
    assert sys.modules[module].calls == ["sync"]


def test_no_reset_configured() -> None:
    assert build_resetter(AgentConfig(endpoint="http://x/"), Path(".")) is None
