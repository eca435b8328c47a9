"""Resetting the agent's state before each cell (``agent.reset_endpoint`` / ``reset_function``).

A reset that fails raises :class:`HarnessError` with the reason: the executor marks the cell
ERRORED, never silently runs it on dirty state.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Protocol

import requests

from flakestorm.agents.deadline import deadline
from flakestorm.agents.http import network_reason, new_session
from flakestorm.agents.importer import Locate, default_locate, describe_exception, load_reference
from flakestorm.agents.readiness import resolve_url
from flakestorm.agents.workers import DaemonPool
from flakestorm.config import AgentConfig
from flakestorm.errors import ConfigError, HarnessError


class Resetter(Protocol):
    """Brings the agent back to a clean state; raises :class:`HarnessError` if it cannot."""

    def reset(self) -> None: ...


class EndpointReset:
    """POSTs to a reset URL; anything but a 2xx reply is a failure, and so is no complete reply
    within ``agent.timeout`` (a wall-clock deadline, however slowly the server answers)."""

    def __init__(self, url: str, timeout_ms: int, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self._timeout_s = timeout_ms / 1000
        self._headers = dict(headers or {})
        self._session = new_session(pool_size=2)

    def reset(self) -> None:
        with deadline(self._timeout_s) as limit:
            try:
                response = self._session.post(
                    self.url, headers=self._headers, timeout=self._timeout_s
                )
                response.close()
            except requests.RequestException as exc:
                reason = "timed out" if limit.expired else network_reason(exc)
                raise HarnessError(f"reset failed: POST {self.url}: {reason}") from None
        if limit.expired:
            raise HarnessError(
                f"reset failed: POST {self.url}: no complete reply within "
                f"{self._timeout_s * 1000:.0f} ms (agent.timeout)"
            )
        if not 200 <= response.status_code < 300:
            raise HarnessError(f"reset failed: POST {self.url} returned {response.status_code}")

    def close(self) -> None:
        self._session.close()


class FunctionReset:
    """Calls a python function (sync or async) with no arguments, within a timeout."""

    def __init__(self, fn: Callable[[], Any], name: str, timeout_ms: int) -> None:
        self._fn = fn
        self.name = name
        self._timeout_s = timeout_ms / 1000
        self._pool = DaemonPool(name="flakestorm-reset", max_workers=4)

    def reset(self) -> None:
        future = self._pool.submit(self._call)
        try:
            future.result(timeout=self._timeout_s)
        except FutureTimeout:
            raise HarnessError(
                f"reset failed: {self.name} did not return within {self._timeout_s * 1000:.0f} ms"
            ) from None
        except Exception as exc:
            raise HarnessError(
                f"reset failed: {self.name} raised {describe_exception(exc)}"
            ) from None

    def _call(self) -> None:
        result = self._fn()
        if inspect.isawaitable(result):
            asyncio.run(_awaited(result))


class Resets:
    """Several resets in order (endpoint first, then function, when both are configured)."""

    def __init__(self, resetters: Sequence[Resetter]) -> None:
        self.resetters = tuple(resetters)

    def reset(self) -> None:
        for resetter in self.resetters:
            resetter.reset()

    def close(self) -> None:
        for resetter in self.resetters:
            close = getattr(resetter, "close", None)
            if callable(close):
                close()


def build_resetter(
    config: AgentConfig, base_dir: Path, locate: Locate = default_locate
) -> Resetter | None:
    """The reset ``config`` asks for, or None. A reset function that cannot be imported is a
    :class:`~flakestorm.errors.ConfigError` at ``agent.reset_function``."""
    resetters: list[Resetter] = []
    if config.reset_endpoint is not None:
        if not _is_url(config.reset_endpoint) and not _is_url(config.endpoint):
            raise ConfigError(
                [
                    locate(
                        "agent.reset_endpoint",
                        "a relative reset_endpoint needs an http agent.endpoint "
                        "(expected an absolute http:// or https:// URL)",
                    )
                ]
            )
        url = resolve_url(config.endpoint, config.reset_endpoint)
        resetters.append(EndpointReset(url, config.timeout, dict(config.headers)))
    if config.reset_function is not None:
        fn = load_reference(config.reset_function, base_dir, "agent.reset_function", locate)
        if not callable(fn):
            raise _not_callable(config.reset_function, locate)
        resetters.append(FunctionReset(fn, config.reset_function, config.timeout))
    if not resetters:
        return None
    return resetters[0] if len(resetters) == 1 else Resets(resetters)


def _not_callable(reference: str, locate: Locate) -> ConfigError:
    return ConfigError([locate("agent.reset_function", f'"{reference}" is not callable')])


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
