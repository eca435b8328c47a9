"""A2A as the proxy reads and answers it (SPEC §17): calls of both protocol versions and both
bindings, a task given a state in each version's shape, the card pointed through the proxy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flakestorm.chaos.a2a.protocol import (
    read_call,
    rewritten_card,
    task_of,
    task_with_state,
    with_state,
)
from flakestorm.config import A2aMethod, A2aTaskState


def rpc(method: str, params: dict[str, Any], rpc_id: Any = 7) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}).encode()


MESSAGE = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Book a table"}]}


@pytest.mark.parametrize(
    ("method", "params", "expected", "version", "task"),
    [
        ("SendMessage", {"message": MESSAGE}, A2aMethod.SEND_MESSAGE, "1.0", None),
        ("message/send", {"message": MESSAGE}, A2aMethod.SEND_MESSAGE, "0.3", None),
        ("SendStreamingMessage", {}, A2aMethod.SEND_STREAMING_MESSAGE, "1.0", None),
        ("GetTask", {"id": "t-9"}, A2aMethod.GET_TASK, "1.0", "t-9"),
        ("GetTask", {"name": "tasks/t-9"}, A2aMethod.GET_TASK, "1.0", "t-9"),
        ("tasks/get", {"id": "t-9"}, A2aMethod.GET_TASK, "0.3", "t-9"),
        ("tasks/cancel", {"id": "t-9"}, A2aMethod.CANCEL_TASK, "0.3", "t-9"),
        ("tasks/resubscribe", {"id": "t-9"}, A2aMethod.SUBSCRIBE_TO_TASK, "0.3", "t-9"),
    ],
)  # fmt: skip
def test_a_json_rpc_call_of_either_version_is_read(
    method: str, params: dict[str, Any], expected: A2aMethod, version: str, task: str | None
) -> None:
    call = read_call("POST", "/", rpc(method, params))
    assert call is not None
    assert (call.method, call.version, call.rpc_id, call.task_id) == (expected, version, 7, task)


@pytest.mark.parametrize(
    ("verb", "path", "expected", "task"),
    [
        ("POST", "/message:send", A2aMethod.SEND_MESSAGE, None),
        ("GET", "/v1/tasks/t-3", A2aMethod.GET_TASK, "t-3"),
        ("POST", "/tasks/t-3:cancel", A2aMethod.CANCEL_TASK, "t-3"),
        ("GET", "/tasks/t-3:subscribe", A2aMethod.SUBSCRIBE_TO_TASK, "t-3"),
    ],
)
def test_an_http_json_call_is_read_by_its_path(
    verb: str, path: str, expected: A2aMethod, task: str | None
) -> None:
    call = read_call(
        verb, path, json.dumps({"message": MESSAGE}).encode() if verb == "POST" else b""
    )
    assert call is not None and not call.jsonrpc
    assert (call.method, call.task_id) == (expected, task)


def test_anything_else_is_not_a_call() -> None:
    assert read_call("POST", "/", rpc("ListTasks", {})) is None
    assert read_call("POST", "/", b"not json") is None
    assert read_call("GET", "/.well-known/agent-card.json", b"") is None


def test_the_same_message_sent_again_is_the_same_effect_and_a_look_acts_on_nothing() -> None:
    first = read_call("POST", "/", rpc("SendMessage", {"message": MESSAGE}, rpc_id=1))
    again = read_call(
        "POST", "/", rpc("SendMessage", {"message": {**MESSAGE, "messageId": "m-2"}}, rpc_id=2)
    )
    other = read_call(
        "POST", "/", rpc("SendMessage", {"message": {**MESSAGE, "parts": [{"text": "Cancel"}]}})
    )
    look = read_call("POST", "/", rpc("GetTask", {"id": "t-1"}))
    assert first is not None and again is not None and other is not None and look is not None
    assert first.effect() == again.effect() != other.effect()
    assert first.acts and not look.acts


V1_REPLY = {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {
        "task": {
            "id": "t-1",
            "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "booked"}]}],
        }
    },
}
V03_REPLY = {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {"kind": "task", "id": "t-1", "status": {"state": "completed"}, "artifacts": []},
}


def test_a_task_is_given_a_state_in_each_version_s_shape() -> None:
    v1 = read_call("POST", "/", rpc("SendMessage", {"message": MESSAGE}))
    assert v1 is not None
    changed = with_state(v1, json.dumps(V1_REPLY).encode(), A2aTaskState.FAILED)
    assert changed is not None and changed[1] == "t-1"
    task = json.loads(changed[0])["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED" and "artifacts" not in task
    assert task["status"]["message"]["parts"] == [
        {"text": "the task failed (flakestorm task_state)"}
    ]
    assert task_of(v1, changed[0]) == ("t-1", "TASK_STATE_FAILED")
    v03 = read_call("POST", "/", rpc("message/send", {"message": MESSAGE}))
    assert v03 is not None
    changed = with_state(v03, json.dumps(V03_REPLY).encode(), A2aTaskState.INPUT_REQUIRED)
    assert changed is not None
    assert json.loads(changed[0])["result"]["status"] == {"state": "input-required"}


def test_a_reply_without_a_task_is_not_given_a_state() -> None:
    call = read_call("POST", "/", rpc("SendMessage", {"message": MESSAGE}))
    assert call is not None
    message = {"jsonrpc": "2.0", "id": 7, "result": {"message": MESSAGE}}
    error = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "no"}}
    for reply in (message, error):
        assert with_state(call, json.dumps(reply).encode(), A2aTaskState.FAILED) is None


def test_a_task_the_agent_forgot_is_answered_in_the_remembered_state() -> None:
    call = read_call("POST", "/", rpc("tasks/get", {"id": "t-1"}, rpc_id="x"))
    assert call is not None
    assert json.loads(task_with_state(call, "t-1", A2aTaskState.WORKING)) == {
        "jsonrpc": "2.0",
        "id": "x",
        "result": {"id": "t-1", "status": {"state": "working"}, "kind": "task"},
    }


def test_the_card_s_interfaces_under_the_agent_point_through_the_proxy() -> None:
    card = {
        "name": "booking",
        "supportedInterfaces": [
            {"url": "http://agent:9000/", "protocolBinding": "JSONRPC"},
            {"url": "http://agent:9000/rest", "protocolBinding": "HTTP+JSON"},
            {"url": "http://elsewhere/", "protocolBinding": "JSONRPC"},
        ],
    }
    out = rewritten_card(json.dumps(card).encode(), "http://agent:9000", "http://p:1/a2a/booking")
    assert out is not None
    assert [i["url"] for i in json.loads(out)["supportedInterfaces"]] == [
        "http://p:1/a2a/booking/",
        "http://p:1/a2a/booking/rest",
        "http://elsewhere/",
    ]
    old = {"name": "booking", "url": "http://agent:9000", "additionalInterfaces": []}
    moved = rewritten_card(json.dumps(old).encode(), "http://agent:9000/", "http://p:1/a2a/b")
    assert moved is not None and json.loads(moved)["url"] == "http://p:1/a2a/b"
    assert rewritten_card(b"<html>", "http://agent:9000", "http://p:1/a2a/b") is None
