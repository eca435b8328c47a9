"""What the chaos proxy's tests share: the weather tool they put behind the proxy, scenarios of
tool faults, and calls through the proxy.

::

    with LoopbackServer(weather) as tool, ChaosProxy(tools={"weather": tool.url}) as proxy:
        proxy.activate(scenario(fault("error", error_code=503)))
        assert session().get(f"{proxy.url}/tools/weather/today", timeout=5).status_code == 503
        assert last(proxy).fired
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from flakestorm.chaos.delivery.interactions import Interaction
from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.config import ContextAttack, ToolFault
from support.server import LoopbackServer, Request, Response

WEATHER = {"city": "Paris", "forecast": "sunny with a light breeze", "temp_c": 21}
"""What the weather tool answers (with the path it was called on)."""


def weather(request: Request) -> Response:
    """The weather tool: a :class:`~support.server.LoopbackServer` handler."""
    return Response.json({**WEATHER, "path": request.path})


@pytest.fixture
def upstream() -> Iterator[LoopbackServer]:
    """The weather tool on a loopback port (a fixture: import it into the test module)."""
    with LoopbackServer(weather) as server:
        yield server


@pytest.fixture
def proxy(upstream: LoopbackServer) -> Iterator[ChaosProxy]:
    """A chaos proxy with the weather tool as ``/tools/weather`` (a fixture)."""
    with ChaosProxy(tools={"weather": upstream.url}, upstream_timeout_s=0.5) as p:
        yield p


def scenario(
    *faults: ToolFault, attacks: tuple[ContextAttack, ...] = (), **kw: Any
) -> ActiveScenario:
    """An active scenario (``storm``, seed 7 unless given) with these tool faults."""
    return ActiveScenario(
        name=kw.pop("name", "storm"),
        seed=kw.pop("seed", 7),
        tool_faults=faults,
        context_attacks=attacks,
        **kw,
    )


def fault(mode: str, **kw: Any) -> ToolFault:
    """A tool fault on the weather tool (or ``tool=...``)."""
    return ToolFault.model_validate({"tool": kw.pop("tool", "weather"), "mode": mode, **kw})


def last(proxy: ChaosProxy) -> Interaction:
    """The interaction the proxy logged last."""
    return proxy.log.snapshot()[-1]


def session() -> requests.Session:
    """A requests session that ignores the environment's proxy settings."""
    s = requests.Session()
    s.trust_env = False
    return s


def assert_still_serving(proxy: ChaosProxy) -> None:
    """The proxy still answers a plain call to the weather tool."""
    assert requests.get(f"{proxy.url}/tools/weather/ok", timeout=5).json()["path"] == "/ok"


def connection(proxy: ChaosProxy) -> contextlib.closing[http.client.HTTPConnection]:
    """A raw HTTP/1.1 connection to the proxy (for what requests hides), closed after the
    ``with``."""
    return contextlib.closing(http.client.HTTPConnection(proxy.host, proxy.port, timeout=5))
