"""Meaning checks of invariants: the fields of each one's type, regexes that compile, unique
ids within the contract, and ``when`` values that never apply (a warning)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from flakestorm.config import INVARIANT_FIELDS, Invariant, Scenario, When
from flakestorm.meaning.scope import Scope, type_fields
from flakestorm.structure.paths import ConfigPath
from flakestorm.structure.wording import MIGRATE

_TYPE_FIELDS = frozenset(f for req, opt in INVARIANT_FIELDS.values() for f in (*req, *opt))
_NO_CHAOS = Scenario(name="(no chaos)")


def check_invariants(scope: Scope) -> None:
    """Each invariant that validated, top-level and the contract's. Reads no whole part."""
    for items in (scope.parts.invariants, scope.parts.contract_invariants):
        for item in items:
            if item.model is not None:
                _invariant(scope, item.path, item.model)


def _invariant(scope: Scope, at: ConfigPath, inv: Invariant) -> None:
    fields = INVARIANT_FIELDS[inv.type]
    legacy = {"threshold": MIGRATE}  # flakestorm 1.x wrote a threshold on every invariant
    type_fields(scope, at, "invariant", inv, fields, _TYPE_FIELDS, legacy)
    if inv.pattern is not None:
        regex(scope, (*at, "pattern"), inv.pattern)
    for i, pattern in enumerate(inv.patterns or ()):
        regex(scope, (*at, "patterns", i), pattern)


def regex(scope: Scope, at: ConfigPath, pattern: str) -> None:
    """An error at ``at`` when ``pattern`` does not compile."""
    try:
        re.compile(pattern)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        scope.error(at, f"regex {pattern!r} does not compile: {exc.msg}{where}")
    except (RecursionError, OverflowError, ValueError):
        scope.error(at, f"regex {pattern!r} does not compile")


def check_unique_ids(scope: Scope) -> None:
    """Reads ``contract.invariants``: ids are compared even on invariants wrong elsewhere."""
    seen: dict[str, int] = {}
    for i, item in enumerate(scope.parts.contract_invariants):
        ident = item.text("id")
        if ident is None:
            continue
        if ident in seen:
            scope.error(
                (*item.path, "id"),
                f"duplicate invariant id {ident!r} (also invariants[{seen[ident]}]; "
                "ids must be unique within the contract)",
            )
        else:
            seen[ident] = i


def check_contract_when(scope: Scope) -> None:
    """Reads ``contract.chaos_matrix[*]``: a ``when`` is judged against every scenario."""
    scenarios = [item.model for item in scope.parts.chaos_matrix if item.model is not None]
    for item in scope.parts.contract_invariants:
        if item.model is not None:
            _when(scope, item.path, item.model, scenarios, "contract")


def check_phase_when(scope: Scope) -> None:
    """Reads ``chaos``: top-level invariants run in the mutation phase (no chaos) and the
    chaos-only phase (the top-level chaos)."""
    parts = scope.parts
    phases: list[Scenario] = []
    if "mutations" in parts.written:
        phases.append(_NO_CHAOS)
    if parts.chaos is not None:
        chaos = parts.chaos
        phases.append(
            Scenario(
                name="chaos",
                tool_faults=chaos.tool_faults,
                llm_faults=chaos.llm_faults,
                context_attacks=chaos.context_attacks,
            )
        )
    if not phases:
        return
    for item in parts.invariants:
        if item.model is not None:
            _when(scope, item.path, item.model, phases, "mutation or chaos phase")


def _when(
    scope: Scope, at: ConfigPath, inv: Invariant, scenarios: Sequence[Scenario], where: str
) -> None:
    if inv.when is When.ALWAYS or any(inv.when.applies(s) for s in scenarios):
        return
    scope.warn(
        (*at, "when"),
        f"'{inv.when.value}' applies to no scenario of the {where}, so this invariant is "
        "never checked",
    )
