"""A downstream A2A agent's calls in the reports (SPEC §17): each call says what it asked and
what it was told; the state is the downstream agent's text, escaped in every format."""

from __future__ import annotations

import dataclasses

from golden.cases import failing

from flakestorm.reporters import html, junit, markdown
from flakestorm.results.model import RunResult
from flakestorm.results.scenarios import CallRecord

HOSTILE = "SendMessage -> </td><script>x</script>|`s` @team"


def _with_calls(*calls: CallRecord) -> RunResult:
    result = failing()
    contract = result.phases["contract"]
    cells = list(contract.cells)
    cells[1] = dataclasses.replace(cells[1], calls=calls)
    phase = dataclasses.replace(contract, cells=tuple(cells))
    return dataclasses.replace(result, phases={**result.phases, "contract": phase})


def call(detail: str, status: int | None = 200) -> CallRecord:
    return CallRecord("tool", "booking", "POST", "http://booking:9000/", status, detail=detail)


def test_each_a2a_call_says_what_it_asked_and_was_told() -> None:
    result = _with_calls(
        call("SendMessage -> TASK_STATE_WORKING"),
        call("GetTask -> TASK_STATE_WORKING"),
        call("SendMessage -> no reply", status=None),
    )
    summary = markdown.render(result)
    assert "| 1 | tool booking (SendMessage -&gt; TASK\\_STATE\\_WORKING) POST" in summary
    assert "| 3 | tool booking (SendMessage -&gt; no reply) POST" in summary
    assert "<td>tool booking (GetTask -&gt; TASK_STATE_WORKING)</td>" in html.render(result)
    assert "2. tool booking (GetTask -&gt; TASK_STATE_WORKING) POST" in junit.render(result)


def test_a_state_the_downstream_agent_made_up_is_escaped() -> None:
    result = _with_calls(call(HOSTILE))
    summary = markdown.render(result)
    row = next(line for line in summary.splitlines() if line.startswith("| 1 | tool booking"))
    assert "<" not in row and "\\|" in row and "\\`s\\`" in row and "@\u200dteam" in row
    page = html.render(result)
    assert "<script>x" not in page and "&lt;/td&gt;&lt;script&gt;x" in page
