"""How a cell's replies streamed, as every report says it (SPEC §16): a line of figures per
cell, and a failed cell's failing stream as a timeline — escaped in every format, the same
when read back from results.json, kept through shards, their merge and the replay phase."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from golden.cases import failing

from flakestorm.engine.runner import Overrides, run_phases
from flakestorm.loader import load_config
from flakestorm.reporters import comment, html, junit, markdown, terminal
from flakestorm.reporters.stream_view import cell_stream, timeline
from flakestorm.results.model import CellResult, RunResult, from_document, to_document
from flakestorm.results.shards import Shard
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
        "first content 812 ms (first byte 3 ms; the slowest of 2 streams) · longest stall "
        "4.01 s after chunk 3 (the last) · 1 of 2 ended with [DONE]"
    )
    silent = dataclasses.replace(
        CUT, first_content_ms=None, content_events=0, longest_gap_ms=5000.0, ended_ms=5000.0
    )
    assert (
        cell_stream(_cell_with(silent))
        == "no content in 5.00 s (first byte 3 ms) · 0 of 1 ended with [DONE]"
    )
    nothing = dataclasses.replace(silent, first_byte_ms=None, ending=Ending.TIMEOUT)
    assert cell_stream(_cell_with(nothing, FAST)) == (
        "no content in 5.00 s (no byte; the slowest of 2 streams) · longest stall 30 ms after "
        "chunk 1 · 1 of 2 ended with [DONE]"
    )
    assert cell_stream(_cell_with()) is None


def test_one_reply_judged_by_several_invariants_is_one_stream() -> None:
    # a replayed session's cell holds one verdict per invariant, all on the same reply
    cell = _cell_with(CUT, CUT)
    assert cell_stream(cell) == LINE


def test_the_last_row_of_a_timeline_says_how_the_stream_ended() -> None:
    said = {
        ending: timeline(dataclasses.replace(FAST, ending=ending))[-1].kind for ending in Ending
    }
    assert said == {
        Ending.DONE: "ended with [DONE]",
        Ending.CLOSED: "closed without [DONE]",
        Ending.CUT: "cut mid-body, without [DONE]",
        Ending.RAISED: "broke off (the generator raised)",
        Ending.TIMEOUT: "timed out (agent.timeout), without [DONE]",
    }


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
    assert (rows[-1].at, rows[-1].kind) == ("60 ms", "cut mid-body, without [DONE]")


def _cell_with(*streams: StreamTiming) -> CellResult:
    cell = failing().phases["contract"].cells[1]
    prompts = tuple(
        dataclasses.replace(cell.prompts[0], stream=stream, passed=stream is not CUT)
        for stream in streams
    )
    return dataclasses.replace(cell, prompts=prompts)


def _streamed(stream: StreamTiming = CUT, leak_at: int | None = None) -> RunResult:
    """The failing example with its failed cell's reply streamed (by default, cut, quoting
    hostile text in an event)."""
    result = failing()
    contract = result.phases["contract"]
    cells = list(contract.cells)
    cell = _cell_with(stream)
    prompt = dataclasses.replace(cell.prompts[0], passed=False, leak_at=leak_at)
    cells[1] = dataclasses.replace(cell, prompts=(prompt,))
    return dataclasses.replace(
        result,
        phases={**result.phases, "contract": dataclasses.replace(contract, cells=tuple(cells))},
    )


LINE = (
    "first content 812 ms (first byte 3 ms) · longest stall 4.01 s after chunk 3 "
    "(the last) · 0 of 1 ended with [DONE]"
)


def test_every_format_shows_the_cell_s_stream_and_the_failing_stream_s_timeline() -> None:
    result = _streamed()
    assert f"    stream: {LINE}\n" in terminal.render(result) + "\n"
    assert f"(stream: {LINE})" in junit.render(result)
    escaped = (  # markdown: the brackets escaped
        "first content 812 ms (first byte 3 ms) · longest stall 4.01 s after chunk 3 "
        "(the last) · 0 of 1 ended with \\[DONE\\]"
    )
    assert f"<br>stream: {escaped} |" in comment.render_first(result)
    summary = markdown.render(result)
    assert f"- **Stream:** {escaped}\n" in summary
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
    assert "| 4 | 819 ms | content | capital |\n|  | 4.02 s | closed without \\[DONE\\] |  |" in (
        summary
    )
    page = html.render(result)
    assert f'<p class="label">stream: {LINE}</p>' in page
    assert (
        '<tr><td>3</td><td>815 ms</td><td>content</td><td class="excerpt">'
        "&lt;/td&gt;&lt;script&gt;x&lt;/script&gt; | `b` :\u200b:error:\u200b:@team\n#7</td></tr>"
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


FENCED = "```\n| a | b |\n```"
LONG = dataclasses.replace(
    FAST,
    content_events=20,
    ended_ms=1500.0,
    timeline=(
        *(StreamEvent(float(n), "content", f"w{n}") for n in range(1, 9)),
        StreamEvent(20.0, "content", FENCED),
        *(StreamEvent(float(n), "content", f"w{n}") for n in range(21, 28)),
    ),
    events_left_out=4,
)


def test_a_long_timeline_counts_what_it_leaves_out_and_a_fence_stays_in_its_cell() -> None:
    result = _streamed(LONG)
    summary = markdown.render(result)
    assert (
        "| 8 | 8 ms | content | w8 |\n"
        "| … |  |  | 4 events left out |\n"
        "| 13 | 20 ms | content | \\`\\`\\` \\| a \\| b \\| \\`\\`\\` |\n"
        "| 14 | 21 ms | content | w21 |\n"
    ) in summary
    assert "| 20 | 27 ms | content | w27 |\n|  | 1.50 s | ended with \\[DONE\\] |  |\n" in summary
    assert "```\n| a" not in summary
    page = html.render(result)
    assert (
        '<tr class="gap"><td>…</td><td></td><td></td><td class="excerpt">4 events left out'
        "</td></tr>\n"
        '<tr><td>13</td><td>20 ms</td><td>content</td><td class="excerpt">```\n| a | b |\n```</td>'
    ) in page


def test_public_reports_mask_a_timeline_and_withhold_a_leaked_reply_s_text() -> None:
    mail = StreamEvent(900.0, "content", "write to jane.doe@example.com")
    meta = StreamEvent(950.0, "other", '{"user": "jane.doe@example.com"}')
    told = dataclasses.replace(CUT, timeline=(*CUT.timeline[:2], mail, meta))
    summary = markdown.render(_streamed(told))
    masked = "j\\*\\*\\*@\u200de\\*\\*\\*.com"  # a mention defused too
    assert f"| 3 | 900 ms | content | write to {masked} |" in summary
    assert f"| 4 | 950 ms | other | {{&quot;user&quot;: &quot;{masked}&quot;}} |" in summary
    leaked = _streamed(told, leak_at=4)
    summary = markdown.render(leaked)
    assert (
        "| 1 | 3 ms | other | role |\n"
        "| 2 | 812 ms | content | \\[withheld: the reply leaked\\] |\n"
        "| 3 | 900 ms | content | \\[withheld: the reply leaked\\] |\n"
        f"| 4 | 950 ms | other | {{&quot;user&quot;: &quot;{masked}&quot;}} |\n"
    ) in summary
    assert "jane.doe" not in summary
    page = html.render(leaked)  # the run's artifact keeps the whole text
    assert '<td class="excerpt">write to jane.doe@example.com</td>' in page


def test_public_reports_mask_pii_split_between_a_stream_s_events() -> None:
    """A model streams an address a few characters at a time: no event holds it whole, so
    each event alone has no PII; read as one text, the address is found and masked where it
    starts, and what the later events held of it is left out."""
    pieces = ("mail jane", ".doe@exa", "mple.com", " today")
    events = tuple(StreamEvent(900.0 + n, "content", piece) for n, piece in enumerate(pieces))
    told = dataclasses.replace(CUT, timeline=(CUT.timeline[0], *events))
    summary = markdown.render(_streamed(told))
    masked = "j\\*\\*\\*@\u200de\\*\\*\\*.com"
    assert (
        f"| 2 | 900 ms | content | mail {masked} |\n"
        "| 3 | 901 ms | content |  |\n"
        "| 4 | 902 ms | content |  |\n"
        "| 5 | 903 ms | content |  today |\n"
    ) in summary
    assert not any(piece in summary for piece in ("jane", ".doe@exa", "mple.com"))
    page = html.render(_streamed(told))  # the run's artifact keeps the whole text
    assert '<td class="excerpt">.doe@exa</td>' in page
    # each event's own PII stays found when the next event's text abuts it (Anthropic's
    # content_block_stop, here), and PII split between events and an event's own together
    ended = (
        StreamEvent(900.0, "content", "SSN 123-45-6789 or call 555-"),
        StreamEvent(901.0, "content", "123-4567"),
        StreamEvent(902.0, "other", "content_block_stop"),
    )
    summary = markdown.render(_streamed(dataclasses.replace(CUT, timeline=ended)))
    ssn, phone = "\\*\\*\\*-\\*\\*-6789", "\\*\\*\\*-\\*\\*\\*-\\*\\*67"
    assert (
        f"| 1 | 900 ms | content | SSN {ssn} or call {phone} |\n"
        "| 2 | 901 ms | content |  |\n"
        "| 3 | 902 ms | other | content\\_block\\_stop |\n"
    ) in summary


AGENT = """
def answer(prompt):
    yield ""  # the first byte, no content
    for word in ("Paris ", "is the ", "capital"):
        yield word
    if "broken" in prompt:
        raise RuntimeError("lost the LLM")
"""


def _project(tmp_path: Path) -> Path:
    """A python agent streaming by yielding (it breaks off on a prompt saying ``broken``),
    two calm scenarios and a replayed session of the broken prompt."""
    module = f"stream_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(AGENT)
    (tmp_path / "sessions").mkdir()
    session = 'id: s0\ninput: "broken: capital of France?"\ntool_responses: []\n'
    (tmp_path / "sessions" / "s0.yaml").write_text(session)
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer"},
        "golden_prompts": ["capital of France?", "broken: capital of France?"],
        "contract": {
            "name": "streams",
            "invariants": [
                {"id": "ends", "type": "stream_completes"},
                {"id": "paris", "type": "contains", "value": "Paris"},
            ],
            "chaos_matrix": [{"name": "calm"}, {"name": "calm-again"}],
        },
        "replays": {"sessions": [{"file": "sessions/*.yaml"}]},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    return path


def _streams(document: dict[str, Any]) -> dict[str, list[Any]]:
    """Each cell's prompts' streams as results.json has them, by cell id."""
    return {
        f"{cell['invariant_id']}[{cell['scenario']}]": [p["stream"] for p in cell["prompts"]]
        for phase in document["phases"].values()
        for cell in phase["cells"]
    }


def _shape(document: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Each cell's streams without their times (which differ from run to run), by cell id."""
    return {
        cell: [
            (
                s["terminal"],
                s["ending"],
                s["content_events"],
                s["gap_after"],
                *((e["kind"], e["text"]) for e in s["timeline"]),
            )
            for s in streams
        ]
        for cell, streams in _streams(document).items()
    }


END = "the generator's end"
WORDS = (("content", "Paris "), ("content", "is the "), ("content", "capital"))
WHOLE = [(END, "done", 3, 3, *WORDS), (END, "raised", 3, 3, *WORDS)]


def test_streams_are_recorded_through_shards_merge_and_replay(tmp_path: Path) -> None:
    path = _project(tmp_path)

    def run(shard: Shard | None) -> RunResult:
        return run_phases(load_config(path), ["contract", "replay"], Overrides(shard=shard))

    contract_ids = [f"{i}[{s}]" for i in ("ends", "paris") for s in ("calm", "calm-again")]
    whole = to_document(run(None))
    assert _shape(whole) == {
        **{cell: WHOLE for cell in contract_ids},
        # the replayed session's reply, judged by each invariant
        "s0[replay]": [(END, "raised", 3, 3, *WORDS)] * 2,
    }
    files = []
    for k in (1, 2):
        (tmp_path / f"s{k}").mkdir()
        files.append(tmp_path / f"s{k}" / "results.json")
        files[-1].write_text(json.dumps(to_document(run(Shard(k, 2)))))
    done = subprocess.run(
        [sys.executable, "-m", "flakestorm", "merge", *map(str, files), "-o", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    merged = json.loads((tmp_path / "out" / "results.json").read_text())
    from_shards = {k: v for f in files for k, v in _streams(json.loads(f.read_text())).items()}
    assert _streams(merged) == from_shards  # times and all
    assert _shape(merged) == _shape(whole)
    summary = (tmp_path / "out" / "summary.md").read_text()
    ms = r"(?:\d+ ms|\d+\.\d\d s)"  # the times vary: below a second, or from one
    contract_line = (
        rf"- \*\*Stream:\*\* first content {ms} \(first byte {ms}; the slowest of 2 streams\) · "
        rf"longest stall {ms} after chunk 3 \(the last\) · 1 of 2 ended with {END}\n"
    )
    assert len(re.findall(contract_line, summary)) == 2  # ends[calm], ends[calm-again]
    replay_line = (
        rf"- \*\*Stream:\*\* first content {ms} \(first byte {ms}\) · "
        rf"longest stall {ms} after chunk 3 \(the last\) · 0 of 1 ended with {END}\n"
    )
    assert len(re.findall(replay_line, summary)) == 1
    table = (
        r"\| # \| at \| event \| text \|\n\|---\|---\|---\|---\|\n"
        rf"\| 1 \| {ms} \| content \| Paris  \|\n"
        rf"\| 2 \| {ms} \| content \| is the  \|\n"
        rf"\| 3 \| {ms} \| content \| capital \|\n"
        rf"\|  \| {ms} \| broke off \(the generator raised\) \|  \|\n"
    )
    assert len(re.findall(table, summary)) == 3  # every failed cell's failing stream
