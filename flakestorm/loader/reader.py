"""Read flakestorm.yaml: bytes -> text -> document -> Config -> LoadedConfig, or ConfigError.

Each step collects every problem it finds before the next one runs; the problems of all steps
are reported together, in file order, without repeats and without echoes (nothing is reported
under a key that is itself unknown, nor about a value whose variable was unset). The meaning
checks run on every part of the file that validated, even when others did not, so one pass
finds everything; a refused config's warnings ride on its ConfigError. Whatever the
input, the only exception that leaves :func:`load_config_text` is
:class:`~flakestorm.errors.ConfigError`.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from flakestorm.config import Config
from flakestorm.errors import ConfigError, Problem
from flakestorm.loader import replays  # noqa: F401 (registers the replay sessions' checks)
from flakestorm.loader.document import Document, read_document, sorted_error
from flakestorm.loader.env import redacted
from flakestorm.loader.legacy import (
    LEGACY_HINTS,
    MOVED_HERE,
    precheck,
    prepare,
    version_warnings,
)
from flakestorm.loader.locations import Locator
from flakestorm.meaning import Parts, check
from flakestorm.redaction import Redactor
from flakestorm.structure import InvalidData, validate_model
from flakestorm.structure.paths import ConfigPath, format_path


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

    @functools.cached_property
    def redactor(self) -> Redactor:
        """The one redaction function for this config's secrets: every line printed of it and
        every item a run spools (:mod:`flakestorm.redaction`)."""
        return Redactor(self.secrets)

    def line_of(self, path: ConfigPath) -> int:
        """The 1-based line of the node at ``path`` (or of its nearest ancestor that exists)."""
        while path and path not in self.locations:
            path = path[:-1]
        return self.locations.get(path, (1, 1))[0]


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read and validate the config file at ``path``; raise ConfigError with every problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError([Problem(str(p), 1, 1, "", f"cannot read the file ({reason})")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        msg = f"the file is not UTF-8 text (byte 0x{raw[exc.start]:02x})"
        raise ConfigError([Problem(str(p), line, col, "", msg)]) from None
    return load_config_text(text, filename=str(p), env=env, base_dir=p.parent)


def load_config_text(
    text: str,
    filename: str = "flakestorm.yaml",
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> LoadedConfig:
    """Validate config ``text`` as if read from ``filename`` (relative paths: ``base_dir``)."""
    environ: Mapping[str, str] = os.environ if env is None else env
    try:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        doc = read_document(text.removeprefix("\ufeff"), filename, environ)
        return _validate(doc, filename, digest, base_dir)
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(
            [Problem(filename, 1, 1, "", "the document is nested too deeply")]
        ) from None


def _validate(doc: Document, filename: str, digest: str, base_dir: Path | None) -> LoadedConfig:
    where = Locator(filename, doc)
    problems = list(doc.problems)
    data = doc.data
    problems.extend(precheck(data, where))
    config: Config | None = None
    prepared = prepare(data)
    try:
        config = validate_model(Config, prepared, doc.secrets, doc.scalars, LEGACY_HINTS)
    except InvalidData as exc:
        problems.extend(where.at(p.path, p.message, p.key) for p in exc.problems)
    # the meaning checks run on every part that validated, whole config or not
    parts = Parts.of_config(config) if config is not None else Parts.of_data(prepared)
    found = check(parts, where.locate, base_dir or Path("."))
    problems.extend(found.errors)
    warnings = [*found.warnings, *version_warnings(parts.version, parts.scoring, where)]
    # linear in the number of problems: each problem's ancestors are looked up in sets
    unknown = {p.path for p in problems if p.message.startswith("unknown key")}
    unset = _unset_paths(doc)
    moved = {k for k, key in MOVED_HERE.items() if isinstance(data, dict) and key in data}
    problems = [
        p
        for p in problems
        if not _masked(p, unset)
        and not any(a in unknown for a in _ancestors(p.path, ".["))
        and (p.path, p.message) not in moved
    ]
    warnings = redacted(_dedupe(warnings), doc.secrets)
    if problems or config is None:
        refused = sorted_error(redacted(_dedupe(problems), doc.secrets))
        raise ConfigError(refused.problems, _in_file_order(warnings))
    root = base_dir if base_dir is not None else Path(".")
    return LoadedConfig(
        config=config,
        path=root / Path(filename).name,
        warnings=_in_file_order(warnings),
        secrets=frozenset(doc.secrets),
        locations=dict(doc.values),
        digest=digest,
    )


def _in_file_order(problems: list[Problem]) -> tuple[Problem, ...]:
    return tuple(sorted(problems, key=lambda p: (p.line, p.column)))


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[Problem] = set()
    out = []
    for p in problems:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _ancestors(path: str, separators: str) -> Iterator[str]:
    """The paths ``path`` is under: ``a.b[0].c`` -> ``a``, ``a.b``, ``a.b[0]`` (with ``.[``)."""
    for i, char in enumerate(path):
        if char in separators and i:
            yield path[:i]


def _env_problem(problem: Problem) -> bool:
    return "environment variable" in problem.message or "'${'" in problem.message


def _unset_paths(doc: Document) -> set[str]:
    """The paths of values whose variable was unset (or malformed): they have their problem."""
    flagged = {p.path for p in doc.problems if _env_problem(p)}
    return {shown for shown in (format_path(p) for p in doc.env_paths) if shown in flagged}


def _masked(problem: Problem, unset: set[str]) -> bool:
    """A value whose variable was unset already has its problem: do not report it twice."""
    if _env_problem(problem) or "variable reference" in problem.message:
        return False
    return problem.path in unset or any(a in unset for a in _ancestors(problem.path, "."))
