"""Blame under concurrency (SPEC §6): a request-level mutation that brings the agent down also
breaks every request in flight with it; those are judged again one at a time, so exactly the
mutation that brings the agent down fails."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

from support.dying_agent import dying_agent
from support.recording_server import Received, RecordingServer
from support.server import free_port

from flakestorm.config import MutationType
from flakestorm.engine.runner import Overrides, run_phases
from flakestorm.loader import load_config_text
from flakestorm.reporters import comment, html, markdown, terminal
from flakestorm.results.model import RunResult

REQUEST_TYPES = [k.value for k in MutationType if k.request_level]
PROMPT = "What is AAPL trading at?"
OK = (200, b'{"output": "ok"}')
WEIGHTS = {k.value: k.default_weight for k in MutationType}


def run(
    tmp_path: Path,
    agent: dict[str, Any],
    types: list[str],
    count: int,
    concurrency: int = 8,
    **kw: Any,
) -> RunResult:
    doc = {
        "agent": {"timeout": 2500, **agent},
        "golden_prompts": [PROMPT],
        "invariants": [{"type": "output_not_empty"}],
        "mutations": {"types": types, "count": count},
        "advanced": {"concurrency": concurrency},
    }
    loaded = load_config_text(json.dumps(doc), base_dir=tmp_path)
    return run_phases(loaded, ["mutation"], **kw)


NESTED = 'body.startswith(b\'{"a":{"a":\')'
"""The body of ``resource_exhaustion``'s first variant (a JSON nested 5,000 levels deep), as the
agent scripts test it."""


def nested(body: bytes) -> bool:
    """The body of ``resource_exhaustion``'s first variant: JSON nested 5,000 levels deep."""
    return body.startswith(b'{"a":{"a":')


def test_a_crash_at_concurrency_8_fails_exactly_the_mutation_that_caused_it(
    tmp_path: Path,
) -> None:
    """The agent's JSON parser dies on the deeply nested body: every connection open at that
    moment is reset and the agent is unready until its supervisor has restarted it. The first
    crash comes only once the seven other mutations in flight are all waiting for their reply,
    so they are all broken by it."""
    changed = threading.Condition()
    crashed = threading.Event()
    in_flight: list[str] = []  # requests reset by the first crash (not their own doing)
    restarting = [False]

    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.target == "/health":
            with changed:
                if restarting[0]:  # the first check after a crash: still restarting
                    restarting[0] = False
                    return 503, b'{"status": "restarting"}'
            return 200, b'{"status": "ok"}'
        if nested(received.body):
            with changed:
                if not crashed.is_set():  # 6 single requests + 5 copies of the burst
                    changed.wait_for(lambda: len(in_flight) == 11, timeout=10)
                crashed.set()
                restarting[0] = True
            return None
        with changed:
            if crashed.is_set():
                return OK
            in_flight.append(received.target)
            changed.notify_all()
        crashed.wait(10)
        return None  # the agent went down under it

    with RecordingServer(answer) as server:
        agent = {"endpoint": server.url, "health_endpoint": "/health"}
        result = run(tmp_path, agent, REQUEST_TYPES, len(REQUEST_TYPES))
    assert len(in_flight) == 11  # the crash broke seven other mutations (one of them 5 times)
    outcome = result.phases["mutation"]
    verdicts = {m.transform: m for m in outcome.mutations}
    failed = {name for name, m in verdicts.items() if m.status.value != "passed"}
    assert failed == {"deep_nesting"}, [(m.id, m.status, m.reason) for m in outcome.mutations]
    culprit = verdicts["deep_nesting"]
    assert culprit.status.value == "failed" and culprit.error == "connection"
    assert culprit.isolated
    assert "judged on an isolated re-run" in culprit.reason
    # the seven broken in flight were judged on a run of their own; the trickled body,
    # sent after the crash, on its first run
    isolated = {name for name, m in verdicts.items() if m.isolated}
    assert isolated == set(verdicts) - {"trickled_body"}
    for name in isolated - {"deep_nesting"}:
        assert verdicts[name].reason.startswith("held all 1 invariant (judged on an isolated")
    total = sum(WEIGHTS[t] for t in REQUEST_TYPES)
    expected = round(100 * (total - WEIGHTS["resource_exhaustion"]) / total, 2)
    assert outcome.score.score == expected == 88.89
    summary = markdown.render(result)
    assert "8 mutations were judged on an isolated re-run" in summary
    assert "7 passed alone" in summary


AGENT = dying_agent(NESTED, takes_down=5)
"""Dies on ``resource_exhaustion``'s nested body, the first time once the five others are in
flight."""


def test_an_agent_process_that_dies_is_restarted_and_only_the_killer_is_blamed(
    tmp_path: Path,
) -> None:
    """An agent flakestorm started (``agent.start``) exits on the nested body, taking the five
    other mutations in flight (two of them prompt-level) down with it: flakestorm starts it
    again before each of them is sent on its own."""
    (tmp_path / "agent.py").write_text(AGENT)
    port = free_port()
    agent = {
        "endpoint": f"http://127.0.0.1:{port}/invoke",
        "ready_timeout": 20_000,
        "start": {"command": f"{shlex.quote(sys.executable)} agent.py {port}"},
    }
    types = [
        "http_header_injection",
        "content_type_confusion",
        "query_parameter_poisoning",
        "resource_exhaustion",
        "paraphrase",
        "noise",
    ]
    notices: list[str] = []
    result = run(
        tmp_path,
        agent,
        types,
        len(types),
        overrides=Overrides(output_dir=str(tmp_path / "reports")),
        on_notice=notices.append,
    )
    outcome = result.phases["mutation"]
    verdicts = {m.type: m for m in outcome.mutations}
    assert {t for t, m in verdicts.items() if m.status.value != "passed"} == {
        "resource_exhaustion"
    }, [(m.id, m.status, m.reason) for m in outcome.mutations if m.status.value != "passed"]
    assert all(m.isolated for m in outcome.mutations)
    assert verdicts["resource_exhaustion"].error == "connection"
    # started, died under the nested body (twice: once with the others, once alone), restarted
    restarts = [n for n in notices if n.startswith("the agent process exited (code 1)")]
    assert len(restarts) == 2
    log = (tmp_path / "reports" / "agent.log").read_text()
    assert log.count("agent up") == 3 and log.count("agent crashed") == 2
    total = sum(WEIGHTS[t] for t in types)
    assert outcome.score.score == round(100 * (total - WEIGHTS["resource_exhaustion"]) / total, 2)


DIES_ON_NESTED = dying_agent(NESTED)
"""Its JSON parser dies on the nested body, every time."""
ONE_AT_A_TIME = ["http_header_injection", "resource_exhaustion", "paraphrase", "noise"]
"""Sent in this order at concurrency 1: the nested body (``deep_nesting``) second."""


def test_at_concurrency_1_an_agent_process_that_dies_is_restarted_before_the_next_mutation(
    tmp_path: Path,
) -> None:
    """An agent flakestorm started dies under the nested body, alone: that mutation fails, and
    the agent is started again before the next one, so the mutations after it pass."""
    (tmp_path / "agent.py").write_text(DIES_ON_NESTED)
    port = free_port()
    agent = {
        "endpoint": f"http://127.0.0.1:{port}/invoke",
        "ready_timeout": 20_000,
        "start": {"command": f"{shlex.quote(sys.executable)} agent.py {port}"},
    }
    notices: list[str] = []
    result = run(
        tmp_path,
        agent,
        ONE_AT_A_TIME,
        len(ONE_AT_A_TIME),
        concurrency=1,
        overrides=Overrides(output_dir=str(tmp_path / "reports")),
        on_notice=notices.append,
    )
    outcome = result.phases["mutation"]
    verdicts = [(m.type, m.status.value) for m in outcome.mutations]
    assert verdicts == [
        ("http_header_injection", "passed"),
        ("resource_exhaustion", "failed"),
        ("paraphrase", "passed"),
        ("noise", "passed"),
    ], [m.reason for m in outcome.mutations]
    assert not any(m.isolated for m in outcome.mutations)  # it had the agent to itself
    assert outcome.warnings == (
        "The agent stopped answering under mutation resource_exhaustion#0.0: flakestorm brought "
        "it back before the next mutation (an agent it started with agent.start is started "
        "again, its output appended to agent.log), so no mutation after it was sent to a dead "
        "agent.",
    )
    assert outcome.mutations[1].error == "connection"
    restarts = [n for n in notices if n.startswith("the agent process exited (code 1)")]
    assert len(restarts) == 1
    log = (tmp_path / "reports" / "agent.log").read_text()
    assert log.count("agent up") == 2 and log.count("agent crashed") == 1
    assert result.exit_code == 0  # nothing errored (and no critical invariant failed)


def test_an_agent_that_does_not_come_back_errors_the_mutations_left_with_one_reason(
    tmp_path: Path,
) -> None:
    """An agent flakestorm did not start dies for good under the nested body: that mutation
    fails; the ones left are not sent but errored, with one reason naming it (exit 3), and the
    summary says so once."""
    dead = threading.Event()
    after: list[str] = []  # requests that reached the agent after it died

    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.target == "/health":
            return (503, b'{"status": "down"}') if dead.is_set() else (200, b"{}")
        if dead.is_set():
            after.append(received.target)
            return None
        if nested(received.body):
            dead.set()
            return None
        return OK

    with RecordingServer(answer) as server:
        agent = {"endpoint": server.url, "health_endpoint": "/health", "ready_timeout": 300}
        result = run(tmp_path, agent, ONE_AT_A_TIME, len(ONE_AT_A_TIME), concurrency=1)
    outcome = result.phases["mutation"]
    verdicts = [(m.type, m.status.value) for m in outcome.mutations]
    assert verdicts == [
        ("http_header_injection", "passed"),
        ("resource_exhaustion", "failed"),
        ("paraphrase", "errored"),
        ("noise", "errored"),
    ], [m.reason for m in outcome.mutations]
    assert after == []  # nothing was sent to the dead agent
    culprit = outcome.mutations[1].id
    reasons = {m.reason for m in outcome.mutations[2:]}
    assert len(reasons) == 1
    [reason] = reasons
    assert reason.startswith(f"the agent did not come back after mutation {culprit}: ")
    assert "agent.ready_timeout" in reason
    assert result.exit_code == 3
    for report in (markdown.render(result), html.render(result), comment.render_first(result)):
        assert report.count("did not come back") == 1, report
    shown = terminal.render(result)  # with its verdict line
    assert shown.count("did not come back") == 1, shown
    assert "2 mutations errored for one reason, given once in the run's verdict" in shown


PYTHON_AGENT = """\
    import threading

    import {tools}

    together = threading.Barrier(2, timeout=10)
    released = threading.Event()
    first = []


    def answer(prompt):
        quote = {tools}.lookup("AAPL")
        if len(first) < 2:
            first.append(prompt)
            together.wait()  # both mutations in flight at once
            released.wait(30)  # then the agent hangs under both (past agent.timeout)
        return f"quote: {{quote}}"
"""
PYTHON_TOOLS = """\
    def lookup(ticker):
        return {"ticker": ticker, "price": "123.45"}
"""


def test_a_mutation_judged_alone_keeps_the_calls_of_its_run_alone(tmp_path: Path) -> None:
    """The calls kept with a mutation (what ``replay export`` serves) are those of the run its
    verdict came from: of a mutation judged on an isolated re-run, the re-run's."""
    suffix = uuid.uuid4().hex[:10]
    agent_mod, tools_mod = f"blame_agent_{suffix}", f"blame_tools_{suffix}"
    (tmp_path / f"{agent_mod}.py").write_text(textwrap.dedent(PYTHON_AGENT).format(tools=tools_mod))
    (tmp_path / f"{tools_mod}.py").write_text(textwrap.dedent(PYTHON_TOOLS))
    agent = {
        "type": "python",
        "endpoint": f"{agent_mod}:answer",
        "tools": [f"{tools_mod}:lookup"],
        "timeout": 300,
    }
    sys.path.insert(0, str(tmp_path))
    try:
        result = run(tmp_path, agent, ["noise", "paraphrase"], 2)
    finally:
        sys.modules[agent_mod].released.set()
        sys.path.remove(str(tmp_path))
    mutations = result.phases["mutation"].mutations
    assert [(m.status.value, m.isolated) for m in mutations] == [("passed", True)] * 2
    for mutation in mutations:
        assert "timeout" in mutation.reason  # what the first run saw
        assert [(c.tool, c.invocation) for c in mutation.calls] == [("lookup", "0.0")]
