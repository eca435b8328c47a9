"""Replay session files and contract files (SPEC §7): YAML or JSON, read like
``flakestorm.yaml`` — the line and column of every value, validated with the config models —
so every problem is reported as ``FILE:LINE:COL: path: what is wrong``, in its own file.

A session file holds one session (``id``, ``input``, ``tool_responses`` ...) or
``sessions:`` with a list of them. ``${...}`` in a session file is recorded data, never
expanded. A contract file holds a ``contract:`` section (a whole ``flakestorm.yaml`` is
one), or the contract's fields at the top.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flakestorm.config import Contract, Session
from flakestorm.errors import ConfigError, Problem
from flakestorm.loader.document import read_document
from flakestorm.loader.legacy import LEGACY_HINTS, session_statuses, status_problems
from flakestorm.loader.locations import Locator
from flakestorm.structure import InvalidData, validate_model
from flakestorm.structure.paths import ConfigPath

Place = Callable[[ConfigPath, str], Problem]
"""Builds the Problem for a message about a session's field (path inside the session)."""

_GLOB_CHARS = frozenset("*?[")
SESSION_FILE = "a session (id:, input:, ...) or sessions: with a list of them"
CONTRACT_FILE = "a contract (name:, invariants:, chaos_matrix:) or a contract: section"


@dataclass(frozen=True)
class SessionSource:
    """A session and where it was written, for located messages about it."""

    session: Session
    place: Place
    line: int


def is_glob(pattern: str) -> bool:
    return any(ch in _GLOB_CHARS for ch in pattern)


def session_paths(pattern: str, base_dir: Path) -> list[Path]:
    """The files ``pattern`` names (a path, or a glob), relative to ``base_dir``, sorted."""
    if not is_glob(pattern):
        path = base_dir / pattern
        return [path] if path.is_file() else []
    found = glob.glob(str(base_dir / pattern), recursive=True)
    return sorted(Path(p) for p in found if Path(p).is_file())


def read_sessions(path: Path) -> tuple[list[SessionSource], list[Problem]]:
    """The sessions of one session file, and the problems found in it (located there)."""
    locator, data, problems = _read(path, SESSION_FILE)
    if locator is None:
        return [], problems
    if isinstance(data, dict) and "sessions" in data and "input" not in data:
        items = data["sessions"]
        if not isinstance(items, list):
            return [], [*problems, locator.at(("sessions",), "expected a list of sessions")]
        if not items:
            return [], [*problems, locator.at(("sessions",), "the file holds no session")]
        entries: list[tuple[ConfigPath, Any]] = [(("sessions", i), s) for i, s in enumerate(items)]
    else:
        entries = [((), data)]
    out = []
    for prefix, item in entries:
        # a session file written for flakestorm 2.0.0: its keys are worded as the config's are
        item, zeros = session_statuses(item)
        problems += status_problems([(*prefix, *path) for path in zeros], locator)
        try:
            session = validate_model(Session, item, hints=LEGACY_HINTS)
        except InvalidData as exc:
            problems += [locator.locate((*prefix, *p.path), p.message, p.key) for p in exc.problems]
            continue
        place = _placer(locator, prefix)
        out.append(SessionSource(session, place, locator.position(prefix)[0]))
    return out, problems


def read_contract(path: Path) -> tuple[Contract | None, Place | None, list[Problem]]:
    """The contract of a contract file, how to locate a problem with one of its fields
    (a config path under ``contract``), and the problems found in it (located there)."""
    locator, data, problems = _read(path, CONTRACT_FILE)
    if locator is None:
        return None, None, problems
    prefix: ConfigPath = ("contract",) if isinstance(data, dict) and "contract" in data else ()
    value = data["contract"] if prefix else data
    try:
        contract = validate_model(Contract, value)
    except InvalidData as exc:
        problems += [locator.locate((*prefix, *p.path), p.message, p.key) for p in exc.problems]
        return None, None, problems
    return contract, _placer(locator, prefix), problems


def session_text(session: Session) -> str:
    """``session`` as a YAML session file (what ``replay export`` and ``replay import``
    write): its fields in model order, empty ones (and ``fault: false``, ``verify:
    contract``) left out."""
    data = session.model_dump(mode="json", exclude_none=True)
    left_out = (("verify", "contract"), ("input", ""))
    data = {k: v for k, v in data.items() if v != [] and (k, v) not in left_out}
    for part in (data, *data.get("turns", [])):
        for key in ("tool_responses", "llm_responses"):
            if part.get(key) == []:
                del part[key]
            for response in part.get(key, []):
                if response.get("fault") is False:
                    del response["fault"]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _placer(locator: Locator, prefix: ConfigPath) -> Place:
    def place(path: ConfigPath, message: str) -> Problem:
        return locator.locate((*prefix, *path), message)

    return place


def shown(path: Path) -> str:
    """``path`` as messages show it: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def _read(path: Path, expected: str) -> tuple[Locator | None, Any, list[Problem]]:
    name = shown(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        return None, None, [Problem(name, 1, 1, "", f"cannot read the file ({exc.strerror})")]
    except UnicodeDecodeError:
        return None, None, [Problem(name, 1, 1, "", "the file is not UTF-8 text")]
    try:
        doc = read_document(text, name, {}, expand_env=False, expected=expected)
    except ConfigError as exc:
        return None, None, list(exc.problems)
    except RecursionError:
        return None, None, [Problem(name, 1, 1, "", "the document is nested too deeply")]
    return Locator(name, doc), doc.data, list(doc.problems)
