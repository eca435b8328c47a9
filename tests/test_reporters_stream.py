"""How a cell's replies streamed, as every report says it (SPEC §16): a line of figures per
cell, and a failed cell's failing stream as a timeline — escaped in every format, the same
when read back from results.json."""

from __future__ import annotations

import dataclasses
import json

from golden.cases import failing

from flakestorm.reporters import html, junit, markdown, terminal
from flakestorm.reporters.stream_view import cell_stream, timeline
from flakestorm.results.model import CellResult, RunResult, from_document, to_document
from flakestorm.results.stream_timing import Ending, StreamEvent, StreamTiming

HOSTILE = "</td><script>x</script> | `b` ::error::@team\n#7"

CUT = StreamTiming(
    terminal="[DONE]",
    ending=Ending.CLOSED,
    ended_ms=4020.0,
    first_byte_ms=3.0,
    first_content_ms=812.0,
    content_events=3,
    longest_gap_ms=4010.0,
    gap_after=3,
    timeline=(
        StreamEvent(3.0, "other", "role"),
        StreamEvent(812.0, "content", "The "),
        StreamEvent(815.0, "content", HOSTILE),
        StreamEvent(819.0, "content", "capital"),
    ),
)
FAST = StreamTiming(
    terminal="[DONE]",
    ending=Ending.DONE,
    ended_ms=60.0,
    first_byte_ms=2.0,
    first_content_ms=10.0,
    content_events=5,
    longest_gap_ms=30.0,
    gap_after=1,
)


def test_a_cell_s_streams_are_one_line_of_their_worst_figures() -> None:
    cell = _cell_with(FAST, CUT)
    assert cell_stream(cell) == (
        "first content 812 ms (first byte 3 ms, the latest of 2) · longest stall "
        "4.01 s after chunk 3 (the last) · ended with [DONE]: 1 of 2"
    )
    silent = dataclasses.replace(
        CUT, first_content_ms=None, content_events=0, longest_gap_ms=5000.0, ended_ms=5000.0
    )
    assert cell_stream(_cell_with(silent)) == (
        "no content in 5.00 s (first byte 3 ms) · ended with [DONE]: 0 of 1"
    )
    assert cell_stream(_cell_with()) is None


def test_a_timeline_numbers_the_events_it_keeps_and_counts_those_it_leaves_out() -> None:
    events = tuple(StreamEvent(float(n), "content", f"w{n}") for n in (1, 2, 3, 4, 5, 6, 7, 8))
    tail = tuple(StreamEvent(float(n), "content", f"w{n}") for n in range(13, 21))
    long = dataclasses.replace(FAST, timeline=events + tail, events_left_out=4, ending=Ending.CUT)
    rows = timeline(long)
    assert [r.number for r in rows] == [
        *"12345678", "…", "13", "14", "15", "16", "17", "18", "19", "20", "",
    ]  # fmt: skip
    assert rows[8].text == "4 events left out" and rows[8].gap
    assert (rows[9].at, rows[9].text) == ("13 ms", "w13")
    assert (rows[-1].at, rows[-1].kind) == ("60 ms", "ended: cut, no [DONE]")


def _cell_with(*streams: StreamTiming) -> CellResult:
    cell = failing().phases["contract"].cells[1]
    prompts = tuple(
        dataclasses.replace(cell.prompts[0], stream=stream, passed=stream is not CUT)
        for stream in streams
    )
    return dataclasses.replace(cell, prompts=prompts)


def _streamed() -> RunResult:
    """The failing example with its failed cell's reply streamed and cut, quoting hostile
    text in an event."""
    result = failing()
    contract = result.phases["contract"]
    cells = list(contract.cells)
    cells[1] = _cell_with(CUT)
    return dataclasses.replace(
        result,
        phases={**result.phases, "contract": dataclasses.replace(contract, cells=tuple(cells))},
    )


LINE = (
    "first content 812 ms (first byte 3 ms) · longest stall 4.01 s after chunk 3 "
    "(the last) · ended with [DONE]: 0 of 1"
)


def test_every_format_shows_the_cell_s_stream_and_the_failing_stream_s_timeline() -> None:
    result = _streamed()
    assert f"    stream: {LINE}\n" in terminal.render(result) + "\n"
    assert f"(stream: {LINE})" in junit.render(result)
    summary = markdown.render(result)
    assert f"- **Stream:** {LINE.replace('[', chr(92) + '[').replace(']', chr(92) + ']')}" in (
        summary
    )
    assert (
        "**The failing reply's stream:**\n\n"
        "| # | at | event | text |\n"
        "|---|---|---|---|\n"
        "| 1 | 3 ms | other | role |\n"
        "| 2 | 812 ms | content | The  |\n"
    ) in summary
    row = next(line for line in summary.splitlines() if line.startswith("| 3 | 815 ms |"))
    # one cell of a table: no raw pipe, backtick, tag, workflow command or mention
    assert row == (
        "| 3 | 815 ms | content | &lt;/td&gt;&lt;script&gt;x&lt;/script&gt; \\| \\`b\\` "
        ":\u200b:error:\u200b:@\u200dteam #\u200d7 |"
    )
    assert (
        "| 4 | 819 ms | content | capital |\n|  | 4.02 s | ended: closed, no \\[DONE\\] |  |"
        in (summary)
    )
    page = html.render(result)
    assert f'<p class="label">stream: {LINE}</p>' in page
    assert (
        "<tr><td>3</td><td>815 ms</td><td>content</td><td><code>&lt;/td&gt;&lt;script&gt;x"
        "&lt;/script&gt; | `b` :\u200b:error:\u200b:@team\n#7</code></td></tr>"
    ) in page
    assert "<script>x" not in page


def test_the_figures_survive_results_json_and_the_reports_render_the_same() -> None:
    result = _streamed()
    read = from_document(json.loads(json.dumps(to_document(result))))
    assert read.phases["contract"].cells[1].prompts[0].stream == CUT
    assert markdown.render(read) == markdown.render(result)
    assert html.render(read) == html.render(result)
    old = to_document(result)
    for cell in old["phases"]["contract"]["cells"]:
        for prompt in cell["prompts"]:
            prompt.pop("stream")  # a file written before streams were recorded
    assert from_document(old).phases["contract"].cells[1].prompts[0].stream is None
