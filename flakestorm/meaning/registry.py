"""The meaning checks, one registration line each, and :func:`check`, which runs them.

A :class:`Check` declares the parts of the config it reads (names of
:mod:`flakestorm.meaning.parts`: ``agent``, ``contract.chaos_matrix[*]``, …); :func:`check`
runs it only when none of them failed to validate, so a check never sees a part whose
structure is wrong, and every other check still runs. A check over list items (each
invariant, each scenario) declares no part for them and looks at the items that validated.

**A new section's checks** (a phase's own section, say) go in a module of this package, as a
function of a :class:`~flakestorm.meaning.scope.Scope`, registered below with the parts it
reads: ``register(Check("mutations", ("mutations", "agent"), check_mutations))``. Checks that
cannot live here register themselves the same way from their own module: the replay sessions'
(:mod:`flakestorm.loader.replays`, which reads session and contract files and is loaded with
the loader). A check written against a whole config reads :meth:`Parts.config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flakestorm.meaning.a2a import check_a2a
from flakestorm.meaning.accepted import check_accepted
from flakestorm.meaning.agent import check_agent, check_streamed
from flakestorm.meaning.conduct import check_amplification, check_conduct, check_conduct_phases
from flakestorm.meaning.conversations import check_isolation, check_turns
from flakestorm.meaning.faults import (
    check_delivery,
    check_faults,
    check_sweeps,
    check_tool_names,
    check_unique_names,
)
from flakestorm.meaning.invariants import (
    check_contract_when,
    check_invariants,
    check_phase_when,
    check_unique_ids,
)
from flakestorm.meaning.judges import check_judges
from flakestorm.meaning.mcp import check_mcp
from flakestorm.meaning.mutations import check_mutations
from flakestorm.meaning.parts import Parts
from flakestorm.meaning.scope import Findings, Locate, Scope
from flakestorm.meaning.sections import (
    check_advanced,
    check_golden_prompts,
    check_proxy,
    check_scoring,
)


@dataclass(frozen=True)
class Check:
    """One meaning check: its name, the parts it reads, and the function that checks them."""

    name: str
    reads: tuple[str, ...]
    run: Callable[[Scope], None]


CHECKS: dict[str, Check] = {}
"""Every check by name, in the order they run (problems are sorted by place afterwards)."""


def register(check: Check) -> None:
    """Add ``check`` (a new name goes last; an existing name is replaced in place)."""
    CHECKS[check.name] = check


def check(parts: Parts, locate: Locate, base_dir: Path) -> Findings:
    """Every error and warning of the checks whose parts validated; ``base_dir`` resolves
    ``file:`` paths, ``locate`` turns a config path and a message into a Problem."""
    scope = Scope(parts, locate, base_dir)
    for one in CHECKS.values():
        if parts.failed.isdisjoint(one.reads):
            one.run(scope)
    return scope.found


register(Check("agent", ("agent",), check_agent))
register(Check("streamed invariants", ("agent",), check_streamed))
register(Check("invariants", (), check_invariants))
register(Check("unique ids", ("contract.invariants",), check_unique_ids))
register(Check("faults", (), check_faults))
register(Check("unique names", ("contract.chaos_matrix",), check_unique_names))
register(Check("sweeps", ("contract.chaos_matrix[*]",), check_sweeps))
register(Check("delivery", ("agent", "proxy"), check_delivery))
register(Check("tool names", ("agent", "proxy"), check_tool_names))
register(Check("golden prompts", ("golden_prompts",), check_golden_prompts))
register(Check("conversation isolation", ("golden_prompts", "agent"), check_isolation))
register(Check("conversation turns", ("golden_prompts",), check_turns))
register(Check("mutations", ("mutations", "agent"), check_mutations))
register(Check("proxy", ("proxy",), check_proxy))
register(Check("mcp", ("agent", "proxy"), check_mcp))
register(Check("a2a", ("proxy",), check_a2a))
register(Check("scoring", ("scoring",), check_scoring))
register(Check("advanced", ("advanced",), check_advanced))
register(Check("accepted", ("contract", "mutations"), check_accepted))
register(Check("contract when", ("contract.chaos_matrix[*]",), check_contract_when))
register(Check("phase when", ("chaos",), check_phase_when))
register(Check("judges", ("advanced", "proxy"), check_judges))
register(Check("calls counted", ("agent", "proxy"), check_conduct))
register(Check("amplification", ("contract.chaos_matrix[*]", "chaos"), check_amplification))
register(Check("calls judged where", (), check_conduct_phases))
