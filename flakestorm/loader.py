"""Read flakestorm.yaml: YAML with line numbers, ${VAR} expansion, ConfigError with file:line.

(Provisional minimal implementation; the full loader keeps this API.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from flakestorm.config import Config
from flakestorm.errors import ConfigError, Problem

ConfigPath = tuple[str | int, ...]


@dataclass(frozen=True)
class LoadedConfig:
    """A valid config plus what the loader learnt while reading it."""

    config: Config
    path: Path
    warnings: tuple[Problem, ...] = ()
    secrets: frozenset[str] = frozenset()
    locations: Mapping[ConfigPath, tuple[int, int]] = field(default_factory=dict)
    digest: str = ""

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in the config are resolved against."""
        return self.path.parent

    def line_of(self, path: ConfigPath) -> int:
        """The 1-based line of the node at ``path`` (or of its nearest ancestor that exists)."""
        while path and path not in self.locations:
            path = path[:-1]
        return self.locations.get(path, (1, 1))[0]


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            [Problem(str(p), 1, 1, "", f"cannot read the file ({exc.strerror})")]
        ) from None
    return load_config_text(text, filename=str(p), env=env, base_dir=p.parent)


def load_config_text(
    text: str,
    filename: str = "flakestorm.yaml",
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> LoadedConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(filename, 1, 1, "", f"invalid YAML ({exc})")]) from None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            [
                Problem(filename, 1, 1, ".".join(str(x) for x in e["loc"]), e["msg"])
                for e in exc.errors()
            ]
        ) from None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    where = (base_dir or Path(".")) / Path(filename).name
    return LoadedConfig(config=config, path=where, digest=digest)
