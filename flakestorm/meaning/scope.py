"""What a check is given: the parts of the config, where the files are, and where to put
what it finds (:class:`Scope`), plus the wording checks share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from flakestorm.errors import Problem
from flakestorm.meaning.parts import Parts
from flakestorm.structure.paths import ConfigPath


class Locate(Protocol):
    """Builds the Problem for ``message`` about the value (or key) at a config path."""

    def __call__(self, path: ConfigPath, message: str, key: bool = False) -> Problem: ...


@dataclass
class Findings:
    """What the checks found: errors (the config is refused) and warnings."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


@dataclass
class Scope:
    """One check's view: ``parts`` (only the parts it declared are sure to have validated),
    ``base_dir`` for ``file:`` paths, and :meth:`error` / :meth:`warn` to report at a config
    path (with ``key=True``: at the key rather than the value)."""

    parts: Parts
    locate: Locate
    base_dir: Path
    found: Findings = field(default_factory=Findings)

    def error(self, path: ConfigPath, message: str, key: bool = False) -> None:
        self.found.errors.append(self.locate(path, message, key))

    def warn(self, path: ConfigPath, message: str, key: bool = False) -> None:
        self.found.warnings.append(self.locate(path, message, key))


def fields_set(model: Any) -> set[str]:
    """The fields explicitly given a non-null value, by their YAML names."""
    out = set()
    fields = type(model).model_fields
    for name in model.model_fields_set:
        if getattr(model, name) is not None:
            out.add(fields[name].alias or name)
    return out


def listing(names: Iterable[str]) -> str:
    """``a, b, c``, or ``none``."""
    names = list(names)
    return ", ".join(names) if names else "none"


def a(word: str) -> str:
    """``'regex'`` -> ``a 'regex'``; ``'overflow'`` -> ``an 'overflow'``."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} '{word}'"
