"""Meaning checks of ``accepted:`` (SPEC §14): each entry names a cell or a mutation type the
config has, and its date is judged as the run will judge it."""

from __future__ import annotations

import datetime

from flakestorm.meaning.scope import Scope
from flakestorm.meaning.sweeps import SweepError, expanded_matrix
from flakestorm.results.clock import today
from flakestorm.structure.paths import ConfigPath, format_path
from flakestorm.structure.wording import did_you_mean

FAR_AHEAD_DAYS = 90
"""An acceptance further ahead than this is a warning: accepted risks are meant to be looked
at again."""


def check_accepted(scope: Scope) -> None:
    """Reads the ``accepted`` entries that validated, ``contract`` and ``mutations``."""
    on = today()
    first: dict[str, ConfigPath] = {}
    for item in scope.parts.accepted:
        entry, path = item.model, item.path
        if entry is None:
            continue
        key = "cell" if entry.cell is not None else "mutation"
        if entry.target in first:
            _twice(scope, entry.target, first[entry.target], (*path, key))
            continue
        first[entry.target] = (*path, key)
        if entry.cell is not None:
            problem = _cell_problem(scope, entry.cell)
            if problem:
                scope.error((*path, "cell"), problem)
        elif entry.mutation is not None:
            problem = _mutation_problem(scope, entry.mutation)
            if problem:
                scope.error((*path, "mutation"), problem)
        if entry.until < on:
            scope.warn(
                (*path, "until"),
                f"this acceptance expired on {entry.until.isoformat()}: it accepts nothing any "
                "more, and a failure of its cell fails the gate (remove the entry, or give a "
                "new date)",
            )
        elif entry.until > on + datetime.timedelta(days=FAR_AHEAD_DAYS):
            scope.warn(
                (*path, "until"),
                f"{entry.until.isoformat()} is more than {FAR_AHEAD_DAYS} days ahead: an "
                "accepted failure is meant to be looked at again soon",
            )


def _twice(scope: Scope, target: str, before: ConfigPath, again: ConfigPath) -> None:
    """Two entries for one cell (or mutation type): which one the run would go by is no
    choice to make for the team (one expired, one open would pass), so the config is refused,
    naming both lines."""
    where = scope.locate(before, "")
    scope.error(
        again,
        f"{target!r} is accepted twice: here and at {format_path(before)} (line {where.line}); "
        "keep one entry for it",
    )


def _cell_problem(scope: Scope, cell: str) -> str:
    contract = scope.parts.contract
    if contract is None:
        return f"{cell!r} names a contract cell, and this config has no contract"
    try:
        scenarios = expanded_matrix(contract)
    except SweepError:  # the sweep's own check says what is wrong
        return ""
    cells = [f"{i.id}[{s.name}]" for i in contract.invariants for s in scenarios]
    if cell in cells:
        return ""
    close = did_you_mean(cell, cells)
    hint = f"; did you mean {close!r}?" if close else ""
    return (
        f"{cell!r} is no cell of this contract (a cell is INVARIANT[SCENARIO], e.g. "
        f"{cells[0]!r}){hint}"
        if cells
        else f"{cell!r} is no cell of this contract (it has none)"
    )


def _mutation_problem(scope: Scope, kind: str) -> str:
    mutations = scope.parts.mutations
    if mutations is None:
        return f"{kind!r} names a mutation type, and this config has no mutations section"
    types = [t.value for t in mutations.types]
    if kind in types:
        return ""
    close = did_you_mean(kind, types)
    hint = f"did you mean {close!r}? " if close else ""
    return f"{kind!r} is not a mutation type this config runs ({hint}its types: {', '.join(types)})"
