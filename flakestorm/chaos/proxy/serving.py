"""The proxy as a service: configured from the environment, run until a signal, health-checked.

The Docker image runs it in ``FLAKESTORM_MODE=proxy``; ``python -m flakestorm.chaos.proxy
[--health [URL]]`` (:func:`main`) is its proxy mode and its health command.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

import requests

from flakestorm.chaos.proxy.control import CONTROL_PREFIX
from flakestorm.chaos.proxy.routes import check_url
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.errors import UsageError

__all__ = ["health_check", "main", "parse_tools", "proxy_from_env", "serve_from_env"]

DEFAULT_PORT = 8080


def proxy_from_env(env: Mapping[str, str]) -> ChaosProxy:
    """The proxy the Docker image runs in ``FLAKESTORM_MODE=proxy`` (not started).

    ``FLAKESTORM_PROXY_PORT`` (8080), ``FLAKESTORM_LLM_UPSTREAM`` (URL, ``mock`` or
    ``cassette:PATH``), ``FLAKESTORM_TOOLS`` (``name=url,name=url``), ``FLAKESTORM_PROXY_TOKEN``,
    ``FLAKESTORM_PROXY_RECORD`` (a cassette path to record to); listens on 0.0.0.0. The tool
    routes and LLM upstream are defaults: a run with ``proxy.url`` pushes its config's over
    them (``PUT /_flakestorm/routes``).
    """
    port_text = env.get("FLAKESTORM_PROXY_PORT", "").strip() or str(DEFAULT_PORT)
    if not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise UsageError(f"FLAKESTORM_PROXY_PORT: {port_text!r} is not a port number (0-65535)")
    tools = parse_tools(
        [t for t in env.get("FLAKESTORM_TOOLS", "").split(",") if t.strip()], "FLAKESTORM_TOOLS"
    )
    return ChaosProxy(
        host=env.get("FLAKESTORM_PROXY_HOST", "0.0.0.0"),
        port=int(port_text),
        llm_upstream=env.get("FLAKESTORM_LLM_UPSTREAM", "").strip() or None,
        tools=tools,
        token=env.get("FLAKESTORM_PROXY_TOKEN", "").strip() or None,
        record=env.get("FLAKESTORM_PROXY_RECORD", "").strip() or None,
    )


def parse_tools(items: Iterable[str], where: str) -> dict[str, str]:
    """``["search=http://s", ...]`` -> ``{"search": "http://s"}``; a bad item is a UsageError."""
    tools = {}
    for item in items:
        name, sep, url = item.strip().partition("=")
        if not sep or not name.strip() or not url.strip():
            raise UsageError(f"{where}: {item!r} is not NAME=URL (e.g. search=http://search:8000)")
        tools[name.strip()] = check_url(url.strip(), f"{where} {name.strip()}")
    return tools


def serve_from_env(
    env: Mapping[str, str],
    stop: threading.Event | None = None,
    on_ready: Callable[[ChaosProxy], None] | None = None,
) -> None:
    """Run :func:`proxy_from_env`'s proxy until ``stop`` is set (default: until SIGTERM or
    SIGINT, when called from the main thread)."""
    from flakestorm.stopping import stopping_on_signals

    proxy = proxy_from_env(env)
    if stop is None:
        stop = threading.Event()
    with stopping_on_signals(stop), proxy:
        if on_ready is not None:
            on_ready(proxy)
        while not stop.wait(1.0):
            pass


def health_check(url: str, token: str | None = None, timeout_s: float = 3.0) -> int:
    """0 when the proxy at ``url`` answers ``/_flakestorm/health``, else 1 (a health command)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with requests.Session() as session:
            session.trust_env = False
            response = session.get(
                url.rstrip("/") + CONTROL_PREFIX + "/health", headers=headers, timeout=timeout_s
            )
            ok = response.status_code == 200 and response.json().get("status") == "ok"
    except (requests.RequestException, ValueError, AttributeError):
        return 1
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flakestorm.chaos.proxy [--health [URL]]``: the Docker image's proxy mode
    and health command (configured by environment, see :func:`proxy_from_env`)."""
    import os
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ
    if args[:1] == ["--health"]:
        port = env.get("FLAKESTORM_PROXY_PORT", "").strip() or str(DEFAULT_PORT)
        url = args[1] if len(args) > 1 else f"http://127.0.0.1:{port}"
        return health_check(url, env.get("FLAKESTORM_PROXY_TOKEN") or None)
    if args:
        sys.stderr.write("usage: python -m flakestorm.chaos.proxy [--health [URL]]\n")
        return 2

    def ready(proxy: ChaosProxy) -> None:
        sys.stdout.write(f"flakestorm proxy listening on {proxy.url}\n")
        sys.stdout.flush()

    try:
        serve_from_env(env, on_ready=ready)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return int(exc.exit_code)
    return 0
