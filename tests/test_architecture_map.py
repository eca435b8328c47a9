"""ARCHITECTURE.md's "Where each concept lives" map is true of the tree: every module a row lists
exists, and every module named for a concept is listed in that concept's row.

A row is ``| concept | named | modules, in data-flow order |``: ``named`` holds the words that
name the concept in backticks (a ``*`` stands for any letters: ``replay*``), the modules their
paths under ``flakestorm/`` in backticks. A module is named for a concept when one of its words
matches the module's file name (``replays.py``), a ``_``-separated part of it
(``mutation_view.py``), or the name of a package it is in (``checks/judge/``); a package's
``__init__.py`` (its face) and ``__main__.py`` are not. When a module moves, the row is what
changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "flakestorm"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
HEADING = "## Where each concept lives"


@dataclass(frozen=True)
class Concept:
    name: str
    words: tuple[str, ...]
    modules: tuple[str, ...]
    """Paths under ``flakestorm/``, in data-flow order."""


def concepts(text: str) -> list[Concept]:
    """The rows of the map in ``text`` (an ARCHITECTURE.md)."""
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= {"-"}:
            continue
        if cells[0] == "concept":  # the header
            continue
        words = tuple(re.findall(r"`([^`]+)`", cells[1]))
        modules = tuple(re.findall(r"`([^`]+)`", cells[2]))
        rows.append(Concept(cells[0], words, modules))
    return rows


def modules_of(package: Path) -> list[str]:
    """Every module of the package, as a path under it (``chaos/mcp/replay.py``)."""
    return sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py"))


def named_for(module: str, words: tuple[str, ...]) -> bool:
    """Whether ``module`` (a path under ``flakestorm/``) is named for one of ``words``."""
    *packages, file = module.split("/")
    stem = file.removesuffix(".py")
    if stem in ("__init__", "__main__"):
        return False
    names = {*packages, stem, *stem.split("_")}
    return any(fnmatchcase(name, word) for word in words for name in names)


def missing(rows: list[Concept], modules: list[str]) -> list[str]:
    """The listed modules that do not exist."""
    known = set(modules)
    return [
        f"{row.name}: {m} does not exist" for row in rows for m in row.modules if m not in known
    ]


def unlisted(rows: list[Concept], modules: list[str]) -> list[str]:
    """The modules named for a concept that its row does not list."""
    return [
        f"{row.name}: {module} is named for it ({', '.join(row.words)}) but not listed"
        for row in rows
        for module in modules
        if named_for(module, row.words) and module not in row.modules
    ]


def test_every_module_the_map_lists_exists() -> None:
    rows = concepts(ARCHITECTURE.read_text(encoding="utf-8"))
    wrong = missing(rows, modules_of(PACKAGE))
    assert not wrong, "\n".join(wrong)


def test_every_module_named_for_a_concept_is_in_its_row() -> None:
    rows = concepts(ARCHITECTURE.read_text(encoding="utf-8"))
    wrong = unlisted(rows, modules_of(PACKAGE))
    assert not wrong, "\n".join(wrong)


def test_the_map_holds_the_concepts_that_run_through_the_layers() -> None:
    """The map is read (a test of nothing passes on an empty table): replay's modules span eight
    folders, and each concept says which words name it."""
    rows = {row.name: row for row in concepts(ARCHITECTURE.read_text(encoding="utf-8"))}
    assert {"replay", "tool and LLM faults", "sessions and conversations", "mutations"} <= set(rows)
    assert {"baselines", "the judge (`llm_judge`)"} <= set(rows)
    assert all(row.words and row.modules for row in rows.values())
    replay = rows["replay"]
    assert replay.modules[0] == "config/replays.py" and replay.modules[-1] == "cli/replay.py"
    assert len({m.rsplit("/", 1)[0] for m in replay.modules}) == 8


SAMPLE = """\
# Architecture

## Where each concept lives

| concept | named | modules, in data-flow order |
|---|---|---|
| replay | `replay*` | `config/replays.py` → `engine/phases/replay.py` → `gone/x.py` |
| the judge | `judge` | `checks/judge/client.py` |

## Modules
"""
TREE = [
    "__init__.py",
    "checks/judge/__init__.py",
    "checks/judge/client.py",
    "checks/judge/cache.py",
    "cli/replay.py",
    "config/replays.py",
    "engine/phases/replay.py",
    "replay/export.py",
    "reporters/mutation_view.py",
]


def test_the_rules_find_a_module_gone_and_a_module_left_out() -> None:
    rows = concepts(SAMPLE)
    assert [(r.name, r.words, len(r.modules)) for r in rows] == [
        ("replay", ("replay*",), 3),
        ("the judge", ("judge",), 1),
    ]
    assert missing(rows, TREE) == ["replay: gone/x.py does not exist"]
    assert unlisted(rows, TREE) == [
        "replay: cli/replay.py is named for it (replay*) but not listed",
        "replay: replay/export.py is named for it (replay*) but not listed",
        "the judge: checks/judge/cache.py is named for it (judge) but not listed",
    ]


def test_a_name_says_a_concept_by_a_whole_word_or_a_pattern() -> None:
    assert named_for("reporters/mutation_view.py", ("mutation",))
    assert named_for("checks/judge/asking.py", ("judge",))
    assert named_for("chaos/replayer.py", ("replay*",))
    assert not named_for("checks/judge/__init__.py", ("judge",))
    assert not named_for("baseline/judgement.py", ("judge",))  # another word
    assert not named_for("loader/sessions.py", ("session",))
    assert not named_for("reporters/escape.py", ("cape",))
