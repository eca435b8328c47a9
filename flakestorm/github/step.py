"""The action's step: its settings and where it runs (``GITHUB_WORKSPACE``), with the paths as
the repository names them (annotations and outputs want them relative to its root)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flakestorm.github.settings import Settings

if TYPE_CHECKING:
    from flakestorm.engine.runner import Overrides

__all__ = ["Step"]


@dataclass(frozen=True)
class Step:
    """One run of the action: ``settings`` in the environment ``env``."""

    settings: Settings
    env: Mapping[str, str]
    root: Path
    """The workspace (the repository's checkout)."""
    config_path: Path
    config_name: str
    """The config as the repository names it (relative to ``root`` when it is inside)."""

    @classmethod
    def of(cls, settings: Settings, env: Mapping[str, str]) -> Step:
        root = Path(env.get("GITHUB_WORKSPACE") or Path.cwd())
        config = Path(settings.config)
        path = config if config.is_absolute() else root / config
        return cls(settings, env, root, path, _relative(path, root))

    def relative(self, path: Path) -> str:
        """``path`` relative to the workspace (as annotations and outputs want it)."""
        return _relative(path, self.root)

    def config_file(self) -> Path:
        """The config to load: relative to the working directory when that is the workspace
        (as in the action), so reports name the config as the repository does."""
        here = Path.cwd().resolve() == self.root.resolve()
        return Path(self.config_name) if here else self.config_path

    def report_dir(self, configured: str) -> Path:
        """The report directory: the ``report-dir`` input, else ``configured``."""
        return self.root / (self.settings.report_dir or configured)

    def secrets(self, loaded: Iterable[str]) -> list[str]:
        """The secrets to mask, sorted: the config's (``loaded``) and the proxy token (usually
        this run's github.token, which the runner masks itself; a token of the user's own is
        masked here)."""
        secrets = set(loaded)
        if self.settings.proxy_token:
            secrets.add(self.settings.proxy_token)
        return sorted(secrets)

    def overrides(self, output_dir: Path) -> Overrides:
        """The inputs that win over the config, for the engine."""
        from flakestorm.engine.runner import Overrides

        settings = self.settings
        return Overrides(
            concurrency=settings.concurrency,
            seed=settings.seed,
            min_score=settings.min_score,
            output_dir=str(output_dir),
            agent_url=settings.agent_url,
            proxy_url=settings.proxy_url,
            proxy_token=settings.proxy_token,
            ready_timeout_ms=settings.ready_timeout,
            shard=settings.shard,
        )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
