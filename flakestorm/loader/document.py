"""YAML text -> plain data, with the line and column of every value and key.

:func:`read_document` composes the YAML (libyaml when available; errors always from the
pure-python parser) and builds plain data from the nodes, recording where each value and key
came from, expanding ``${VAR}`` in string values (:mod:`flakestorm.loader.env`) and refusing
what cannot become data: recursive aliases, tags other than the standard ones, keys that are
not plain values. Problems it can continue past (duplicate keys, unset variables) are collected
in :attr:`Document.problems`; the others raise :class:`~flakestorm.errors.ConfigError` at once.

Limits hold before any expensive work (:class:`Limits`; each rejection is located and says how
to raise the limit). The document's size is checked first; then one pass over the parser's
event stream (iterative: no recursion, whatever the nesting) checks the nesting depth and the
bytes the aliases expand to (each alias counts the source bytes of its anchor, aliases inside
it expanded too, so a billion-laughs document is refused at its first few aliases), and only a
document within the limits is composed (the C composer recurses, and would overflow the stack
on 100,000 nested brackets). :data:`MAX_NODES` still bounds the values the data may have.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from flakestorm.errors import ConfigError, Problem
from flakestorm.loader.env import expand
from flakestorm.structure.paths import ConfigPath, format_path

Location = tuple[int, int]

MAX_NODES = 100_000
"""How many values a document may expand to (aliases included): a guard against alias bombs."""

MAX_DEPTH = 64
"""How deeply collections may nest (raise it with ``FLAKESTORM_CONFIG_MAX_DEPTH``)."""

MAX_BYTES = 2 * 1024 * 1024
"""How large a config may be, and what its aliases may expand it to (raise it with
``FLAKESTORM_CONFIG_MAX_BYTES``)."""

DEPTH_VAR = "FLAKESTORM_CONFIG_MAX_DEPTH"
BYTES_VAR = "FLAKESTORM_CONFIG_MAX_BYTES"


@dataclass(frozen=True)
class Limits:
    """What a config may be: at most ``bytes`` (aliases expanded), nested ``depth`` deep."""

    bytes: int = MAX_BYTES
    depth: int = MAX_DEPTH

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        """The defaults, raised (or lowered) by ``FLAKESTORM_CONFIG_MAX_BYTES`` / ``_DEPTH``
        when they hold a positive whole number."""
        return cls(
            bytes=_positive(env.get(BYTES_VAR, os.environ.get(BYTES_VAR)), MAX_BYTES),
            depth=_positive(env.get(DEPTH_VAR, os.environ.get(DEPTH_VAR)), MAX_DEPTH),
        )


def _positive(text: str | None, default: int) -> int:
    try:
        value = int(text or "")
    except ValueError:
        return default
    return value if value > 0 else default


_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"

_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
_START = yaml.Mark("", 0, 0, 0, None, 0)


@dataclass
class Document:
    """Plain data built from the YAML nodes, plus where each value and key came from."""

    data: Any = None
    values: dict[ConfigPath, Location] = field(default_factory=dict)
    keys: dict[ConfigPath, Location] = field(default_factory=dict)
    scalars: dict[ConfigPath, str] = field(default_factory=dict)
    """The source text of each scalar (to suggest quotes when a string was meant)."""
    secrets: set[str] = field(default_factory=set)
    """Every non-empty value taken from the environment."""
    env_paths: set[ConfigPath] = field(default_factory=set)
    """Paths of the values that refer to an environment variable."""
    problems: list[Problem] = field(default_factory=list)


def sorted_error(problems: list[Problem]) -> ConfigError:
    """The ConfigError of ``problems`` in file order."""
    return ConfigError(sorted(problems, key=lambda p: (p.line, p.column)))


def read_document(
    text: str,
    filename: str,
    env: Mapping[str, str],
    *,
    expand_env: bool = True,
    limits: Limits | None = None,
    expected: str = "a mapping of sections (agent:, contract:, ...)",
) -> Document:
    """The data of ``text`` (a mapping at the top), or ConfigError for what cannot be data or
    is over ``limits`` (default: :meth:`Limits.from_env` of ``env``). ``expand_env=False``
    keeps ``${...}`` as written (recorded data, e.g. replay sessions); ``expected`` says what
    the top of the file should be, when it is not a mapping."""
    limits = limits or Limits.from_env(env)
    if len(text) > limits.bytes:  # characters: at most as many as the file's bytes
        line = text.count("\n", 0, limits.bytes) + 1
        raise sorted_error(
            [
                Problem(
                    filename,
                    line,
                    1,
                    "",
                    f"the file is larger than {_size(limits.bytes)} (the limit for a config; "
                    f"if it is legitimate, raise it with {BYTES_VAR}=<bytes>)",
                )
            ]
        )
    problem = _scan(text, filename, limits)
    if problem is not None:
        raise sorted_error([problem])
    try:
        node = _compose(text)
    except yaml.YAMLError as exc:
        raise sorted_error([_yaml_problem(filename, text, exc)]) from None
    if node is None:
        raise sorted_error([Problem(filename, 1, 1, "", "the file is empty (expected a mapping)")])
    if not isinstance(node, yaml.MappingNode):
        line, col = _where(node.start_mark)
        got = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        raise sorted_error(
            [
                Problem(
                    filename,
                    line,
                    col,
                    "",
                    f"expected {expected}, got {got}",
                )
            ]
        )
    builder = _Builder(filename, env, expand_env, limits.depth)
    try:
        return builder.build(node)
    except _Fail as fail:
        raise sorted_error([*builder.doc.problems, fail.problem]) from None


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB" if n % 1024 == 0 and n >= 1024 * 1024 else f"{n} bytes"


def _scan(text: str, filename: str, limits: Limits) -> Problem | None:
    """The first limit ``text`` breaks, found on the parser's event stream; None when within
    them (a YAML syntax error is left for the composer to report)."""
    loader = _FAST_LOADER or yaml.SafeLoader
    anchors: dict[str, int] = {}  # anchor -> the bytes it expands to
    # open collections: [anchor, start index, bytes added inside by aliases]
    stack: list[list[Any]] = []
    expanded = len(text)
    too_deep = (
        f"nested more than {limits.depth} levels deep (the limit for a "
        f"config; if it is legitimate, raise it with {DEPTH_VAR}=<levels>)"
    )
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.CollectionStartEvent):
                stack.append([event.anchor, _index(event.start_mark), 0])
                if len(stack) > limits.depth:
                    return _over(filename, event.start_mark, too_deep)
            elif isinstance(event, yaml.CollectionEndEvent) and stack:
                anchor, start, added = stack.pop()
                if anchor is not None:
                    anchors[anchor] = _index(event.end_mark) - start + added
                if stack:
                    stack[-1][2] += added
            elif isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                anchors[event.anchor] = _index(event.end_mark) - _index(event.start_mark)
            elif isinstance(event, yaml.AliasEvent):
                size = anchors.get(event.anchor or "", 0)
                expanded += size
                if stack:
                    stack[-1][2] += size
                if expanded > limits.bytes:
                    return _over(
                        filename,
                        event.start_mark,
                        f"with its aliases expanded the document is larger than "
                        f"{_size(limits.bytes)} (the limit for a config; if it is legitimate, "
                        f"raise it with {BYTES_VAR}=<bytes>)",
                    )
    except yaml.YAMLError as exc:
        # libyaml 0.2.5+ stops at its own nesting limit (1,000 levels) while scanning ahead,
        # before the events that would cross ours: deeper than ours too
        if _LIBYAML_TOO_DEEP in str(getattr(exc, "problem", "")):
            return _over(filename, getattr(exc, "problem_mark", None) or _START, too_deep)
        return None
    return None


def _index(mark: Any) -> int:
    index: int = getattr(mark, "index", 0)
    return index


def _over(filename: str, mark: Any, message: str) -> Problem:
    line, col = _where(mark)
    return Problem(filename, line, col, "", message)


def _compose(text: str) -> yaml.Node | None:
    """Compose with libyaml when available; errors always come from the pure-python parser,
    so that messages do not depend on how PyYAML was built."""
    if _FAST_LOADER is not None:
        try:
            return yaml.compose(text, Loader=_FAST_LOADER)
        except yaml.YAMLError:
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


def _where(mark: Any) -> Location:
    return (mark.line + 1, mark.column + 1)


class _Fail(Exception):
    """Stops the build of a document that cannot become data (alias bomb, bad tag)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem


class _Builder:
    """Turns a composed node tree into plain data, recording positions and expanding ``${VAR}``."""

    def __init__(
        self,
        filename: str,
        env: Mapping[str, str],
        expand_env: bool = True,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.filename = filename
        self.max_depth = max_depth
        self.env = env
        self.expand_env = expand_env
        self.doc = Document()
        self.budget = MAX_NODES
        self.active: set[int] = set()
        self.scalar_loader = yaml.SafeLoader("")

    def build(self, node: yaml.Node) -> Document:
        self.doc.data = self.value(node, (), 0)
        return self.doc

    def problem(self, loc: Location, path: ConfigPath, message: str) -> Problem:
        return Problem(self.filename, loc[0], loc[1], format_path(path), message)

    def value(self, node: yaml.Node, path: ConfigPath, depth: int) -> Any:
        self.budget -= 1
        loc = _where(node.start_mark)
        if self.budget < 0:
            raise _Fail(
                self.problem(
                    loc,
                    (),
                    f"the document expands to more than {MAX_NODES} values "
                    "(too many aliases of large anchors?)",
                )
            )
        if depth > self.max_depth:  # the scan refused it first: kept as a backstop
            raise _Fail(self.problem(loc, path, f"nested more than {self.max_depth} levels deep"))
        self.doc.values.setdefault(path, loc)
        if id(node) in self.active:
            raise _Fail(self.problem(loc, path, "an alias refers to the anchor that contains it"))
        if isinstance(node, yaml.MappingNode):
            self.active.add(id(node))
            try:
                return self.mapping(node, path, depth)
            finally:
                self.active.discard(id(node))
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise _Fail(self.problem(loc, path, f"unsupported YAML tag {node.tag!r}"))
            self.active.add(id(node))
            try:
                return [
                    self.value(item, (*path, i), depth + 1) for i, item in enumerate(node.value)
                ]
            finally:
                self.active.discard(id(node))
        return self.scalar(node, path, loc)

    def scalar(self, node: yaml.Node, path: ConfigPath, loc: Location) -> Any:
        try:
            value = self.scalar_loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise _Fail(self.problem(loc, path, f"invalid YAML value: {problem}")) from None
        except (ValueError, TypeError, OverflowError):
            raise _Fail(self.problem(loc, path, f"invalid YAML value {node.value!r}")) from None
        if isinstance(node.value, str):
            self.doc.scalars.setdefault(path, node.value)
        if isinstance(value, str) and node.tag == _STR_TAG:
            return self.expanded(value, path, loc)
        return value

    def mapping(self, node: yaml.MappingNode, path: ConfigPath, depth: int) -> dict[Any, Any]:
        loc = _where(node.start_mark)
        if node.tag != _MAP_TAG:
            raise _Fail(self.problem(loc, path, f"unsupported YAML tag {node.tag!r}"))
        out: dict[Any, Any] = {}
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.extend(self.merge_sources(value_node, path))
                continue
            key = self.key(key_node, path)
            key_loc = _where(key_node.start_mark)
            if key in out:
                first = self.doc.keys.get((*path, key), loc)
                self.doc.problems.append(
                    self.problem(
                        key_loc,
                        (*path, key),
                        f"duplicate key {key!r} (first defined at line {first[0]})",
                    )
                )
                continue
            here = (*path, key)
            self.doc.keys[here] = key_loc
            out[key] = self.value(value_node, here, depth + 1)
        for key_node, value_node in merged:
            key = self.key(key_node, path)
            if key not in out:
                self.doc.keys.setdefault((*path, key), _where(key_node.start_mark))
                out[key] = self.value(value_node, (*path, key), depth + 1)
        return out

    def merge_sources(
        self, node: yaml.Node, path: ConfigPath
    ) -> Iterator[tuple[yaml.Node, yaml.Node]]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                where = _where(source.start_mark)
                raise _Fail(self.problem(where, path, "'<<' merges only mappings"))
            self.budget -= len(source.value)
            yield from source.value

    def key(self, node: yaml.Node, path: ConfigPath) -> str | int:
        loc = _where(node.start_mark)
        if not isinstance(node, yaml.ScalarNode):
            raise _Fail(self.problem(loc, path, "a mapping key must be a plain value"))
        try:
            value = (
                self.scalar_loader.construct_object(node) if node.tag != _STR_TAG else node.value
            )
        except yaml.YAMLError as exc:  # a tagged key the tag does not fit: !!int abc
            problem = getattr(exc, "problem", None) or str(exc)
            raise _Fail(self.problem(loc, path, f"invalid YAML key: {problem}")) from None
        except (ValueError, TypeError, OverflowError):
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            message = f"invalid YAML key {node.value!r}: it is not a valid {tag} value"
            raise _Fail(self.problem(loc, path, message)) from None
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            return str(node.value)
        return value if isinstance(value, (str, int)) else str(node.value)

    def expanded(self, text: str, path: ConfigPath, loc: Location) -> str:
        """``text`` with ``${VAR}`` expanded; what came from the environment is recorded."""
        if "${" not in text or not self.expand_env:
            return text
        expansion = expand(text, self.env)
        self.doc.secrets.update(expansion.secrets)
        if expansion.from_env:
            self.doc.env_paths.add(path)
        self.doc.problems.extend(self.problem(loc, path, m) for m in expansion.problems)
        return expansion.text


def _line_col(text: str, index: int) -> Location:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _tab_in_indent(text: str, until_line: int) -> Location | None:
    for number, line in enumerate(text.splitlines()[:until_line], start=1):
        stripped = line.lstrip(" \t")
        indent = line[: len(line) - len(stripped)]
        if "\t" in indent and stripped and not stripped.startswith("#"):
            return number, indent.index("\t") + 1
    return None


def _yaml_problem(filename: str, text: str, exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.reader.ReaderError):
        line, col = _line_col(text, exc.position)
        what = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        return Problem(filename, line, col, "", f"invalid YAML: character {what} is not allowed")
    line, col = _where(mark) if mark is not None else (1, 1)
    tab = _tab_in_indent(text, line)
    if tab is not None:
        return Problem(
            filename, tab[0], tab[1], "", "tab character in indentation (indent with spaces)"
        )
    problem = getattr(exc, "problem", None) or "cannot parse"
    message = f"invalid YAML: {problem}"
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None:
        cl, cc = _where(context_mark)
        message += f" ({context} at line {cl}, column {cc})"
    elif context:
        message += f" ({context})"
    return Problem(filename, line, col, "", message)
