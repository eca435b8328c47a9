"""``results.json``: the versioned document every other reporter can be rendered from.

:func:`write` streams it to a file an item at a time (a run's cells and mutations may be far
larger than the rest: they are not all held in memory); :func:`render` gives the same text as
one string.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, TextIO

from flakestorm.results.model import STREAMED, RunResult, to_document, with_streamed
from flakestorm.results.spool import Spooled

_ITEMS = "\x00{} of {} {}\x00"
"""Stands for a phase's cells (or mutations) in the document's skeleton, replaced by the
streamed items (with a fresh token, so no string of the run can be mistaken for it)."""


def render(result: RunResult) -> str:
    return json.dumps(to_document(result), ensure_ascii=True, indent=2) + "\n"


def write(result: RunResult, out: TextIO) -> None:
    """Write :func:`render`'s text to ``out``, the cells and mutations streamed one at a
    time."""
    token = uuid.uuid4().hex
    bare = {n: with_streamed(o, dict.fromkeys(STREAMED, ())) for n, o in result.phases.items()}
    skeleton = to_document(replace(result, phases=bare))
    for name, phase in skeleton["phases"].items():
        for key in STREAMED:
            phase[key] = _ITEMS.format(key, name, token)
    text = json.dumps(skeleton, ensure_ascii=True, indent=2) + "\n"
    for name, outcome in result.phases.items():
        for key in [k for k in skeleton["phases"][name] if k in STREAMED]:  # in their order
            marker = json.dumps(_ITEMS.format(key, name, token), ensure_ascii=True)
            head, tail = text.split(marker, 1)
            out.write(head)
            line = head.rsplit("\n", 1)[-1]  # '      "cells": '
            _items(out, _documents(getattr(outcome, key), key), len(line) - len(line.lstrip()))
            text = tail
    out.write(text)


def _documents(items: Sequence[Any], key: str) -> Iterable[str | dict[str, Any]]:
    """The documents of a phase's ``key`` items: as they were written, when spooled (an item
    read from a ``results.json``, e.g. a shard's, as its text there)."""
    if isinstance(items, Spooled):
        return items.written()
    return (STREAMED[key](item) for item in items)


_ENCODER = json.JSONEncoder(ensure_ascii=True, indent=2)


def _items(out: TextIO, documents: Iterable[str | dict[str, Any]], indent: int) -> None:
    """A JSON list as ``json.dumps(indent=2)`` writes it at ``indent`` spaces (an item given as
    its text, written as it is: the same text when this writer wrote it at this depth)."""
    pad = " " * indent
    first = True
    for document in documents:
        if isinstance(document, str):
            body = document
        else:
            body = _ENCODER.encode(document).replace("\n", "\n" + pad + "  ")
        out.write(("[\n" if first else ",\n") + pad + "  " + body)
        first = False
    out.write("[]" if first else "\n" + pad + "]")
