"""What a check is given: the parts of the config, where the files are, and where to put
what it finds (:class:`Scope`), plus the wording checks share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def type_fields(
    scope: Scope,
    at: ConfigPath,
    what: str,
    model: Any,
    fields: tuple[tuple[str, ...], tuple[str, ...]],
    other_types: frozenset[str],
    notes: Mapping[str, str] | None = None,
) -> None:
    """The fields of ``model``, an item whose type decides its fields (an invariant, a context
    attack: ``what``, its ``type``): each of its type's required fields given, and none that only
    other types read (``other_types``: every type's fields); ``notes`` ends the message about
    such a field by its name."""
    required, optional = fields
    given = fields_set(model)
    kind = model.type.value
    its = f"(its fields: {listing((*required, *optional))})"
    for name in required:
        if name not in given:
            scope.error(at, f"{a(kind)} {what} needs '{name}' {its}")
    for name in sorted(given & other_types - {*required, *optional}):
        note = (notes or {}).get(name, "")
        scope.error(
            (*at, name), f"'{name}' does not apply to {a(kind)} {what} {its}{note}", key=True
        )
