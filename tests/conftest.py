"""Fixtures shared by the test modules (helpers that are not fixtures live in ``support/``)."""

from __future__ import annotations

import gc
import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.docker import SHOWN

pytest_plugins = ["support.proxy_rig"]
"""Fixtures of the chaos proxy's tests: ``upstream`` (the weather tool) and ``proxy`` (a chaos
proxy in front of it); a test module with fixtures of those names uses its own."""

_names = itertools.count()

WriteModule = Callable[[str], str]


@pytest.fixture(scope="module", autouse=True)
def _collected_at_the_end() -> Iterator[None]:
    """Each module's garbage collected when it ends: a socket or file it left open in a
    reference cycle warns (and so fails: ``filterwarnings = error``) in that module's last
    test, not in whichever later test the collector happens to run in."""
    yield
    gc.collect()


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteModule]:
    """``write_module(source) -> name``: a uniquely named module in ``tmp_path``, importable
    for the test (and forgotten by ``sys.modules`` after it)."""
    monkeypatch.setattr(sys, "path", [str(tmp_path.resolve()), *sys.path])
    written: list[str] = []

    def write(source: str) -> str:
        name = f"fs_module_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


SLOWEST_FIRST = (
    "test_docker_e2e.py",
    "test_mcp_proxy.py",
    "test_reporters_markdown.py",
    "test_compatibility.py",
    "test_interrupt.py",
    "test_frameworks_paths.py",
    "test_action_runner.py",
    "test_merge.py",
    "test_config_fuzz.py",
    "test_contract_run.py",
    "test_deadline.py",
)
"""The modules that take longest (from minutes down to 20 s on two cores), started first when
the suite runs on several workers (scripts/test: pytest-xdist, one module per worker at a time),
so that none starts last and runs alone while the other workers are idle. The runner test (3
min) comes after five shorter ones: it needs the images the Docker test builds first, which on a
new machine take minutes, and by then they are built."""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # on a worker of pytest-xdist
        first = {name: rank for rank, name in enumerate(SLOWEST_FIRST)}
        items.sort(key=lambda item: first.get(item.path.name, len(first)))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Print what a worker's tests showed (``support.docker.show``): a worker's own output is
    seen by no one."""
    reporter = node.config.pluginmanager.get_plugin("terminalreporter")
    for line in getattr(node, "workeroutput", {}).get(SHOWN, []):
        reporter.write_line("")
        reporter.write_line(line)
