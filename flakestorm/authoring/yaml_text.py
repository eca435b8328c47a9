"""A YAML file edited line by line, so that everything not edited stays as written: comments,
quoting, blank lines, line breaks.

:class:`YamlText` reads the file with the loader's document
(:func:`~flakestorm.loader.document.read_document`, ``${VAR}`` left as written), which says
where each key and value starts; a key's lines run to the next line that holds a node outside
it, less the comments and blank lines just before that node (they stay with it). Its methods
return :class:`Edit` values (lines replaced); :meth:`YamlText.text` applies a set of them that
do not overlap. Only block-style mappings are edited: a key inside a flow collection
(``output: {format: html}``) raises :class:`FlowCollection`, and :meth:`YamlText.blockify`
writes that collection in block style first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flakestorm.loader.document import read_document
from flakestorm.structure.paths import ConfigPath


@dataclass(frozen=True)
class Edit:
    """Lines ``start:end`` (0-based) replaced by ``lines``; ``start == end`` inserts."""

    start: int
    end: int
    lines: tuple[str, ...]

    def clashes(self, other: Edit) -> bool:
        inside = (self.start == self.end and other.start < self.start < other.end) or (
            other.start == other.end and self.start < other.start < self.end
        )
        return inside or max(self.start, other.start) < min(self.end, other.end)


class FlowCollection(Exception):
    """A key to rewrite is inside the flow collection at ``path``: write that in block style."""

    def __init__(self, path: ConfigPath) -> None:
        self.path = path


_BREAK = re.compile(r"(\r\n|[\n\r\x85\u2028\u2029])")
"""Line breaks as YAML counts them (the document's line numbers)."""
_PLAIN = re.compile(r"[A-Za-z_./][\w.\-/]*\Z")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", ".inf", ".nan"}


def scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text, ensure_ascii=False)


def flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return scalar(value)


def short(value: Any) -> str:
    text = flow(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _block(value: Any, indent: int, step: int) -> list[str]:
    """``value`` (a mapping or a list) as block-style lines at ``indent``."""
    pad, out, mapping = " " * indent, [], isinstance(value, dict)
    for key, item in value.items() if mapping else ((None, v) for v in value):
        lead = f"{pad}{scalar(key)}:" if mapping else f"{pad}-"
        if not item or not isinstance(item, dict if not mapping else (dict, list)):
            out.append(f"{lead} {flow(item)}")
        elif mapping:
            out += [lead, *_block(item, indent + step, step)]
        else:  # a mapping in a list: its first key on the dash's line
            inner = _block(item, indent + 2, step)
            out += [f"{lead} {inner[0].lstrip()}", *inner[1:]]
    return out


def _outside(lines: list[str], line: int, col: int) -> Iterator[tuple[int, int, str]]:
    """(line, column, character) from (line, col) on, outside quoted scalars; after a
    comment's ``#`` the rest of its line is skipped."""
    quote = ""
    for i in range(line, len(lines)):
        text, j = lines[i], col if i == line else 0
        while j < len(text):
            ch = text[j]
            if quote:
                if (ch == "\\" and quote == '"') or (
                    ch == quote == "'" and text[j + 1 : j + 2] == "'"
                ):
                    j += 1
                elif ch == quote:
                    quote = ""
            elif ch in "\"'" and (j == 0 or text[j - 1] in " \t[{,:"):
                quote = ch
            else:
                yield i, j, ch
                if _comment_at(text, j):
                    break
            j += 1


def _comment_at(text: str, j: int) -> bool:
    return text[j] == "#" and (j == 0 or text[j - 1] in " \t")


def _comment(line: str, start: int) -> str:
    """The comment that ends ``line`` (with the spaces before it), looking from ``start``."""
    for _, j, _ in _outside([line], 0, start):
        if _comment_at(line, j):
            return line[len(line[:j].rstrip()) :]
    return ""


def _flow_end(lines: list[str], line: int, col: int) -> tuple[int, int]:
    """Where the flow collection opening at (line, col) ends: its line, the column after it."""
    depth = 0
    for i, j, ch in _outside(lines, line, col):
        if not _comment_at(lines[i], j):
            depth += (ch in "[{") - (ch in "]}")
            if depth == 0:
                return i, j + 1
    return len(lines) - 1, len(lines[-1])


def _blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


class YamlText:
    """A YAML file as lines, and where its nodes are."""

    def __init__(self, text: str, filename: str, expected: str) -> None:
        """``expected``: what the top of the file should be (for the error when it is not)."""
        pieces = _BREAK.split(text)
        self.lines, self.ends = pieces[0::2], [*pieces[1::2], ""]
        if len(self.lines) > 1 and self.lines[-1] == "":
            self.lines.pop()
            self.ends.pop()
        self.nl = "\r\n" if "\r\n" in self.ends else "\n"
        self.doc = read_document(text, filename, {}, expand_env=False, expected=expected)
        marks = [*self.doc.values.items(), *self.doc.keys.items()]
        self.marks = sorted(((loc[0] - 1, path) for path, loc in marks), key=lambda m: m[0])
        keys = self.doc.keys
        steps = [  # how far the file indents a mapping in a mapping (block style)
            col - keys[path[:-1]][1]
            for path, (line, col) in keys.items()
            if path[:-1] in keys and line > keys[path[:-1]][0]
        ]
        self.step = min((s for s in steps if s > 0), default=2)

    def value(self, path: ConfigPath) -> Any:
        node = self.doc.data
        for part in path:
            node = node[part]
        return node

    def key_at(self, path: ConfigPath) -> tuple[int, int]:
        line, col = self.doc.keys[path] if path in self.doc.keys else self.doc.values[path]
        return line - 1, col - 1

    def end_of(self, path: ConfigPath) -> int:
        """The line after the last of ``path``'s own lines (its key's, its value's)."""
        start, n = self.key_at(path)[0], len(path)
        end = min((line for line, p in self.marks if line > start and p[:n] != path), default=None)
        end = len(self.lines) if end is None else end
        while end > start + 1 and _blank(self.lines[end - 1]):
            end -= 1
        return end

    def is_flow(self, path: ConfigPath) -> bool:
        line, col = self.doc.values.get(path, (1, 1))
        return self.lines[line - 1][col - 1 : col] in ("{", "[")

    def require_block(self, container: ConfigPath) -> None:
        """Raise :class:`FlowCollection` when ``container`` is (inside) a flow collection."""
        for i in range(len(container) + 1):
            if self.is_flow(container[:i]):
                raise FlowCollection(container[:i])

    def remove(self, path: ConfigPath, comments: bool = False) -> Edit:
        """The key at ``path`` and its lines gone (with ``comments``, also the comment lines
        just above a key on a line of its own: they describe it)."""
        self.require_block(path[:-1])
        line, col = self.key_at(path)
        end, prefix = self.end_of(path), self.lines[line][:col]
        if not prefix.strip():
            start = line
            while comments and start > 0 and self.lines[start - 1].lstrip().startswith("#"):
                start -= 1
            return Edit(start, end, ())
        # the first key of a list item: the dash moves to the item's next key ({} if none)
        for i in range(end, len(self.lines)):
            if _blank(self.lines[i]):
                continue
            if len(self.lines[i]) - len(self.lines[i].lstrip()) == col:
                return Edit(line, i + 1, (*self.lines[end:i], prefix + self.lines[i][col:]))
            break
        return Edit(line, end, (prefix + "{}",))

    def put(self, path: ConfigPath, key: str, value: Any) -> Edit:
        """``path``'s lines become ``key: value`` (a mapping or a long list in block style)."""
        self.require_block(path[:-1])
        line, col = self.key_at(path)
        lead, comment, text = self.lines[line][:col], _comment(self.lines[line], col), flow(value)
        end = self.end_of(path)
        if (isinstance(value, dict) and value) or (isinstance(value, list) and len(text) > 60):
            body = _block(value, col + self.step, self.step)
            return Edit(line, end, (f"{lead}{key}:{comment}", *body))
        return Edit(line, end, (f"{lead}{key}: {text}{comment}",))

    def rename(self, path: ConfigPath, key: str) -> Edit:
        self.require_block(path[:-1])
        line, col = self.key_at(path)
        text = self.lines[line]
        width = len(str(path[-1])) if text.startswith(str(path[-1]), col) else _quoted(text, col)
        return Edit(line, line + 1, (text[:col] + key + text[col + width :],))

    def insert(self, mapping: ConfigPath, entries: dict[str, Any]) -> Edit:
        """``entries`` added after the last key of the mapping at ``mapping``."""
        keys = list(self.value(mapping))
        if not keys:  # {}: the key's value is written anew
            return self.put(mapping, str(mapping[-1]), entries)
        self.require_block(mapping)
        last = (*mapping, keys[-1])
        end = self.end_of(last)
        return Edit(end, end, tuple(_block(entries, self.key_at(last)[1], self.step)))

    def append(self, sequence: ConfigPath, item: Any) -> Edit:
        """``item`` added at the end of the list at ``sequence``."""
        items = self.value(sequence)
        if self.is_flow(sequence) or not items:
            return self.put(sequence, str(sequence[-1]), [*items, item])
        self.require_block(sequence)
        last = (*sequence, len(items) - 1)
        line, col = self.key_at(last)
        end = self.end_of(last)
        return Edit(end, end, (self.lines[line][:col] + flow(item),))

    def nest(self, mapping: ConfigPath, keys: list[str], under: str) -> Edit:
        """The ``keys`` of the mapping at ``mapping`` moved under ``under:`` (at the first's
        place), with their lines and the comments between them; other keys stay after it."""
        self.require_block(mapping)
        spans = [(self.key_at((*mapping, k))[0], self.end_of((*mapping, k))) for k in keys]
        start, stop = min(s for s, _ in spans), max(e for _, e in spans)
        others = [(self.key_at((*mapping, k))[0], self.end_of((*mapping, k)))
                  for k in self.value(mapping) if k not in keys]  # fmt: skip
        stays = {i for s, e in others for i in range(s, e) if start <= s < stop}
        moved = [self.lines[i] for i in range(start, stop) if i not in stays]
        pad = " " * self.key_at((*mapping, keys[0]))[1]
        inner = [" " * self.step + t if t.strip() else t for t in moved]
        return Edit(
            start, stop, (f"{pad}{under}:", *inner, *(self.lines[i] for i in sorted(stays)))
        )

    def move(self, path: ConfigPath, to: ConfigPath) -> tuple[Edit, Edit]:
        """The key at ``path`` (on a line of its own), its lines and the comments just above
        it, moved to ``to``: in place of that key's lines, or after the last key of its
        mapping (not empty); re-indented to the column of the keys there. A blank line the
        move would leave doubled goes too."""
        self.require_block(path[:-1])
        self.require_block(to[:-1])
        if to in self.doc.keys:
            at, end, column = self.key_at(to)[0], self.end_of(to), self.key_at(to)[1]
        else:
            last = (*to[:-1], list(self.value(to[:-1]))[-1])
            at, end, column = self.end_of(last), self.end_of(last), self.key_at(last)[1]
        line, col = self.key_at(path)
        start, stop = line, self.end_of(path)
        while start > 0 and self.lines[start - 1].lstrip().startswith("#"):
            start -= 1
        moved = tuple(_shifted(t, column - col) for t in self.lines[start:stop])
        after = self.lines[stop] if stop < len(self.lines) else ""
        if start > 0 and not self.lines[start - 1].strip() and not after.strip():
            start -= 1
        return Edit(start, stop, ()), Edit(at, end, moved)

    def blockify(self, path: ConfigPath) -> Edit:
        """The flow collection at ``path`` (not the top of the file) in block style."""
        line, col = (n - 1 for n in self.doc.values[path])
        stop, stop_col = _flow_end(self.lines, line, col)
        head, tail = self.lines[line][:col], self.lines[stop][stop_col:]
        if isinstance(path[-1], int):  # a list item: its first line starts at the dash
            body = _block(self.value(path), len(head), self.step)
            return Edit(line, stop + 1, (head + body[0][len(head) :] + tail, *body[1:]))
        indent = self.key_at(path)[1] + self.step
        first = [head.rstrip() + tail] if head.strip() or tail.strip() else []
        return Edit(line, stop + 1, (*first, *_block(self.value(path), indent, self.step)))

    def text(self, edits: list[Edit]) -> str:
        lines = [(t, e) for t, e in zip(self.lines, self.ends, strict=True)]
        order = sorted(enumerate(edits), key=lambda x: (x[1].start, x[1].end, x[0]), reverse=True)
        for _, edit in order:
            lines[edit.start : edit.end] = [(t, self.nl) for t in edit.lines]
        last = len(lines) - 1
        return "".join(t + (self.ends[-1] if i == last else e or self.nl)
                       for i, (t, e) in enumerate(lines))  # fmt: skip


def _shifted(line: str, by: int) -> str:
    """``line`` indented ``by`` more columns (fewer when negative); a blank line as it is."""
    if not line.strip():
        return line
    if by >= 0:
        return " " * by + line
    return line[min(-by, len(line) - len(line.lstrip())) :]


def _quoted(text: str, col: int) -> int:
    """The width of the quoted key at ``col``."""
    end = text.find(text[col], col + 1)
    return end + 1 - col if end > col else len(text) - col


def line_before(line: int, rounds: list[list[Edit]]) -> int:
    """The line of the file before ``rounds`` of edits (each applied with
    :meth:`YamlText.text`) that ``line`` of the file after them comes from."""
    for edits in reversed(rounds):
        offset = 0
        for edit in sorted(edits, key=lambda e: (e.start, e.end)):
            start = edit.start + offset
            if line < start:
                break
            if line < start + len(edit.lines):  # a rewritten line: its last lines align
                line, offset = max(edit.start, edit.end - (start + len(edit.lines) - line)), 0
                break
            offset += len(edit.lines) - (edit.end - edit.start)
        line -= offset
    return line
