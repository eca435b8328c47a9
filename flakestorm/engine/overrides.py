"""What the command line (or the action's inputs) changes of a config for one run: the values
that win over the file (:class:`Overrides`), written into the loaded config, and where the
reports go."""

from __future__ import annotations

import dataclasses
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from flakestorm.config import AgentType, Proxy
from flakestorm.errors import UsageError
from flakestorm.loader import LoadedConfig
from flakestorm.results.shards import Shard


@dataclass(frozen=True)
class Overrides:
    """Command-line (or action input) values that win over the config."""

    concurrency: int | None = None
    seed: int | None = None
    min_score: float | None = None
    output_dir: str | None = None
    agent_url: str | None = None
    """Replaces ``agent.endpoint`` (http agents), e.g. a service container's address in CI."""
    proxy_url: str | None = None
    """Replaces ``proxy.url``."""
    ready_timeout_ms: int | None = None
    """Replaces ``agent.ready_timeout``."""
    record: str | None = None
    """Record the real LLM and tool exchanges of the run into this cassette file."""
    shard: Shard | None = None
    """Run only this part of every phase's items (``--shard K/N``)."""
    proxy_token: str | None = None
    """Replaces ``proxy.token`` (the proxy service's control API token)."""


def _rebase(url: str, old_endpoint: str, new_endpoint: str) -> str:
    """``url`` moved from ``old_endpoint``'s origin to ``new_endpoint``'s (other URLs,
    and paths relative to the endpoint, are kept)."""
    old = urllib.parse.urlsplit(old_endpoint)
    target = urllib.parse.urlsplit(url)
    if (target.scheme, target.netloc) != (old.scheme, old.netloc) or not target.netloc:
        return url
    new = urllib.parse.urlsplit(new_endpoint)
    return urllib.parse.urlunsplit(target._replace(scheme=new.scheme, netloc=new.netloc))


def output_dir(loaded: LoadedConfig, overrides: Overrides) -> Path:
    """Where reports go: ``--output``, else ``output.dir`` (relative to the working directory)."""
    return Path(overrides.output_dir or loaded.config.output.dir)


def apply_overrides(loaded: LoadedConfig, overrides: Overrides) -> LoadedConfig:
    """``loaded`` with the overrides written into its config (the config stays immutable)."""
    config = loaded.config
    agent_update: dict[str, object] = {}
    if overrides.agent_url is not None:
        if config.agent.type is not AgentType.HTTP:
            raise UsageError("--agent-url applies to http agents; this config's agent is python")
        agent_update["endpoint"] = overrides.agent_url
        agent_update["start"] = None  # the agent runs elsewhere
        # URLs on the old endpoint's origin (health, reset) move with it
        for name in ("health_endpoint", "reset_endpoint"):
            value = getattr(config.agent, name)
            if value is not None:
                agent_update[name] = _rebase(value, config.agent.endpoint, overrides.agent_url)
    if overrides.ready_timeout_ms is not None:
        agent_update["ready_timeout"] = overrides.ready_timeout_ms
    update: dict[str, object] = {}
    if agent_update:
        update["agent"] = config.agent.model_copy(update=agent_update)
    proxy_update = {
        name: value
        for name, value in (("url", overrides.proxy_url), ("token", overrides.proxy_token))
        if value is not None
    }
    if proxy_update:
        update["proxy"] = (config.proxy or Proxy()).model_copy(update=proxy_update)
    if overrides.seed is not None:
        update["advanced"] = config.advanced.model_copy(update={"seed": overrides.seed})
    if not update:
        return loaded
    return dataclasses.replace(loaded, config=config.model_copy(update=update))
