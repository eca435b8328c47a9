"""Where a config value is written: config paths -> YAML paths -> line and column.

A *config path* names a value of the :class:`~flakestorm.config.Config` model (what the
meaning checks and the runner speak of); a *YAML path* names a node of the file. They differ
where the file is shorter than the model: dict-form context attacks
(``context_attacks: {overflow: {...}}``, the key is the type), the flat scoring form (no
``weights:``) and ``schema`` (the model's ``json_schema``); and where a key is misspelt
(``patern:``), the config path names the field it means (``pattern``) and the YAML path the key
as written.
"""

from __future__ import annotations

from typing import Any

from flakestorm.errors import Problem
from flakestorm.loader.document import Document, Location
from flakestorm.structure.paths import ConfigPath, format_path
from flakestorm.structure.wording import did_you_mean

_MAX_KEYS_GUESSED = 100
"""A mapping with more keys is not searched for a misspelling (each key costs a guess)."""


def _written_as(node: dict[Any, Any], name: str | int) -> str | int:
    """The key of ``node`` that a misspelt ``name`` is written as (the meaning checks read a
    part with misspelt keys as meant: see :func:`~flakestorm.structure.validate_alone`), or
    ``name`` when there is none."""
    if isinstance(name, int) or len(node) > _MAX_KEYS_GUESSED:
        return name
    written = [k for k in node if isinstance(k, str) and did_you_mean(k, [name]) == name]
    return written[0] if written else name


class Locator:
    """Maps config paths to YAML positions and builds Problems."""

    def __init__(self, filename: str, doc: Document) -> None:
        self.filename = filename
        self.doc = doc

    def yaml_path(self, path: ConfigPath) -> ConfigPath:
        """The YAML path of a config path (dict-form context attacks, flat scoring)."""
        out: list[str | int] = []
        node: Any = self.doc.data
        i = 0
        while i < len(path):
            part = path[i]
            if (
                part == "weights"
                and out == ["scoring"]
                and isinstance(node, dict)
                and "weights" not in node
            ):
                i += 1
                continue
            if isinstance(part, int) and isinstance(node, dict):
                keys = list(node)
                if 0 <= part < len(keys):
                    out.append(keys[part])
                    node = node[keys[part]]
                    if i + 1 < len(path) and path[i + 1] == "type":
                        return tuple(out)  # the key is the type
                    i += 1
                    continue
                return tuple(out)
            if part == "json_schema":
                part = "schema"
            if isinstance(node, dict) and part not in node:
                part = _written_as(node, part)
            out.append(part)
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                node = None
            i += 1
        return tuple(out)

    def position(self, ypath: ConfigPath, key: bool = False) -> Location:
        if key and ypath in self.doc.keys:
            return self.doc.keys[ypath]
        path = ypath
        while path and path not in self.doc.values:
            path = path[:-1]
        return self.doc.values.get(path, (1, 1))

    def at(self, ypath: ConfigPath, message: str, key: bool = False) -> Problem:
        """The Problem for ``message`` about the node (or, with ``key``, the key) at ``ypath``."""
        line, col = self.position(ypath, key)
        return Problem(self.filename, line, col, format_path(ypath), message)

    def locate(self, path: ConfigPath, message: str, key: bool = False) -> Problem:
        """The Problem for ``message`` about the config value at ``path`` (the meaning
        checks' hook)."""
        return self.at(self.yaml_path(path), message, key)
