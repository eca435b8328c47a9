"""How the reports show the mutation phase: the per-type table, the failed mutations (read one
at a time from a spooled phase), what each mutation sent and got back, and its mark. Untrusted
text in them still goes through :mod:`flakestorm.reporters.escape` in each format."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flakestorm.reporters.errored import errored_note, errored_together
from flakestorm.results.model import MutationResult, PhaseOutcome, Status
from flakestorm.results.spool import Mapped, Remade, Spooled
from flakestorm.results.tally import tally_of

MUTATION_LEGEND = (
    "Pass rate per mutation type; the score weighs each mutation by its type's weight. "
    "A request-level mutation passes with a clean rejection (4xx, or 501 for a method) or a "
    "reply that satisfies the invariants."
)


def mutation_legend(outcome: PhaseOutcome) -> str:
    """:data:`MUTATION_LEGEND`, how many verdicts came from an isolated re-run, and the
    mutations errored together (:func:`errored_together`)."""
    legend = MUTATION_LEGEND
    isolated = tally_of(outcome.mutations).isolated  # by index: whether it passed
    if isolated:
        passed = sum(isolated.values())
        n = len(isolated)
        legend += (
            f" {n} mutation{'s' if n != 1 else ''} "
            f"{'were' if n != 1 else 'was'} judged on an isolated re-run (the agent went down "
            f"while other mutations were in flight, so each was sent again on its own once the "
            f"agent was ready again): {passed} passed alone."
        )
    for group in errored_together(outcome):
        legend += f" {errored_note(group)}."
    return legend


@dataclass(frozen=True)
class TypeRow:
    """One mutation type's line of the per-type table."""

    type: str
    weight: float
    total: int
    passed: int

    @property
    def rate(self) -> str:
        """The pass rate as text (``87.5%``), ``n/a`` when none ran."""
        return "n/a" if not self.total else f"{100.0 * self.passed / self.total:.1f}%"


def mutation_types(outcome: PhaseOutcome) -> list[TypeRow]:
    """Per mutation type, in the order the phase ran them: total (scored), passed, weight."""
    types = sorted(tally_of(outcome.mutations).types.items(), key=lambda kind: kind[1].first)
    return [TypeRow(name, kind.weight, kind.scored, kind.passed) for name, kind in types]


def failed_mutations(outcome: PhaseOutcome) -> Sequence[MutationResult]:
    """Failed and errored mutations, in index order, but those errored together with others
    for one reason (:func:`errored_together`): of a spooled phase (read back from disk,
    :mod:`flakestorm.results.spool`), read again one at a time as they are used, not all held."""
    together = {p for group in errored_together(outcome) for p in group.positions}
    mutations = outcome.mutations
    if isinstance(mutations, Spooled | Remade) and not together:  # by index, from its tally
        return Mapped(mutations.tally.failed(), mutations.at)
    if isinstance(mutations, tuple):
        return [m for i, m in enumerate(mutations) if failed_mutation(m) and i not in together]
    positions = [i for i, m in enumerate(mutations) if failed_mutation(m) and i not in together]
    return Mapped(positions, mutations.__getitem__)


def failed_mutation(mutation: MutationResult) -> bool:
    """Whether ``mutation`` failed or errored."""
    return mutation.status in (Status.FAILED, Status.ERRORED)


def mutation_input(mutation: MutationResult) -> str:
    """What the mutation changed: its request changes, or the mutated prompt (untrusted
    either way: escape it)."""
    if mutation.changes:
        return "; ".join(mutation.changes)
    if mutation.turns:  # sent as real turns, in one session
        turns = (*mutation.turns, mutation.sent)
        return "\n".join(f"turn {n}: {turn}" for n, turn in enumerate(turns, 1))
    return mutation.sent


def mutation_input_label(mutation: MutationResult) -> str:
    """What :func:`mutation_input` is: ``request changes`` or ``sent``."""
    return "request changes" if mutation.changes else "sent"


def mutation_reply(mutation: MutationResult) -> str:
    """What came back: the agent's answer, or ``no reply (HTTP 500): status`` (untrusted
    either way: escape it)."""
    if mutation.output is not None:
        return mutation.output
    status = f" (HTTP {mutation.http_status})" if mutation.http_status is not None else ""
    return f"no reply{status}" + (f": {mutation.error}" if mutation.error else "")


def mutation_mark(mutation: MutationResult) -> str:
    return FLAKY_MARK if mutation.flaky else mutation.status.symbol


FLAKY_MARK = "⚠️"
