"""From ``agent`` in the config to an :class:`~flakestorm.agents.Agent`."""

from __future__ import annotations

from pathlib import Path

from flakestorm.agents import ManagedAgent
from flakestorm.agents.console import AgentConsole
from flakestorm.agents.importer import Locate, default_locate
from flakestorm.config import AgentConfig, AgentType


def build_agent(
    config: AgentConfig,
    base_dir: Path,
    locate: Locate = default_locate,
    console: AgentConsole | None = None,
) -> ManagedAgent:
    """The agent ``config`` describes; ``base_dir`` is the config file's directory.

    A python agent is imported here: any import problem raises
    :class:`~flakestorm.errors.ConfigError` at ``agent.endpoint``, placed with ``locate``.
    The caller closes the agent when the run ends. ``console``: where a python agent's
    prints and logging go, per invocation (an http agent's are its own process's).
    """
    if config.type is AgentType.PYTHON:
        from flakestorm.agents.python import PythonAgent

        return PythonAgent(config, base_dir, locate=locate, console=console)
    from flakestorm.agents.http import HttpAgent

    return HttpAgent(config)
