"""What ``flakestorm migrate`` would write, validated before it is written (SPEC §14): the
problems of the migrated config that migrate itself made.

A problem of the migrated config is migrate's own when it is at a place migrate changed (the
key it wrote or removed, inside what it wrote, or a section around it: a section it emptied)
and the config as it was had no problem there. Everything else the result still has is the
user's to fix (an agent type migrate cannot rewrite, a regex that does not compile, a
``similarity_threshold`` of their own on a type that reads none); it is written, and then
reported as ``validate`` reports it.

Where migrate changed is read from the two documents, not from the rules: what differs
between the file as it was and as migrate would write it, key by key and list item by list
item, with a section migrate moves (:data:`flakestorm.authoring.migrate.MOVES`) compared at
its new place. Session files are not rewritten before this check, so it reads them as they
are; what they still hold is reported once they are written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flakestorm.authoring.migrate import CONFIG, MOVES, Migrated
from flakestorm.authoring.yaml_text import YamlText
from flakestorm.errors import ConfigError, Problem
from flakestorm.loader import load_config_text
from flakestorm.loader.sessions import shown
from flakestorm.structure.paths import ConfigPath, format_path


def made_by_migrate(migrated: Migrated, base_dir: Path) -> list[Problem]:
    """The problems of ``migrated.after`` that migrate made (relative paths: ``base_dir``);
    empty when it changed nothing or made nothing invalid."""
    if not migrated.changed:
        return []
    name = shown(migrated.path)
    after = _problems(migrated.after, name, base_dir)
    if not after:
        return []
    had = {(p.file, p.path) for p in _problems(migrated.before, name, base_dir)}
    changed = [format_path(path) for path in _changes(migrated.before, migrated.after, name)]
    return [
        p
        for p in after
        if p.file == name
        and (p.file, p.path) not in had
        and any(_related(p.path, c) for c in changed)
    ]


def _problems(text: str, name: str, base_dir: Path) -> tuple[Problem, ...]:
    try:
        load_config_text(text.removeprefix("\ufeff"), filename=name, base_dir=base_dir)
    except ConfigError as exc:
        return exc.problems
    return ()


def _changes(before: str, after: str, name: str) -> Iterator[ConfigPath]:
    was = _moved(YamlText(before.removeprefix("\ufeff"), name, CONFIG.expected).doc.data)
    now = YamlText(after.removeprefix("\ufeff"), name, CONFIG.expected).doc.data
    yield from _differences(was, now)


def _moved(data: Any) -> Any:
    """``data`` with each section migrate moves at its new place (where migrate puts it)."""
    if not isinstance(data, dict):
        return data
    data = copy.deepcopy(data)
    for old, new in MOVES.items():
        parent = data.get(new[0])
        if old in data and isinstance(parent, dict) and not parent.get(new[1]):
            parent[new[1]] = data.pop(old)
    return data


def _differences(was: Any, now: Any, at: ConfigPath = ()) -> Iterator[ConfigPath]:
    """The paths where ``was`` and ``now`` differ: a key added or removed, a value changed;
    mappings and lists of the same length compared item by item."""
    if isinstance(was, dict) and isinstance(now, dict):
        for key in dict.fromkeys([*was, *now]):
            if key not in was or key not in now:
                yield (*at, key)
            else:
                yield from _differences(was[key], now[key], (*at, key))
    elif isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
        for i, (old, new) in enumerate(zip(was, now, strict=True)):
            yield from _differences(old, new, (*at, i))
    elif was != now or type(was) is not type(now):
        yield at


def _related(path: str, changed: str) -> bool:
    """Whether ``path`` is ``changed``, inside it, or around it."""
    inner, outer = (path, changed) if len(path) >= len(changed) else (changed, path)
    return inner == outer or not outer or inner.startswith((outer + ".", outer + "["))
