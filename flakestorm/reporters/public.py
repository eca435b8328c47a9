"""Public-safe reports: what the job summary, the PR comment and JUnit may quote of the agent's
replies.

A job summary is world-readable on a public repository, and so is a PR comment, and so are the
check runs test-report actions make of ``junit.xml``. What the contract caught must not be
republished there: the PII an ``excludes_pii`` invariant found, the system prompt a probe
extracted. :func:`public` returns a copy of a run's result for those reports (the one rule:
they quote what it returns, none masks a text of its own), in two separate steps over the
agent's output:

1. **Cut at the leak.** A reply that failed a leak invariant (``leak_at`` of an invocation or a
   mutation, see :data:`flakestorm.checks.invariants.LEAK_TYPES`) keeps only what comes before
   the match, followed by :data:`CUT_NOTE`; the reasons that quote the match
   (``matched `…` at N: `<match>```) keep the pattern and the position, not the match. Its
   streamed reply's timeline keeps its events' times and kinds, not its content events' text
   (:data:`WITHHELD_EVENT`).
2. **Mask PII.** Every PII finding (:func:`flakestorm.checks.pii.find_pii`, every kind) in what is
   left of a reply, each event of a streamed reply's timeline (and PII that only adjacent
   content events hold together: the masked form stands where it starts), an agent error
   message and the
   reasons of failed cells and invocations is replaced by its masked form (``j***@e***.com``);
   so are failed mutations' replies and reasons. Errored cells' reasons are flakestorm's own
   messages (wiring hints, reset failures) and are kept.

What was withheld (:attr:`PublicResult.masked`, :attr:`PublicResult.cut`, and so whether a
report says it is public-safe) is counted over what these reports can quote: the failed and
errored cells (a matrix shows only the others' marks) and the mutations. A spooled phase's cells
are made public as a report reads them (:class:`~flakestorm.results.spool.Remade`): the failed and
errored ones first, by index, for the counts; a matrix reads none (its marks are the tally's).

Secrets are another rule, applied to every report before this one
(:mod:`flakestorm.redaction`). ``results.json`` and ``report.html``, the run's artifact, keep
the full text, and the reports that use this say so (:data:`NOTE`; JUnit in its suites'
``public_safe`` property). The action's ``redact: off`` input (for private repositories)
renders the job summary and the comment from the full result instead; ``summary.md`` and
``junit.xml`` in the report directory stay public-safe.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from flakestorm.checks.pii import find_pii
from flakestorm.redaction import splice
from flakestorm.results.model import (
    CellResult,
    MutationResult,
    PhaseOutcome,
    PromptResult,
    RunResult,
    Status,
)
from flakestorm.results.spool import Remade, Spooled
from flakestorm.results.stream_timing import StreamTiming
from flakestorm.results.tally import tally_of

_T = TypeVar("_T", CellResult, MutationResult)

CUT_NOTE = (
    "[… cut where the reply shows what a leak invariant forbids: the rest is withheld from "
    "public reports; the full reply is in results.json and report.html]"
)
WITHHELD_EVENT = "[withheld: the reply leaked]"
"""What a public report's timeline shows for a content event of a reply cut at a leak."""
NOTE = (
    "Public-safe report: matched PII is masked and replies that failed a leak invariant are cut "
    "where the leak starts. The full text is in `results.json` and `report.html` (the run's "
    "artifact)."
)


@dataclass(frozen=True)
class PublicResult:
    """A result made safe to publish, and what was withheld."""

    result: RunResult
    masked: int
    """PII findings masked."""
    cut: int
    """Replies cut at a leak."""

    @property
    def changed(self) -> bool:
        return bool(self.masked or self.cut)


def mask_pii(text: str) -> tuple[str, int]:
    """``text`` with every PII finding replaced by its masked form, and how many there were."""
    found = find_pii(text)
    if not found:
        return text, 0
    out, last = [], 0
    for match in found:
        out.append(text[last : match.start])
        out.append(match.masked)
        last = match.end
    out.append(text[last:])
    return "".join(out), len(found)


def public(result: RunResult) -> PublicResult:
    """``result`` with the leaks cut and the PII masked (see the module docstring)."""
    counter = _Counter()
    phases = {name: counter.phase(outcome) for name, outcome in result.phases.items()}
    return PublicResult(
        dataclasses.replace(result, phases=phases), counter.masked, counter.cut_replies
    )


def public_cell(cell: CellResult) -> CellResult:
    """One cell made public-safe, as :func:`public` does (for a log line about it)."""
    return _Counter().cell(cell)


def _pii_spans(texts: list[str], content: list[bool]) -> list[tuple[int, int, str]]:
    """The PII of a timeline's events, as spans of their joined text with the masked form:
    each event's own, and what a run of adjacent content events holds only together (an
    address streamed a few characters per event: the answer is their joined text)."""
    starts = [sum(len(t) for t in texts[:i]) for i in range(len(texts) + 1)]
    spans = [
        (starts[i] + m.start, starts[i] + m.end, m.masked)
        for i, text in enumerate(texts)
        for m in find_pii(text)
    ]
    i = 0
    while i < len(texts):
        j = i
        while j < len(texts) and content[j]:
            j += 1
        if j - i > 1:  # content events i..j-1, read as one text
            for m in find_pii("".join(texts[i:j])):
                start, end = starts[i] + m.start, starts[i] + m.end
                crosses = not any(starts[k] <= start and end <= starts[k + 1] for k in range(i, j))
                if crosses and not any(a < end and start < b for a, b, _ in spans):
                    spans.append((start, end, m.masked))
        i = max(j, i + 1)
    return sorted(spans)


def _withhold_match(reason: str, leak_at: int) -> str:
    """``reason`` without the quoted match of a leak at ``leak_at`` (``at N: `match```)."""
    return re.sub(rf"\bat {leak_at}: `[^`]*`", f"at {leak_at} (the match is withheld)", reason)


class _Counter:
    """Makes cells public and counts what it withheld."""

    def __init__(self) -> None:
        self.masked = 0
        self.cut_replies = 0

    def mask(self, text: str) -> str:
        masked, n = mask_pii(text)
        self.masked += n
        return masked

    def phase(self, outcome: PhaseOutcome) -> PhaseOutcome:
        return dataclasses.replace(
            outcome,
            cells=self.cells(outcome.cells),
            mutations=self.remade(outcome.mutations, _Counter.mutation),
        )

    def cells(self, cells: Sequence[CellResult]) -> Sequence[CellResult]:
        """``cells`` made public, what was withheld counted over the failed and errored ones
        (those a report quotes). A spooled phase's are made as they are used: only those are
        read for the counts (by index, from the spool's tally)."""
        bad = tally_of(cells).missed
        if not isinstance(cells, Spooled):
            return tuple(
                (self if key in bad else _Counter()).cell(cell) for key, cell in enumerate(cells)
            )
        for key in sorted(bad):
            self.cell(cells.at(key))
        return Remade(cells, lambda cell: _Counter().cell(cell))  # already counted

    def remade(self, items: Sequence[_T], make: Callable[[_Counter, _T], _T]) -> Sequence[_T]:
        """``items`` made public by ``make``. A spooled phase's items are made public in one
        pass, for the counts of what was withheld, then made again one at a time as a report
        uses them: not written again. For mutations: a report reads only the failed ones it
        shows (by index, from the spool's tally)."""
        if not isinstance(items, Spooled):
            return tuple(make(self, item) for item in items)
        for item in items:
            make(self, item)
        return Remade(items, lambda item: make(_Counter(), item))  # already counted

    def mutation(self, mutation: MutationResult) -> MutationResult:
        output, reason = self.cut(mutation.output, mutation.reason, mutation.leak_at)
        return dataclasses.replace(
            mutation,
            output=None if output is None else self.mask(output),
            reason=self.mask(reason) if mutation.status is Status.FAILED else reason,
            leak_at=None,
        )

    def cut(self, output: str | None, reason: str, leak_at: int | None) -> tuple[str | None, str]:
        """A reply cut where its leak starts, and its reason without the quoted match."""
        if leak_at is None:
            return output, reason
        if output is not None:
            output = f"{output[:leak_at]}\n{CUT_NOTE}"
            self.cut_replies += 1
        return output, _withhold_match(reason, leak_at)

    def cell(self, cell: CellResult) -> CellResult:
        leaks = [p.leak_at for p in cell.prompts if p.leak_at is not None]
        prompts = tuple(self.prompt(p) for p in cell.prompts)
        reason, checked_reason = cell.reason, cell.checked_reason
        for leak_at in leaks:
            reason = _withhold_match(reason, leak_at)
            if checked_reason is not None:
                checked_reason = _withhold_match(checked_reason, leak_at)
        if cell.status is Status.FAILED:  # its reason is the invariant's, quoting the reply
            reason = self.mask(reason)
        if checked_reason is not None:
            checked_reason = self.mask(checked_reason)
        return dataclasses.replace(
            cell, prompts=prompts, reason=reason, checked_reason=checked_reason
        )

    def prompt(self, prompt: PromptResult) -> PromptResult:
        output, reason = self.cut(prompt.output, prompt.reason, prompt.leak_at)
        return dataclasses.replace(
            prompt,
            output=None if output is None else self.mask(output),
            reason=self.mask(reason),
            error_message=self.mask(prompt.error_message),
            console=self.mask(prompt.console),
            stream=self.stream(prompt.stream, cut=prompt.leak_at is not None),
            leak_at=None,  # cut: nothing left to withhold
        )

    def stream(self, stream: StreamTiming | None, cut: bool) -> StreamTiming | None:
        """A reply's timeline with every event's excerpt masked; of a reply cut at a leak, the
        content events' excerpts withheld (an excerpt is a chunk's first characters: where
        each chunk starts in the reply is not known, nor so which came before the leak)."""
        if stream is None or not stream.timeline:
            return stream
        if cut:
            events = tuple(
                dataclasses.replace(
                    event,
                    text=WITHHELD_EVENT if event.kind == "content" else self.mask(event.text),
                )
                for event in stream.timeline
            )
        else:
            texts = [event.text for event in stream.timeline]
            spans = _pii_spans(texts, [event.kind == "content" for event in stream.timeline])
            self.masked += len(spans)
            events = tuple(
                dataclasses.replace(event, text=text)
                for event, text in zip(stream.timeline, splice(texts, spans), strict=True)
            )
        return dataclasses.replace(stream, timeline=events)
