"""The interaction log spools its calls to disk: what it gives back is what was logged, per
scenario and in call order, and its memory does not grow with the calls it holds."""

from __future__ import annotations

import gc
import os
import tracemalloc

import pytest

from flakestorm.chaos.delivery import interactions
from flakestorm.chaos.delivery.interactions import Interaction, InteractionLog
from flakestorm.chaos.faults.decisions import Target
from flakestorm.results.usage import Usage


def call(seq: int, scenario: str = "s", cell: str = "c0", body: str = "") -> Interaction:
    return Interaction(
        seq=seq,
        scenario=scenario,
        cell_id=cell,
        target=Target.TOOL,
        tool="weather",
        method="GET",
        url=f"/tools/weather/v1?n={seq}",
        call_index=seq,
        matched=("tool_faults[0] error(503) on weather",),
        fired=(),
        status=200,
        request=body or None,
        response=body or None,
    )


def test_a_scenarios_calls_come_back_whole_and_in_call_order() -> None:
    log = InteractionLog()
    rich = Interaction(
        seq=1,
        scenario="outage",
        cell_id="outage#3",
        target=Target.LLM,
        tool=None,
        method="POST",
        url="/llm/openai/v1/chat/completions",
        call_index=0,
        matched=("llm_faults[0] rate_limit",),
        fired=("llm_faults[0] rate_limit",),
        status=429,
        upstream_status=None,
        upstream_error="timed out",
        latency_ms=12.5,
        request='{"q": "caf\u00e9 \u2603 \ud800"}',  # a lone surrogate a python value carried
        response="line one\nline two",
        unapplied=(("tool_faults[1] truncate", "a stream"),),
        replaced=(("context_attacks[0] indirect_injection", "tool_faults[0] error(503)"),),
        unscheduled=("tool_faults[2] timeout",),
        attribution="header",
        started_ms=1234.75,
        retry_after_s=2.0,
        idempotency_key="key-1",
        fingerprint="ab12",
        usage=Usage(input=10, output=3, model="gpt-4o"),
    )
    log.open()
    log.open()
    log.close(call(2, "outage"))  # answered before the call that began first
    log.append(call(0, "calm"))
    log.close(rich)
    log.append(call(3, "calm", "calm#1"))

    assert log.snapshot("outage") == [rich, call(2, "outage")]
    assert log.snapshot("calm") == [call(0, "calm"), call(3, "calm", "calm#1")]
    assert [i.seq for i in log.snapshot()] == [0, 1, 2, 3]
    assert log.snapshot("never") == []


def test_forget_drops_a_scenarios_calls_but_the_cells_kept_and_gives_their_room_back() -> None:
    log = InteractionLog(limit=4)
    for seq, (scenario, cell) in enumerate(
        [("a", "a#0"), ("b", "b#0"), ("a", "a#1"), ("a", "a#0")]
    ):
        log.append(call(seq, scenario, cell))
    log.append(call(4, "b"))  # the log is full
    assert log.dropped == 1

    assert log.forget("a", keep=["a#1"]) == 2
    assert log.snapshot("a") == [call(2, "a", "a#1")]
    assert log.snapshot("b") == [call(1, "b", "b#0")]
    assert log.forget("a") == 1 and log.snapshot("a") == []
    assert log.forget("a") == 0

    for seq in range(5, 8):  # the room of the three forgotten calls
        log.append(call(seq, "c"))
    assert log.dropped == 1 and [i.seq for i in log.snapshot()] == [1, 5, 6, 7]


def test_a_forgotten_scenarios_bodies_give_their_room_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interactions, "RUN_BODY_CHARS", 20)
    log = InteractionLog()
    log.append(call(0, "a", body="12345"))  # 10 characters: request and response
    log.append(call(1, "a", body="12345"))  # 20
    log.append(call(2, "b", body="12345"))  # would be 30: logged without its bodies
    assert log.bodies_dropped == 1
    assert log.snapshot("b")[0].request is None and log.snapshot("b")[0].response is None
    log.forget("a")
    log.append(call(3, "b", body="12345"))
    assert log.bodies_dropped == 1 and log.snapshot("b")[1].response == "12345"


def test_the_file_is_rewritten_without_forgotten_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interactions, "COMPACT_BYTES", 1000)
    log = InteractionLog()
    log.append(call(0, "calm", "pre"))  # kept through the run, as the runner keeps its calls
    seq = 1
    for round_no in range(30):
        scenario = f"s{round_no}"
        for _ in range(20):
            log.append(call(seq, scenario, body="x" * 100))
            seq += 1
        assert [i.seq for i in log.snapshot(scenario)] == list(range(seq - 20, seq))
        log.forget(scenario)
        log.forget("calm", keep=["pre"])
    assert log.snapshot() == [call(0, "calm", "pre")]
    spool_file = log._spool._file  # the disk bound: about one scenario's lines, not thirty
    assert spool_file is not None
    assert os.fstat(spool_file.fileno()).st_size < 20 * 700


def test_clear_empties_the_log() -> None:
    log = InteractionLog(limit=1)
    log.append(call(0))
    log.append(call(1))
    log.clear()
    assert log.snapshot() == [] and log.dropped == 0
    log.append(call(2))
    assert log.snapshot() == [call(2)]


def _log_memory(log: InteractionLog, calls: range, scenario: str) -> int:
    """The bytes python holds (traced) after logging ``calls``, each with 1,000 characters of
    bodies."""
    for seq in calls:
        log.append(call(seq, scenario, f"{scenario}#{seq % 50}", body="b" * 500))
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_the_logs_memory_does_not_grow_with_the_calls_it_holds() -> None:
    log = InteractionLog()
    tracemalloc.start()
    try:
        first = _log_memory(log, range(1_000), "long")
        later = _log_memory(log, range(1_000, 6_000), "long")
    finally:
        tracemalloc.stop()
    # 5,000 more calls held, with 5 MB of bodies (and their records, as much again, in memory
    # before the log spooled them): at most 32 bytes each of index, so 160,000 bytes
    assert later - first < 160_000
    assert len(log.snapshot("long")) == 6_000


def test_a_runs_log_memory_is_flat_as_scenarios_are_read_and_forgotten() -> None:
    log = InteractionLog()
    tracemalloc.start()
    try:
        sizes = []
        for round_no in range(8):
            scenario = f"s{round_no}"
            sizes.append(_log_memory(log, range(round_no * 1000, (round_no + 1) * 1000), scenario))
            assert len(log.snapshot(scenario)) == 1000
            log.forget(scenario)
    finally:
        tracemalloc.stop()
    assert max(sizes[2:]) - sizes[2] < 32_000  # six scenarios later, nothing held for them
