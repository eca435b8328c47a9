"""A python agent that calls a downstream A2A agent (SPEC §17): with a plain HTTP client
(``requests``, JSON-RPC by hand) and with the official ``a2a-sdk`` client, unmodified — both
routed through the in-process proxy like the agent's other HTTP calls (the card fetched at
the agent's own URL, and the calls then made where the card points: back through the proxy,
attributed to their cell). The run is the engine's, in process; the verdicts by hand."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.a2a_booking import BookingAgent

from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config

PLAIN = """
import uuid

import requests

URL = {url!r}


def answer(prompt):
    card = requests.get(URL + "/.well-known/agent-card.json", timeout=10).json()
    endpoint = card["supportedInterfaces"][0]["url"]
    message = {{"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
               "parts": [{{"text": "Book a table"}}]}}
    doc = {{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {{"message": message}}}}
    reply = requests.post(endpoint, json=doc, headers={{"A2A-Version": "1.0"}}, timeout=10)
    state = reply.json()["result"]["task"]["status"]["state"]
    if state == "TASK_STATE_COMPLETED":
        return "Booked! Your table is confirmed."
    return "I could not book the table: " + state
"""

SDK = """
import uuid

from a2a.client import create_client
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

URL = {url!r}


async def answer(prompt):
    client = await create_client(URL)
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                      parts=[Part(text="Book a table")])
    state = None
    async for event in client.send_message(SendMessageRequest(message=message)):
        if event.HasField("task"):
            state = event.task.status.state
    await client.close()
    if state == TaskState.TASK_STATE_COMPLETED:
        return "Booked! Your table is confirmed."
    return "I could not book the table: " + TaskState.Name(state)
"""


@pytest.fixture
def booking() -> Iterator[BookingAgent]:
    with BookingAgent() as agent:
        yield agent


@pytest.mark.parametrize("client", ["plain", "sdk"])
def test_a_python_caller_s_a2a_calls_are_routed_and_faulted(
    tmp_path: Path, booking: BookingAgent, client: str
) -> None:
    module = f"a2a_caller_{uuid.uuid4().hex[:10]}"
    source = (PLAIN if client == "plain" else SDK).format(url=booking.url)
    (tmp_path / f"{module}.py").write_text(source)
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer", "timeout": 20_000},
        "golden_prompts": ["Book a table for two tonight"],
        "contract": {
            "name": "Booking",
            "invariants": [
                {"id": "booked", "type": "contains", "value": "Booked!"},
                {"id": "once", "type": "max_calls", "target": "booking", "max": 1},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {
                    "name": "failed",
                    "tool_faults": [{"tool": "booking", "mode": "task_state", "state": "FAILED"}],
                },
            ],
        },
        "proxy": {"a2a": {"booking": booking.url}},
        "output": {"dir": str(tmp_path / "reports")},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    cells = {c.id: c for c in result.phases["contract"].cells}
    assert {k: c.status.value for k, c in cells.items()} == {
        "booked[calm]": "passed",
        "booked[failed]": "failed",  # it said what the booking agent said: FAILED
        "once[calm]": "passed",
        "once[failed]": "passed",
    }
    assert cells["booked[failed]"].prompts[0].output == (
        "I could not book the table: TASK_STATE_FAILED"
    )
    # each cell's one call of the agent, attributed to it, and what it was told; its card
    # fetch is in the cell too, as other traffic, not a call of the agent
    calls = {name: cells[f"once[{name}]"].calls for name in ("calm", "failed")}
    assert [(c.target, c.detail) for c in calls["failed"]] == [
        ("other", ""),
        ("tool", "SendMessage -> TASK_STATE_FAILED"),
    ]
    assert [(c.target, c.detail) for c in calls["calm"]] == [
        ("other", ""),
        ("tool", "SendMessage -> TASK_STATE_COMPLETED"),
    ]
    # the agent booked at every invocation: one per cell, and the 2 the run sends first to
    # learn whether the agent keeps state between invocations (validate counts 6)
    assert sum(booking.created.values()) == 6
