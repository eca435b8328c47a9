"""A results.json read as a stream (SPEC §9): the items one at a time into spools, the same
result as the document read whole, whatever the chunks and the layout; a malformed item or a
broken document refused, located; a streamed reply's figures (SPEC §16) read back alike."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import pytest
from golden.cases import chaos_only, failing, mutation

from flakestorm.reporters import json as json_report
from flakestorm.results import stream as results_stream
from flakestorm.results.model import ResultsError, RunResult, from_document, to_document
from flakestorm.results.spool import Spooled
from flakestorm.results.stream import NotJson, read_streamed
from flakestorm.results.stream_timing import Ending, StreamEvent, StreamTiming

RUNS = {"failing": failing, "chaos_only": chaos_only, "mutation": mutation}


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_streamed_result_is_the_document_read_whole_in_any_chunks(
    monkeypatch: pytest.MonkeyPatch, name: str, chunk: int
) -> None:
    monkeypatch.setattr(results_stream, "_CHUNK", chunk)
    text = json_report.render(RUNS[name]())
    whole = from_document(json.loads(text))
    streamed = read_streamed(io.StringIO(text))
    assert to_document(streamed) == to_document(whole)
    outcome = next(iter(streamed.phases.values()))
    items = outcome.mutations if name == "mutation" else outcome.cells
    assert isinstance(items, Spooled)  # read back from disk as they are used
    assert json_report.render(streamed) == text
    written = io.StringIO()
    json_report.write(streamed, written)  # the items' text as read, written out again
    assert written.getvalue() == text


def test_a_compact_or_reordered_document_reads_the_same() -> None:
    document = to_document(failing())
    document = dict(reversed(list(document.items())))  # phases before the rest
    compact = json.dumps(document, separators=(",", ":"))
    assert to_document(read_streamed(io.StringIO(compact))) == to_document(failing())


def _broken_cell() -> str:
    document = to_document(failing())
    document["phases"]["contract"]["cells"][2]["runs_total"] = "three"
    return json.dumps(document)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (_broken_cell(), ResultsError, "contract.cells[2].runs_total: 'three' is not an int"),
        ('{"phases": {"contract": {"cells": [1]}}}', ResultsError, "cells[0]: not an object"),
        (json_report.render(failing())[:5000], NotJson, "character"),
        ('{"schema_version": 2} {}', NotJson, "extra data after the document"),
        ('{"a" 1}', NotJson, "expecting ':'"),
        ("[1, 2]", ResultsError, "not a results document"),
    ],
)
def test_a_malformed_document_is_refused_saying_where(
    text: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        read_streamed(io.StringIO(text))
    assert message in str(raised.value)


def test_a_number_cut_by_a_chunk_boundary_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    result: RunResult = failing()
    text = json_report.render(result).replace('"seed": 1234,', '"seed": 1234567,')
    monkeypatch.setattr(results_stream, "_CHUNK", 3)
    assert read_streamed(io.StringIO(text)).seed == 1234567


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("runs_total", True, "cells[0].runs_total: True is not an int"),
        ("flaky", 1, "cells[0].flaky: 1 is not a boolean"),
        ("reason", 7, "cells[0].reason: 7 is not a string"),
        ("faults_fired", [3], "cells[0].faults_fired[0]: 3 is not a string"),
        ("prompts.latency_ms", "fast", "cells[0].prompts[0].latency_ms: 'fast' is not a number"),
        ("prompts.status", 2.5, "cells[0].prompts[0].status: 2.5 is not an int"),
    ],
)
def test_each_field_of_a_streamed_item_is_checked_and_located(
    field: str, value: object, message: str
) -> None:
    document = to_document(failing())
    cell = document["phases"]["contract"]["cells"][0]
    if field.startswith("prompts."):
        cell["prompts"][0][field.split(".", 1)[1]] = value
    else:
        cell[field] = value
    with pytest.raises(ResultsError) as raised:
        read_streamed(io.StringIO(json.dumps(document)))
    assert f"phases.contract.{message}" in str(raised.value)
    assert from_document(to_document(failing())) == failing()  # a good document: no complaint


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("severity", 'cells[0]: TypeError("CellResult.__init__() missing 1 required positional'),
        ("prompts.sent", 'cells[0]: TypeError("PromptResult.__init__() missing 1 required'),
        ("+colour", 'cells[0]: TypeError("CellResult.__init__() got an unexpected keyword'),
        ("prompts.+colour", 'cells[0]: TypeError("PromptResult.__init__() got an unexpected'),
    ],
)
def test_a_streamed_item_missing_a_field_or_with_a_foreign_one_is_refused_located(
    field: str, message: str
) -> None:
    document = to_document(failing())
    cell = document["phases"]["contract"]["cells"][0]
    target = cell["prompts"][0] if field.startswith("prompts.") else cell
    name = field.removeprefix("prompts.")
    if name.startswith("+"):
        target[name[1:]] = "blue"
    else:
        del target[name]
    with pytest.raises(ResultsError) as raised:
        read_streamed(io.StringIO(json.dumps(document)))
    assert f"results document is malformed: phases.contract.{message}" in str(raised.value)


STREAM = StreamTiming(
    terminal="[DONE]",
    ending=Ending.CUT,
    ended_ms=4020.5,
    first_byte_ms=3.25,
    first_content_ms=812.0,
    content_events=20,
    longest_gap_ms=4010.0,
    gap_after=20,
    timeline=(
        StreamEvent(3.25, "other", "role"),
        *(StreamEvent(800.0 + n, "content", f"w{n}") for n in range(2, 9)),
        *(StreamEvent(800.0 + n, "content", f"w{n}") for n in range(14, 21)),
        StreamEvent(4020.0, "comment", "keep-alive"),
    ),
    events_left_out=5,
)


def _with_stream() -> RunResult:
    """The failing example, its second contract cell's first reply streamed."""
    result = failing()
    contract = result.phases["contract"]
    cell = contract.cells[1]
    prompts = (dataclasses.replace(cell.prompts[0], stream=STREAM), *cell.prompts[1:])
    cells = list(contract.cells)
    cells[1] = dataclasses.replace(cell, prompts=prompts)
    contract = dataclasses.replace(contract, cells=tuple(cells))
    return dataclasses.replace(result, phases={**result.phases, "contract": contract})


def test_a_reply_s_stream_is_read_back_whole_or_streamed_its_timeline_included() -> None:
    text = json_report.render(_with_stream())
    written = json.loads(text)["phases"]["contract"]["cells"][1]["prompts"][0]["stream"]
    assert written["ending"] == "cut" and written["events_left_out"] == 5
    assert written["timeline"][0] == {"at_ms": 3.25, "kind": "other", "text": "role"}
    assert len(written["timeline"]) == 16
    for read in (from_document(json.loads(text)), read_streamed(io.StringIO(text))):
        prompts = read.phases["contract"].cells[1].prompts
        assert prompts[0].stream == STREAM
        assert prompts[1].stream is None  # a reply that was not streamed: null
    old = json.loads(text)
    del old["phases"]["contract"]["cells"][1]["prompts"][0]["stream"]  # before streams
    assert (
        read_streamed(io.StringIO(json.dumps(old))).phases["contract"].cells[1].prompts[0].stream
        is None
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"ending": "lost"}, "cells[1]: ValueError(\"'lost' is not a valid Ending\")"),
        ({"gap_after": "3"}, "cells[1].prompts[0].stream.gap_after: '3' is not an int"),
        (
            {"timeline": [{"at_ms": "soon", "kind": "content"}]},
            "cells[1].prompts[0].stream.timeline[0].at_ms: 'soon' is not a number",
        ),
    ],
)
def test_a_malformed_stream_is_refused_saying_where(edit: dict[str, Any], message: str) -> None:
    document = to_document(_with_stream())
    document["phases"]["contract"]["cells"][1]["prompts"][0]["stream"].update(edit)
    with pytest.raises(ResultsError) as raised:
        read_streamed(io.StringIO(json.dumps(document)))
    assert f"results document is malformed: phases.contract.{message}" in str(raised.value)
