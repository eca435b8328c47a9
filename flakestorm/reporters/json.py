"""``results.json``: the versioned document every other reporter can be rendered from.

:func:`write` streams it to a file a cell at a time (a run's cells may be far larger than the
rest: they are not all held in memory); :func:`render` gives the same text as one string.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TextIO

from flakestorm.results import RunResult, cell_document, to_document

_CELLS = "\x00cells of {} {}\x00"
"""Stands for a phase's cells in the document's skeleton, replaced by the streamed cells (with
a fresh token, so no string of the run can be mistaken for it)."""


def render(result: RunResult) -> str:
    return json.dumps(to_document(result), ensure_ascii=True, indent=2) + "\n"


def write(result: RunResult, out: TextIO) -> None:
    """Write :func:`render`'s text to ``out``, the cells streamed one at a time."""
    token = uuid.uuid4().hex
    bare = {name: replace(o, cells=()) for name, o in result.phases.items()}
    skeleton = to_document(replace(result, phases=bare))
    for name, phase in skeleton["phases"].items():
        phase["cells"] = _CELLS.format(name, token)
    text = json.dumps(skeleton, ensure_ascii=True, indent=2) + "\n"
    for name, outcome in result.phases.items():
        marker = json.dumps(_CELLS.format(name, token), ensure_ascii=True)
        head, tail = text.split(marker, 1)
        out.write(head)
        line = head.rsplit("\n", 1)[-1]  # '      "cells": '
        _cells(out, (cell_document(c) for c in outcome.cells), len(line) - len(line.lstrip()))
        text = tail
    out.write(text)


def _cells(out: TextIO, documents: Iterable[dict[str, Any]], indent: int) -> None:
    """A JSON list as ``json.dumps(indent=2)`` writes it at ``indent`` spaces."""
    pad = " " * indent
    first = True
    for document in documents:
        body = json.dumps(document, ensure_ascii=True, indent=2).replace("\n", "\n" + pad + "  ")
        out.write(("[\n" if first else ",\n") + pad + "  " + body)
        first = False
    out.write("[]" if first else "\n" + pad + "]")
