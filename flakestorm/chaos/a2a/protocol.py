"""A2A as the chaos proxy reads and answers it (SPEC §17): a downstream agent's calls, both
protocol versions, the JSON-RPC binding and the HTTP+JSON one.

- 1.0: JSON-RPC methods ``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``,
  ``SubscribeToTask``; HTTP+JSON ``POST /message:send``, ``POST /message:stream``,
  ``GET /tasks/ID``, ``POST /tasks/ID:cancel``, ``GET /tasks/ID:subscribe``; states
  ``TASK_STATE_WORKING``...; a ``SendMessage`` result is ``{"task": ...}`` or
  ``{"message": ...}``; the card at ``/.well-known/agent-card.json`` lists its
  ``supportedInterfaces[].url``.
- 0.3: JSON-RPC methods ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe``; states ``working``, ``input-required``...; a ``message/send`` result is
  the task (``kind: task``) or a message itself; the card at ``/.well-known/agent.json`` has a
  top-level ``url`` (and ``additionalInterfaces[].url``).

Everything here is pure: bytes and JSON values in, the same out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from flakestorm.config import A2aMethod, A2aTaskState
from flakestorm.config.vocabulary import A2A_V03_METHODS

__all__ = [
    "CARD_PATHS",
    "A2aCall",
    "card_v03",
    "error_response",
    "read_call",
    "rewritten_card",
    "task_of",
    "with_state",
]

V1 = "1.0"
V03 = "0.3"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
"""Where an agent's card is (1.0, then 0.3)."""

_REST = (
    ("POST", re.compile(r"/message:send$"), A2aMethod.SEND_MESSAGE),
    ("POST", re.compile(r"/message:stream$"), A2aMethod.SEND_STREAMING_MESSAGE),
    ("GET", re.compile(r"/tasks/(?P<task>[^/:]+)$"), A2aMethod.GET_TASK),
    ("POST", re.compile(r"/tasks/(?P<task>[^/:]+):cancel$"), A2aMethod.CANCEL_TASK),
    ("GET", re.compile(r"/tasks/(?P<task>[^/:]+):subscribe$"), A2aMethod.SUBSCRIBE_TO_TASK),
    ("POST", re.compile(r"/tasks/(?P<task>[^/:]+):subscribe$"), A2aMethod.SUBSCRIBE_TO_TASK),
)
_V1_METHODS = {m.value: m for m in A2aMethod}
_TASK_METHODS = (A2aMethod.GET_TASK, A2aMethod.CANCEL_TASK, A2aMethod.SUBSCRIBE_TO_TASK)


@dataclass(frozen=True)
class A2aCall:
    """One call of a downstream agent, as it was sent."""

    method: A2aMethod
    version: str
    """``1.0`` or ``0.3``, by the method's name (HTTP+JSON: ``1.0``)."""
    rpc_id: Any = None
    """The JSON-RPC request's ``id`` (None for HTTP+JSON)."""
    jsonrpc: bool = True
    task_id: str | None = None
    """The task a ``GetTask``, ``CancelTask`` or ``SubscribeToTask`` names."""
    message: Any = None
    """A ``SendMessage``'s message, as sent."""

    @property
    def acts(self) -> bool:
        """Whether the call asks the agent to do something (send a message, cancel a task),
        not to look (get a task, subscribe to it)."""
        return self.method in (
            A2aMethod.SEND_MESSAGE,
            A2aMethod.SEND_STREAMING_MESSAGE,
            A2aMethod.CANCEL_TASK,
        )

    @property
    def streams(self) -> bool:
        return self.method in (A2aMethod.SEND_STREAMING_MESSAGE, A2aMethod.SUBSCRIBE_TO_TASK)

    def effect(self) -> str:
        """What the call asks for, without what differs on every send (the JSON-RPC ``id``,
        a message's ``messageId``): the same request sent twice is the same effect."""
        message = self.message
        if isinstance(message, dict):
            message = {k: v for k, v in message.items() if k != "messageId"}
        doc = {"method": self.method.value, "task": self.task_id, "message": message}
        return json.dumps(doc, sort_keys=True, ensure_ascii=False)


def read_call(http_method: str, path: str, body: bytes) -> A2aCall | None:
    """The A2A call a request is (``path``: the part after the agent's base URL), or None for
    anything else (its card, an unknown method, a body that is not a request)."""
    for verb, pattern, rest_method in _REST:
        match = pattern.search(path)
        if http_method == verb and match is not None:
            task = match.groupdict().get("task")
            sent = _json(body) if body else None
            message = sent.get("message") if isinstance(sent, dict) else None
            return A2aCall(rest_method, V1, jsonrpc=False, task_id=task, message=message)
    if http_method != "POST":
        return None
    doc = _json(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("method"), str):
        return None
    name = doc["method"]
    found_method = _V1_METHODS.get(name) or A2A_V03_METHODS.get(name)
    if found_method is None:
        return None
    method = found_method
    raw = doc.get("params")
    params: dict[str, Any] = raw if isinstance(raw, dict) else {}
    task = None
    if method in _TASK_METHODS:
        found = (
            params.get("id") if name in A2A_V03_METHODS else params.get("id", params.get("name"))
        )
        task = str(found).removeprefix("tasks/") if found is not None else None
    version = V03 if name in A2A_V03_METHODS else V1
    return A2aCall(method, version, doc.get("id"), True, task, params.get("message"))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _task_in(value: Any) -> dict[str, Any] | None:
    """The task a result holds: itself, or its ``task`` (a 1.0 ``SendMessage`` result)."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("task"), dict):
        inner: dict[str, Any] = value["task"]
        return inner
    if isinstance(value.get("status"), dict) and "id" in value:
        return value
    return None


def _result(call: A2aCall, body: bytes) -> tuple[dict[str, Any] | None, Any]:
    """The response document and its result (JSON-RPC's ``result``, HTTP+JSON's body)."""
    doc = _json(body)
    if not isinstance(doc, dict):
        return None, None
    return doc, doc.get("result") if call.jsonrpc else doc


def answer_of(call: A2aCall, body: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The response document of a whole reply and what in it answers the call: the task it
    holds, else the message (1.0's ``{"message": ...}``, 0.3's ``kind: message``); the answer
    is a part of the document, edited in place."""
    doc, result = _result(call, body)
    task = _task_in(result)
    if task is not None:
        return doc, task
    if isinstance(result, dict) and isinstance(result.get("message"), dict):
        message: dict[str, Any] = result["message"]
        return doc, message
    if isinstance(result, dict) and isinstance(result.get("parts"), list):
        return doc, result
    return doc, None


def task_of(call: A2aCall, body: bytes) -> tuple[str | None, str | None]:
    """The id and state (as the agent sent it) of the task a whole reply holds."""
    _, result = _result(call, body)
    task = _task_in(result)
    if task is None:
        return None, None
    status = task.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    return (str(task["id"]) if "id" in task else None), (str(state) if state else None)


def error_of(call: A2aCall, body: bytes) -> int | None:
    """The error code of an error reply (JSON-RPC, or HTTP+JSON's ``{"error": ...}``)."""
    doc = _json(body)
    error = doc.get("error") if isinstance(doc, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def state_name(state: A2aTaskState, version: str) -> str:
    """``FAILED`` as the protocol writes it: ``TASK_STATE_FAILED`` (1.0), ``failed`` (0.3)."""
    if version == V03:
        return state.value.lower().replace("_", "-")
    return f"TASK_STATE_{state.value}"


def status_of(state: A2aTaskState, version: str) -> dict[str, Any]:
    """A task status in ``state`` as ``version`` writes it (FAILED with a status message)."""
    status: dict[str, Any] = {"state": state_name(state, version)}
    message = _status_message(state, version)
    if message is not None:
        status["message"] = message
    return status


def _status_message(state: A2aTaskState, version: str) -> dict[str, Any] | None:
    if state is not A2aTaskState.FAILED:
        return None
    text = "the task failed (flakestorm task_state)"
    if version == V03:
        return {"kind": "message", "role": "agent", "messageId": "flakestorm-failed",
                "parts": [{"kind": "text", "text": text}]}  # fmt: skip
    return {"messageId": "flakestorm-failed", "role": "ROLE_AGENT", "parts": [{"text": text}]}


def with_state(call: A2aCall, body: bytes, state: A2aTaskState) -> tuple[bytes, str] | None:
    """The reply ``body`` with its task in ``state`` (its artifacts gone: the work did not come
    back; FAILED with a status message), and the task's id; None when the reply holds no task
    (an error, a message instead of a task)."""
    doc, result = _result(call, body)
    task = _task_in(result)
    if doc is None or task is None or "id" not in task:
        return None
    task["status"] = status_of(state, call.version)
    task.pop("artifacts", None)
    return json.dumps(doc).encode(), str(task["id"])


def task_with_state(call: A2aCall, task_id: str, state: A2aTaskState) -> bytes:
    """A reply to a task call (``GetTask``...) holding task ``task_id`` in ``state``, when the
    agent's own reply could not be rewritten (it no longer knows the task, say)."""
    task: dict[str, Any] = {"id": task_id, "status": status_of(state, call.version)}
    if call.version == V03:
        task["kind"] = "task"
    doc: Any = {"jsonrpc": "2.0", "id": call.rpc_id, "result": task} if call.jsonrpc else task
    return json.dumps(doc).encode()


def error_response(call: A2aCall, code: int, message: str) -> bytes:
    """A JSON-RPC error response to ``call`` (HTTP+JSON: ``{"error": {...}}``)."""
    error = {"code": code, "message": message}
    if call.jsonrpc:
        return json.dumps({"jsonrpc": "2.0", "id": call.rpc_id, "error": error}).encode()
    return json.dumps({"error": error}).encode()


def rewritten_card(body: bytes, upstream: str, through: str) -> bytes | None:
    """The card ``body`` with every interface URL under ``upstream`` (the agent's base URL)
    made to point ``through`` the proxy (``http://proxy/a2a/NAME``); None when it is not a
    card (not JSON)."""
    doc = _json(body)
    if not isinstance(doc, dict):
        return None
    base = upstream.rstrip("/")

    def moved(url: Any) -> Any:
        if isinstance(url, str) and (url == base or url.startswith(base + "/")):
            return through.rstrip("/") + url[len(base) :]
        return url

    if "url" in doc:
        doc["url"] = moved(doc["url"])
    for key in ("supportedInterfaces", "additionalInterfaces"):
        for interface in doc.get(key) or ():
            if isinstance(interface, dict) and "url" in interface:
                interface["url"] = moved(interface["url"])
    return json.dumps(doc).encode()


def card_v03(body: bytes) -> bytes | None:
    """A 1.0 card as a 0.3 agent would serve it: its first interface's URL as the top-level
    ``url`` (its binding as ``preferredTransport``), ``protocolVersion`` 0.3.0, and no
    ``supportedInterfaces``; None when it is not a card (not JSON)."""
    doc = _json(body)
    if not isinstance(doc, dict):
        return None
    interfaces = doc.pop("supportedInterfaces", None) or []
    first = interfaces[0] if interfaces and isinstance(interfaces[0], dict) else {}
    if "url" in first:
        doc["url"] = first["url"]
    doc["preferredTransport"] = first.get("protocolBinding", "JSONRPC")
    doc["protocolVersion"] = "0.3.0"
    return json.dumps(doc).encode()
