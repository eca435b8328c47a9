"""Where GitHub evaluates ``${{ }}`` in a workflow or in an action's metadata, and with what.

GitHub evaluates every expression in an action's metadata (``action.yml``) when it loads the
action, descriptions included: an expression outside the places it evaluates, or naming a
context it does not offer there (``matrix`` in a description, say), fails every workflow that
uses the action before its first step. In a workflow, each key offers its own contexts (the
"context availability" table of GitHub's contexts reference): ``secrets`` in ``runs-on`` or
``matrix`` in ``on:`` fail the workflow at load.

:func:`misplaced` lists each expression that names a context its place does not offer, with
the line and column of the expression itself (not of the scalar that holds it), the dotted
path of the key and what would be allowed there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import yaml

EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'")
_NAME = re.compile(r"(?<![\w.\-\]])([A-Za-z_][\w-]*)(?![\w-])(?!\s*\()")
_LITERALS = {"true", "false", "null", "NaN", "Infinity"}

# Steps see everything a job has by then.
_STEP = {"github", "needs", "strategy", "matrix", "job", "runner", "env", "vars", "secrets"}
_STEP |= {"steps", "inputs"}
_JOB = {"github", "needs", "strategy", "matrix", "vars", "inputs"}

# (path pattern, contexts), most specific first; `*` is one key or one list index. From the
# context availability table of GitHub's contexts reference.
WORKFLOW_PLACES: Sequence[tuple[str, frozenset[str]]] = tuple(
    (pattern, frozenset(contexts))
    for pattern, contexts in (
        ("run-name", {"github", "inputs", "vars"}),
        ("concurrency", {"github", "inputs", "vars"}),
        ("concurrency.*", {"github", "inputs", "vars"}),
        ("env.*", {"github", "secrets", "inputs", "vars"}),
        ("on.workflow_call.inputs.*.default", {"github", "inputs", "vars"}),
        ("on.workflow_call.outputs.*.value", {"github", "jobs", "vars", "inputs"}),
        ("jobs.*.if", {"github", "needs", "vars", "inputs"}),
        ("jobs.*.strategy", {"github", "needs", "vars", "inputs"}),
        ("jobs.*.strategy.*", {"github", "needs", "vars", "inputs"}),
        ("jobs.*.strategy.*.*", {"github", "needs", "vars", "inputs"}),
        ("jobs.*.strategy.*.*.*", {"github", "needs", "vars", "inputs"}),
        ("jobs.*.env.*", _JOB | {"secrets"}),
        ("jobs.*.outputs.*", _STEP),
        ("jobs.*.environment.url", _STEP - {"secrets"}),
        ("jobs.*.defaults.run.*", _JOB | {"env"}),
        ("jobs.*.secrets.*", _JOB | {"secrets"}),
        ("jobs.*.container.credentials.*", _JOB | {"env", "secrets"}),
        ("jobs.*.container.env.*", _STEP - {"steps"}),
        ("jobs.*.services.*.credentials.*", _JOB | {"env", "secrets"}),
        ("jobs.*.services.*.env.*", _STEP - {"steps"}),
        ("jobs.*.steps.*.if", _STEP - {"secrets"}),
        ("jobs.*.steps.*.uses", set()),
        ("jobs.*.steps.*.*", _STEP),
        ("jobs.*.steps.*.*.*", _STEP),
        ("jobs.*.name", _JOB),
        ("jobs.*.runs-on", _JOB),
        ("jobs.*.runs-on.*", _JOB),
        ("jobs.*.timeout-minutes", _JOB),
        ("jobs.*.continue-on-error", _JOB),
        ("jobs.*.concurrency", _JOB),
        ("jobs.*.concurrency.*", _JOB),
        ("jobs.*.environment", _JOB),
        ("jobs.*.environment.*", _JOB),
        ("jobs.*.container", _JOB),
        ("jobs.*.container.*", _JOB),
        ("jobs.*.services.*.*", _JOB),
        ("jobs.*.with.*", _JOB),
    )
)

# An action's metadata: only `runs` (evaluated when the step runs) and an input's default (at
# load, with `github` and `inputs`).
ACTION_PLACES: Sequence[tuple[str, frozenset[str]]] = (
    ("inputs.*.default", frozenset({"github", "inputs"})),
    ("runs.*", frozenset(_STEP)),
    ("runs.*.*", frozenset(_STEP)),
    ("runs.steps.*.*", frozenset(_STEP)),
    ("runs.steps.*.*.*", frozenset(_STEP)),
    ("outputs.*.value", frozenset(_STEP)),
)


@dataclass(frozen=True)
class Misplaced:
    """One expression GitHub would refuse: where it is and why."""

    line: int
    column: int
    path: str
    expression: str
    contexts: tuple[str, ...]
    allowed: frozenset[str]

    def __str__(self) -> str:
        if not self.allowed:
            why = "no expression is evaluated here"
        else:
            why = (
                f"{', '.join(self.contexts)} is not available here "
                f"(available: {', '.join(sorted(self.allowed))})"
            )
        return f"{self.line}:{self.column}: {self.path}: ${{{{{self.expression}}}}}: {why}"


def contexts(expression: str) -> tuple[str, ...]:
    """The contexts an expression reads (``matrix.shard`` -> ``matrix``), functions left out."""
    code = _STRING.sub("''", expression)
    names = [m[1] for m in _NAME.finditer(code) if m[1] not in _LITERALS]
    return tuple(dict.fromkeys(names))


def misplaced(text: str, places: Sequence[tuple[str, frozenset[str]]]) -> list[Misplaced]:
    """Every expression in the YAML ``text`` that its place does not allow (in file order)."""
    root = yaml.compose(text)
    if root is None:
        return []
    found = []
    for path, node in _scalars(root, ()):
        dotted = ".".join(path)
        allowed = _allowed(dotted, places)
        for match in EXPRESSION.finditer(node.value):
            names = contexts(match[1])
            bad = tuple(n for n in names if n not in allowed)
            if bad or not allowed:
                line, column = _locate(text, node, match[0])
                found.append(Misplaced(line, column, dotted, match[1], bad, allowed))
    return found


def _allowed(path: str, places: Sequence[tuple[str, frozenset[str]]]) -> frozenset[str]:
    for pattern, allowed in places:
        if len(pattern.split(".")) == len(path.split(".")) and fnmatchcase(path, pattern):
            return allowed
    return frozenset()


def _scalars(node: yaml.Node, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _scalars(value, (*path, str(key.value)))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _scalars(item, (*path, str(index)))
    elif isinstance(node, yaml.ScalarNode) and isinstance(node.value, str):
        yield path, node


def _locate(text: str, node: yaml.ScalarNode, expression: str) -> tuple[int, int]:
    """Line and column (1-based) of ``expression`` in the source of ``node``; the node's start
    when the source differs from its value (a folded or escaped scalar split it)."""
    start, end = node.start_mark.index, node.end_mark.index
    at = text.find(expression, start, end)
    if at < 0:
        return node.start_mark.line + 1, node.start_mark.column + 1
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return line, column
