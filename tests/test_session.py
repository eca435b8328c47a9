"""`agent.session` (SPEC §9): each cell its own conversation, so cells are isolated without a
reset, run concurrently, and the stateful-agent check does not apply.

The agent is a loopback HTTP server that remembers the previous question per conversation
(the session id it is sent), like the example agent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.server import LoopbackServer, Request, Response

from flakestorm.agents.http import render_template
from flakestorm.agents.session import session_id
from flakestorm.engine.phases.matrix import STATEFUL_WARNING
from flakestorm.engine.runner import Overrides, run_phases
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config, load_config_text


class Memory:
    """Remembers the last question of each conversation; notes when two requests overlap."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[str, str] = {}
        self.sessions: list[str] = []
        self.in_flight = 0
        self.overlapped = threading.Event()
        self.wait_for_company = False
        """Set by the test of concurrency: a request then waits (bounded) for another."""
        self.server = LoopbackServer(self.handle)

    def handle(self, request: Request) -> Response:
        body = request.json()
        session = request.headers.get("X-Session-Id") or body.get("session") or ""
        with self.lock:
            self.in_flight += 1
            if self.in_flight > 1:
                self.overlapped.set()
            previous = self.last.get(session)
            self.last[session] = body["input"]
            self.sessions.append(session)
        if self.wait_for_company:  # the first request waits (bounded) for a second one
            self.overlapped.wait(timeout=5)
        with self.lock:
            self.in_flight -= 1
        said = f"you asked {body['input']}"
        return Response.json({"output": said + (f" after {previous}" if previous else "")})


@pytest.fixture
def memory() -> Iterator[Memory]:
    agent = Memory()
    with agent.server:
        yield agent


def config(tmp_path: Path, agent: Memory, **session: Any) -> Path:
    doc: dict[str, Any] = {
        "agent": {"endpoint": agent.server.url_for("/chat"), **session},
        "golden_prompts": ["one", "two"],
        "contract": {
            "name": "c",
            "invariants": [
                {"id": "fresh", "type": "excludes_pattern", "patterns": ["after"]},
                {"id": "answers", "type": "output_not_empty"},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {
                    "name": "poisoned",
                    "context_attacks": [{"type": "memory_poisoning", "payload": "psst"}],
                },
            ],
        },
        "advanced": {"concurrency": 4, "seed": 11},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    return path


def test_without_a_session_the_cells_share_one_conversation(tmp_path: Path, memory: Memory) -> None:
    result = run_phases(load_config(config(tmp_path, memory)), ["contract"])
    contract = result.phases["contract"]
    assert STATEFUL_WARNING in contract.warnings
    assert any(c.status.value == "failed" for c in contract.cells if c.invariant_id == "fresh")


def test_a_session_header_isolates_each_cell_and_cells_run_concurrently(
    tmp_path: Path, memory: Memory
) -> None:
    path = config(tmp_path, memory, session={"header": "X-Session-Id"})
    memory.wait_for_company = True
    result = run_phases(load_config(path), ["contract"])
    contract = result.phases["contract"]
    # every cell is its own conversation: its second prompt follows only its own first
    fresh = [c for c in contract.cells if c.invariant_id == "fresh"]
    assert [c.status.value for c in fresh] == ["failed", "failed"]
    assert all("after" in c.prompts[1].output for c in fresh)  # type: ignore[operator]
    assert all("after" not in c.prompts[0].output for c in fresh)  # type: ignore[operator]
    assert STATEFUL_WARNING not in contract.warnings
    assert result.invocations == 8  # no stateful check
    assert memory.overlapped.is_set()  # invocations were in flight together
    cells = [c.id for c in contract.cells]
    assert set(memory.sessions) == {session_id(11, f"{cell}#0") for cell in cells}
    # the same seed repeats the ids; another seed does not
    before = list(memory.sessions)
    memory.sessions.clear()
    run_phases(load_config(path), ["contract"])
    assert sorted(memory.sessions) == sorted(before)
    memory.sessions.clear()
    run_phases(load_config(path), ["contract"], Overrides(seed=12))
    assert not set(memory.sessions) & set(before)


def test_a_session_template_fills_the_request_body(tmp_path: Path, memory: Memory) -> None:
    path = config(
        tmp_path,
        memory,
        session={"template": True},
        request_template={"input": "{prompt}", "session": "{session_id}"},
    )
    result = run_phases(load_config(path), ["contract"], Overrides(concurrency=1))
    assert all(
        c.status.value == "passed"
        for c in result.phases["contract"].cells
        if c.invariant_id == "answers"
    )
    bodies = [r.json() for r in memory.server.requests]
    assert {b["session"] for b in bodies} == {
        session_id(11, f"{c.id}#0") for c in result.phases["contract"].cells
    }
    assert render_template('{"q": "{prompt}", "s": "{session_id}"}', 'a"b', session_id="abc") == (
        b'{"q": "a\\"b", "s": "abc"}'
    )


def test_repeats_of_a_cell_are_separate_conversations(tmp_path: Path, memory: Memory) -> None:
    path = config(tmp_path, memory, session={"header": "X-Session-Id"})
    doc = json.loads(path.read_text())
    doc["advanced"]["repeat"] = 2
    path.write_text(json.dumps(doc))
    run_phases(load_config(path), ["contract"])
    assert len(set(memory.sessions)) == 8  # 4 cells x 2 repeats


BASE = """
agent:
  endpoint: http://127.0.0.1:9/chat
  {extra}
golden_prompts: [hi]
contract:
  name: c
  invariants: [{{id: a, type: output_not_empty}}]
  chaos_matrix: [{{name: calm}}]
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("session: {}", "agent.session: give exactly one of `header: NAME`"),
        ("session: {header: X-S, template: true}", "agent.session: give exactly one of"),
        ("session: {header: 'X S'}", "agent.session.header: 'X S' is not an HTTP header name"),
        ("session: {template: true}", "request_template does not contain {session_id}"),
    ],
)
def test_a_session_written_wrongly_is_a_located_config_error(extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text(BASE.format(extra=extra))
    assert message in str(caught.value)
    assert "flakestorm.yaml:4:" in str(caught.value)


def test_a_reset_beside_a_session_is_not_called_and_says_so() -> None:
    loaded = load_config_text(BASE.format(extra="session: {header: X-S}\n  reset_endpoint: /reset"))
    (warning,) = loaded.warnings
    assert warning.path == "agent.reset_endpoint"
    assert "is not called" in warning.message


def test_a_python_agent_has_no_session() -> None:
    text = BASE.replace("endpoint: http://127.0.0.1:9/chat", "type: python\n  endpoint: m:f")
    with pytest.raises(ConfigError) as caught:
        load_config_text(text.format(extra="session: {header: X-S}"))
    assert "'session' applies to http agents only" in str(caught.value)


def test_each_mutation_is_its_own_conversation(tmp_path: Path, memory: Memory) -> None:
    path = config(tmp_path, memory, session={"header": "X-Session-Id"})
    doc = json.loads(path.read_text())
    doc["mutations"] = {"count": 2, "types": ["paraphrase", "noise"]}
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["mutation"])
    mutations = result.phases["mutation"].mutations
    assert len(mutations) == 4
    assert sorted(memory.sessions) == sorted(
        session_id(11, f"mutation:{m.id}#0") for m in mutations
    )
    assert all("after" not in (m.output or "") for m in mutations)  # none saw another's turn
