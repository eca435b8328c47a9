"""The HTML report's matrix, and which cells it shows in detail (SPEC §8, §9).

A large run's matrix has a cell per invariant and scenario (100,000 in a contract of 200
invariants and 500 scenarios), so its cells are made here as strings, not by a template loop per
cell: each text escaped as the template's autoescaping escapes it (``markupsafe.escape``, what
jinja2 uses), the row handed to the template as ``Markup``. A phase's cells are read once for it
— a spooled phase's as the documents it wrote
(:meth:`~flakestorm.results.spool.Spooled.documents`), the
few fields the matrix shows taken from each, no cell made — and each keeps only its status,
whether it is flaky, its (shared) title and its anchor.

**Cells in detail.** The report shows every cell of a phase in detail (invocations, calls,
replies) up to :data:`DETAIL_LIMIT` cells. A larger phase shows its failed and errored cells
(critical first) up to that many, in matrix order, and says how many it leaves out: their detail
is in ``results.json``. A matrix cell links to its detail when it is shown.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from markupsafe import Markup, escape

from flakestorm.reporters.escape import document_excerpt
from flakestorm.reporters.view import cell_reader
from flakestorm.results.model import CellResult, PhaseOutcome, Status
from flakestorm.results.spool import Spooled
from flakestorm.results.tally import tally_of

DETAIL_LIMIT = 1_000
"""The most cells of a phase the HTML report shows in detail (the failed and errored first)."""

REASON_CHARS = 2_000
"""How much of a cell's reason its matrix title shows."""

GLYPHS: dict[str, tuple[str, str]] = {
    "passed": (
        "passed",
        '<circle cx="8" cy="8" r="7.5" class="fill"/><path d="M4.4 8.3l2.4 2.4 4.8-5" '
        'class="ink"/>',
    ),
    "failed": (
        "failed",
        '<circle cx="8" cy="8" r="7.5" class="fill"/><path d="M5.2 5.2l5.6 5.6M10.8 5.2l-5.6 '
        '5.6" class="ink"/>',
    ),
    "errored": (
        "errored",
        '<path d="M8 .5l7.5 7.5-7.5 7.5L.5 8z" class="fill"/><path d="M8 4.2v4.6" class="ink"/>'
        '<circle cx="8" cy="11.6" r="1.1" class="dot"/>',
    ),
    "flaky": (
        "flaky",
        '<path d="M8 1l7.5 13.5H.5z" class="fill"/><path d="M8 5.6v4.4" class="ink"/>'
        '<circle cx="8" cy="12.4" r="1" class="dot"/>',
    ),
    "skipped": (
        "skipped",
        '<circle cx="8" cy="8" r="6.8" class="ring"/><path d="M4.8 8h6.4" class="line"/>',
    ),
    "not_run": (
        "not run",
        '<circle cx="8" cy="8" r="6.8" class="ring"/><path d="M6.4 5.4v5.2M9.6 5.4v5.2" '
        'class="line"/>',
    ),
    "undelivered": (
        "not delivered",
        '<circle cx="8" cy="8" r="6.8" class="ring"/><path d="M3.2 12.8l9.6-9.6" class="line"/>',
    ),
}
"""The status glyphs, as inline SVG (kind -> (label, shapes)): they render the same on any
machine, emoji font or not (a CI runner's headless browser has none); colours come from the
page's stylesheet."""


@functools.cache
def glyph(kind: str) -> Markup:
    """The inline SVG of a glyph: for the matrix's cells, and the template's ``glyph``."""
    label, shapes = GLYPHS[kind]
    return Markup(
        f'<svg class="glyph {escape(kind)}" viewBox="0 0 16 16" role="img" '
        f'aria-label="{escape(label)}">{shapes}</svg>'
    )


def glyph_kinds(status: Status, flaky: bool) -> tuple[str, ...]:
    """The status glyphs of a cell: its status, and ``flaky``."""
    if not flaky:
        return (status.value,)
    return ("flaky",) if status is Status.PASSED else (status.value, "flaky")


class MatrixCell(NamedTuple):
    """What the matrix shows of a cell."""

    status: Status
    flaky: bool
    title: str
    """``STATUS: REASON``, escaped."""
    anchor: str | None
    """The element id of its detail, when the report shows it."""

    @property
    def bad(self) -> bool:
        return self.status in (Status.FAILED, Status.ERRORED)


class Detail(NamedTuple):
    """The cells of a phase the report shows in detail."""

    keys: Sequence[int] | None
    """Their tally keys (a spooled phase's indexes), in matrix order; None: every cell."""
    more: int
    """How many cells it leaves out."""


def detail(outcome: PhaseOutcome) -> Detail:
    """Which of the phase's cells the report shows in detail (see the module docstring)."""
    cells = outcome.cells
    if len(cells) <= DETAIL_LIMIT:
        return Detail(None, 0)
    missed = tally_of(cells).missed
    first = sorted(missed, key=lambda key: ("critical" not in missed[key][1], key))
    keys = sorted(first[:DETAIL_LIMIT])
    return Detail(keys, len(cells) - len(keys))


def detailed(outcome: PhaseOutcome, shown: Detail) -> Iterator[CellResult]:
    """The cells shown in detail, read one at a time as they are used."""
    if shown.keys is None:
        yield from outcome.cells
    else:
        yield from map(cell_reader(outcome.cells), shown.keys)


def matrix(outcome: PhaseOutcome, prefix: str, shown: Detail) -> dict[tuple[str, str], MatrixCell]:
    """Each cell of the phase by (invariant, scenario), its cells read once."""
    linked = None
    if shown.keys is not None:  # a spooled phase's keys are its indexes
        read = cell_reader(outcome.cells)
        spooled = isinstance(outcome.cells, Spooled)
        linked = set(shown.keys) if spooled else {read(key).index for key in shown.keys}
    titles: dict[tuple[Status, str], str] = {}  # one string per distinct title
    by_key: dict[tuple[str, str], MatrixCell] = {}
    for index, invariant_id, scenario, status, flaky, reason in _shown(outcome.cells):
        title = titles.get((status, reason))
        if title is None:
            text = f"{status.value}: {document_excerpt(reason, REASON_CHARS)}"
            title = titles[status, reason] = str(escape(text))
        anchor = f"{prefix}cell-{index}" if linked is None or index in linked else None
        by_key[invariant_id, scenario] = MatrixCell(status, flaky, title, anchor)
    return by_key


_Shown = tuple[int, str, str, Status, bool, str]


def _shown(cells: Sequence[CellResult]) -> Iterator[_Shown]:
    """(index, invariant, scenario, status, flaky, reason) of each cell: a spooled phase's from
    the documents it wrote (as ``results.json`` has them), without making its cells."""
    if isinstance(cells, Spooled):
        for d in cells.documents():
            yield (
                d["index"], d["invariant_id"], d["scenario"], Status(d["status"]),
                d.get("flaky", False), d["reason"],
            )  # fmt: skip
    else:
        for c in cells:
            yield c.index, c.invariant_id, c.scenario, c.status, c.flaky, c.reason


def row_html(cells: Iterable[MatrixCell | None]) -> Markup:
    """A matrix row's cells, each ``<td>`` on a line of its own."""
    out = []
    for cell in cells:
        if cell is None:
            out.append("<td></td>\n")
            continue
        status = cell.status.value
        glyphs = "".join(glyph(kind) for kind in glyph_kinds(cell.status, cell.flaky))
        if cell.anchor is not None:
            glyphs = f'<a href="#{escape(cell.anchor)}">{glyphs}</a>'
        flaky = " flaky" if cell.flaky else ""
        out.append(
            f'<td class="cell {status}{flaky}" data-status="{status}" title="{cell.title}">'
            f"{glyphs}</td>\n"
        )
    return Markup("".join(out))
