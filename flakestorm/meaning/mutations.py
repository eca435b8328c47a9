"""The ``mutations`` section's meaning checks, from the mutations package
(:mod:`flakestorm.mutations.checks`: request-level types on a python agent, ``custom`` without
templates, the llm generator without its endpoint, duplicates, weights of types not generated),
placed in the file."""

from __future__ import annotations

from flakestorm.meaning.scope import Scope


def check_mutations(scope: Scope) -> None:
    """Reads ``mutations`` and ``agent``. The mutation catalogue is imported only for a config
    that has a ``mutations`` section (a contract-only ``validate`` stays light)."""
    agent = scope.parts.agent
    if agent is None or scope.parts.mutations is None:
        return
    from flakestorm.mutations.checks import check_mutations as findings

    for found in findings(scope.parts.mutations, agent):
        (scope.warn if found.warning else scope.error)(found.path, found.message, found.key)
