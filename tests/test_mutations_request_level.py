"""The nine request-level mutation types, observed at a real loopback server that records what
arrived on the wire, and their verdict rule (SPEC §6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.recording_server import Received, RecordingServer

from flakestorm.config import MutationType
from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config_text
from flakestorm.results.model import RunResult

REQUEST_TYPES = [k.value for k in MutationType if k.request_level]
PROMPT = "What is AAPL trading at?"


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    with RecordingServer() as s:
        yield s


def run(tmp_path: Path, url: str, types: list[str], count: int, **extra: Any) -> RunResult:
    doc = {
        "agent": {"endpoint": url, "timeout": 2500},
        "golden_prompts": [PROMPT],
        "invariants": [{"type": "output_not_empty"}],
        "mutations": {"types": types, "count": count},
        "advanced": {"concurrency": 4},
        **extra,
    }
    loaded = load_config_text(json.dumps(doc), base_dir=tmp_path)
    return run_phases(loaded, ["mutation"])


def test_each_request_level_type_reaches_the_server_as_described(
    tmp_path: Path, server: RecordingServer
) -> None:
    result = run(tmp_path, server.url, REQUEST_TYPES, len(REQUEST_TYPES))
    outcome = result.phases["mutation"]
    assert [m.transform for m in outcome.mutations] == [
        "crlf_attempt",
        "pad_1_mib",
        "text_plain",
        "debug_flags",
        "method_get",
        "http_1_0",
        "deep_nesting",
        "burst_5",
        "trickled_body",
    ]
    assert all(m.status.value == "passed" for m in outcome.mutations), [
        (m.id, m.reason) for m in outcome.mutations
    ]
    got = server.received
    # header injection: the CR/LF attempt arrives as literal text, never as a new header
    [crlf] = [r for r in got if r.header("x-note")]
    assert crlf.header("x-note") == ["a\\r\\nX-Admin: true"]
    assert crlf.header("x-admin") == []
    # payload size: MiBs of padding in the prompt field
    [big] = [r for r in got if len(r.body) > 1024 * 1024]
    assert len(big.json()["input"]) == len(PROMPT) + 1024 * 1024  # type: ignore[index]
    # content type: the same JSON body under text/plain
    [plain] = [r for r in got if r.content_type == "text/plain"]
    assert plain.json() == {"input": PROMPT}
    # query parameters
    [query] = [r for r in got if "?" in r.target]
    assert query.target == "/invoke?debug=true&admin=1&role=admin"
    # another method, with the same body
    [get] = [r for r in got if r.method == "GET"]
    assert get.json() == {"input": PROMPT}
    # protocol: HTTP/1.0 without a Host header
    [old] = [r for r in got if r.version == "HTTP/1.0"]
    assert old.header("host") == []
    # resource exhaustion: the body nested 5,000 objects deep
    [deep] = [r for r in got if r.body.startswith(b'{"a":{"a":')]
    assert deep.body.count(b'{"a":') == 5000
    assert deep.body.endswith(b"}" * 5000)
    # concurrency: five identical requests
    bodies = [r.body for r in got if r.version == "HTTP/1.1" and r.method == "POST"]
    assert max(bodies.count(b) for b in set(bodies)) >= 5 + 1  # five copies (+ the trickle)
    # timing: the trickled body arrived in many reads, spread over 40 % of agent.timeout
    trickled = max(got, key=lambda r: len(r.reads))
    assert len(trickled.reads) >= 20
    assert trickled.body_span_s >= 0.6
    assert trickled.json() == {"input": PROMPT}
    # the report names the request changes
    changes = {m.transform: m.changes for m in outcome.mutations}
    assert changes["burst_5"] == ("5 identical requests at once",)
    assert changes["method_get"] == ("method GET",)
    assert outcome.score.score == 100.0


def test_the_protocol_oddities_arrive_as_described(tmp_path: Path, server: RecordingServer) -> None:
    result = run(tmp_path, server.url, ["protocol_level_attack"], 4)
    transforms = [m.transform for m in result.phases["mutation"].mutations]
    assert transforms == ["http_1_0", "chunked_body", "expect_100_continue", "split_slow_writes"]
    assert result.phases["mutation"].score.score == 100.0
    got = server.received
    [chunked] = [r for r in got if r.chunked]
    assert chunked.chunks == 7 and chunked.json() == {"input": PROMPT}
    [continued] = [r for r in got if r.continued]
    assert continued.json() == {"input": PROMPT}
    split = [r for r in got if not r.chunked and not r.continued and r.version == "HTTP/1.1"]
    [slow] = split
    assert len(slow.reads) >= 3
    assert slow.body_span_s >= 0.3


def test_a_crash_fails_exactly_that_mutation_and_a_clean_rejection_passes(
    tmp_path: Path,
) -> None:
    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.body.startswith(b'{"a":{"a":'):
            return None  # the JSON parser blew up: connection reset
        if len(received.body) > 1024 * 1024:
            return 413, b'{"error": "too large"}'
        if received.method == "GET":
            return 500, b'{"error": "boom"}'
        return 200, b'{"output": "ok"}'

    with RecordingServer(answer) as server:
        result = run(tmp_path, server.url, REQUEST_TYPES, len(REQUEST_TYPES))
    outcome = result.phases["mutation"]
    verdicts = {m.transform: (m.status.value, m.reason) for m in outcome.mutations}
    failed = {name for name, (status, _) in verdicts.items() if status != "passed"}
    assert failed == {"deep_nesting", "method_get"}
    assert "connection" in verdicts["deep_nesting"][1]
    assert verdicts["method_get"][1].startswith("HTTP 500")
    assert verdicts["pad_1_mib"] == ("passed", "rejected cleanly: HTTP 413")
    weights = {k.value: k.default_weight for k in MutationType}
    total = sum(weights[t] for t in REQUEST_TYPES)
    lost = weights["resource_exhaustion"] + weights["request_method_attack"]
    assert outcome.score.score == round(100 * (total - lost) / total, 2) == 79.26
    assert result.exit_code == 0  # failures, not errors, and no min_score


def test_an_agent_down_after_a_mutation_fails_its_readiness_check(tmp_path: Path) -> None:
    state = {"up": True}
    server = RecordingServer()

    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.method != "POST" and state["up"]:
            state["up"] = False
            server.close()  # the agent process died handling it
        return 200, b'{"output": "ok"}'

    server.answer = answer
    try:
        result = run(
            tmp_path,
            server.url,
            ["request_method_attack"],
            1,
            advanced={"concurrency": 1},
        )
    finally:
        server.close()
    [mutation] = result.phases["mutation"].mutations
    assert mutation.status.value == "failed"
    assert "readiness check right after" in mutation.reason


def test_one_failing_copy_of_a_burst_fails_the_mutation(tmp_path: Path) -> None:
    import threading

    lock = threading.Lock()
    seen = {"n": 0}

    def answer(received: Received) -> tuple[int, bytes] | None:
        with lock:
            seen["n"] += 1
            third = seen["n"] == 3
        return (500, b'{"error": "overloaded"}') if third else (200, b'{"output": "ok"}')

    with RecordingServer(answer) as server:
        result = run(tmp_path, server.url, ["concurrent_request_pattern"], 1)
        assert len(server.received) == 5
    [burst] = result.phases["mutation"].mutations
    assert burst.transform == "burst_5" and burst.status.value == "failed"
    assert burst.reason.startswith("HTTP 500: 1 of 5 concurrent copies: ")


def test_a_hang_past_the_agent_timeout_fails_the_mutation(tmp_path: Path) -> None:
    import threading

    released = threading.Event()

    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.version == "HTTP/1.0":
            released.wait(30)  # hangs until the test ends
        return 200, b'{"output": "ok"}'

    with RecordingServer(answer) as server:
        try:
            result = run(tmp_path, server.url, ["protocol_level_attack"], 2)
        finally:
            released.set()
    verdicts = {m.transform: (m.status.value, m.error) for m in result.phases["mutation"].mutations}
    assert verdicts == {"http_1_0": ("failed", "timeout"), "chunked_body": ("passed", None)}


def test_a_request_that_breaks_the_agent_fails_its_critical_invariants(tmp_path: Path) -> None:
    """A 5xx, a reset or a hang is no answer: like a prompt the agent did not answer, it fails
    every invariant checked, so a critical one fails the gate (it used to fail the mutation
    with no invariant, and an agent killed by a GET passed)."""
    state = {"up": True}
    server = RecordingServer()

    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.method == "GET":
            return 500, b'{"error": "boom"}'
        if received.method == "PUT" and state["up"]:
            state["up"] = False
            server.close()  # the agent process died handling it
        return 200, b'{"output": "ok"}'

    server.answer = answer
    invariants = [
        {"id": "answers", "type": "output_not_empty", "severity": "critical"},
        {"id": "polite", "type": "excludes_pattern", "patterns": ["PWNED"]},
    ]
    try:
        result = run(
            tmp_path,
            server.url,
            ["request_method_attack"],
            2,
            invariants=invariants,
            advanced={"concurrency": 1},
            # the agent never comes back: no need to wait the default 2 minutes to know it
            agent={"endpoint": server.url, "timeout": 2500, "ready_timeout": 2000},
        )
    finally:
        server.close()
    outcome = result.phases["mutation"]
    verdicts = {m.transform: m for m in outcome.mutations}
    assert set(verdicts) == {"method_get", "method_put"}
    for broken in verdicts.values():
        assert broken.status.value == "failed"
        assert broken.failed_invariants == ("answers", "polite"), broken
        assert broken.severity == "critical"
    assert verdicts["method_get"].reason.startswith("HTTP 500")
    assert "readiness check right after" in verdicts["method_put"].reason
    assert outcome.score.critical_failures == (
        "request_method_attack#0.0",
        "request_method_attack#0.1",
    )
    assert result.exit_code == 1
