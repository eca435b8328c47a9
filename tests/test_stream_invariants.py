"""The invariants on a streamed reply (SPEC §16): ``ttft``, ``max_stall``, ``stream_completes``,
judged on the figures of ``Reply.stream``; each reason names its figure. The figures are
written out by hand here, as an agent's stream reader would measure them."""

from __future__ import annotations

from typing import Any

import pytest

from flakestorm.agents import Reply
from flakestorm.checks.invariants import Checker, Observation
from flakestorm.checks.similarity import LexicalSimilarity
from flakestorm.config import Invariant
from flakestorm.errors import AgentErrorKind
from flakestorm.results.stream_timing import Ending, StreamTiming

checker = Checker(LexicalSimilarity())


def timing(**fields: Any) -> StreamTiming:
    base: dict[str, Any] = {
        "terminal": "[DONE]",
        "ending": Ending.DONE,
        "ended_ms": 900.0,
        "first_byte_ms": 3.0,
        "first_content_ms": 812.0,
        "content_events": 5,
        "longest_gap_ms": 20.0,
        "gap_after": 2,
    }
    return StreamTiming(**{**base, **fields})


def verdict(type_: str, stream: StreamTiming | None, negate: bool = False, **fields: Any) -> Any:
    inv = Invariant.model_validate({"type": type_, "negate": negate, **fields})
    reply = Reply("The capital of France is Paris.", 900.0, status=200, stream=stream)
    found = checker.check(inv, Observation("p", reply))
    return found.passed, found.reason


CASES = [
    (
        "ttft",
        {"max_ms": 500},
        timing(),
        False,
        "first content after 812 ms (first byte at 3 ms) > 500 ms",
    ),
    (
        "ttft",
        {"max_ms": 1000},
        timing(),
        True,
        "first content after 812 ms (first byte at 3 ms) ≤ 1000 ms",
    ),
    (
        "ttft",
        {"max_ms": 1000},
        timing(first_content_ms=None, content_events=0, ended_ms=1203.0),
        False,
        "no content in 1.20 s (first byte at 3 ms)",
    ),
    (
        "max_stall",
        {"max_ms": 1000},
        timing(longest_gap_ms=4010.0, gap_after=3),
        False,
        "silent for 4.01 s after chunk 3 > 1000 ms",
    ),
    (
        "max_stall",
        {"max_ms": 1000},
        timing(longest_gap_ms=4010.0, gap_after=5, ending=Ending.CLOSED),
        False,
        "silent for 4.01 s after chunk 5 (the last) > 1000 ms",
    ),
    (
        "max_stall",
        {"max_ms": 100},
        timing(),
        True,
        "longest silence 20 ms after chunk 2 ≤ 100 ms",
    ),
    (
        "max_stall",
        {"max_ms": 100},
        timing(first_content_ms=None, content_events=0, longest_gap_ms=900.0, gap_after=0),
        False,
        "no content at all: silent for 900 ms",
    ),
    ("stream_completes", {}, timing(), True, "ended with [DONE] after 5 content events"),
    (
        "stream_completes",
        {},
        timing(ending=Ending.CLOSED, content_events=3),
        False,
        "closed after 3 content events without [DONE]",
    ),
    (
        "stream_completes",
        {},
        timing(ending=Ending.CUT, content_events=1, terminal="message_stop"),
        False,
        "cut (the connection broke) after 1 content event without message_stop",
    ),
]


@pytest.mark.parametrize(("type_", "fields", "stream", "passes", "reason"), CASES)
def test_verdict_and_reason_name_the_figure(
    type_: str, fields: dict[str, Any], stream: StreamTiming, passes: bool, reason: str
) -> None:
    assert verdict(type_, stream, **fields) == (passes, reason)


@pytest.mark.parametrize(("type_", "fields", "stream", "passes", "reason"), CASES)
def test_negate_inverts(
    type_: str, fields: dict[str, Any], stream: StreamTiming, passes: bool, reason: str
) -> None:
    passed, negated = verdict(type_, stream, negate=True, **fields)
    assert passed is not passes and negated.startswith(f"negated: {reason} (")


@pytest.mark.parametrize("type_", ["ttft", "max_stall", "stream_completes"])
def test_a_reply_that_was_not_streamed_never_passes(type_: str) -> None:
    fields = {} if type_ == "stream_completes" else {"max_ms": 100}
    for negate in (False, True):
        assert verdict(type_, None, negate=negate, **fields) == (
            False,
            "cannot check: the reply was not streamed (an http agent needs agent.stream; a "
            "python agent, an endpoint that yields its text)",
        )


def test_a_timed_out_stream_fails_and_still_names_its_figure() -> None:
    stream = timing(ending=Ending.TIMEOUT, content_events=3, longest_gap_ms=9950.0, gap_after=3)
    reply = Reply(
        None,
        10_000.0,
        status=200,
        error=AgentErrorKind.TIMEOUT,
        error_message="no complete reply within 10000 ms (agent.timeout)",
        stream=stream,
    )
    inv = Invariant.model_validate({"type": "max_stall", "max_ms": 1000})
    found = checker.check(inv, Observation("p", reply))
    assert not found.passed
    assert found.reason == (
        "the agent did not answer: timeout: no complete reply within 10000 ms (agent.timeout); "
        "silent for 9.95 s after chunk 3 (the last) > 1000 ms"
    )
