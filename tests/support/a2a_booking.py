"""A downstream A2A agent for tests: a booking agent on 127.0.0.1, port 0, whose every
``SendMessage`` creates a task (completed at once, its artifact ``booked: <text>``), and which
counts the tasks it created per message text. It speaks A2A 1.0 over JSON-RPC (card at
``/.well-known/agent-card.json``), or with ``version="0.3"`` the 0.3 shapes (``message/send``,
lower-case states, card at ``/.well-known/agent.json`` with a top-level ``url``).

::

    with BookingAgent() as booking:
        booking.url               # http://127.0.0.1:PORT
        booking.created["Book a table (lost)"]   # tasks created for that text
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.threaded_server import ThreadedServer


class BookingAgent(ThreadedServer):
    """The agent; a context manager."""

    def __init__(self, version: str = "1.0", artifact: str | None = None) -> None:
        self.version = version
        self.artifact = artifact
        """The artifact's text of every task (None: ``booked: <the message's text>``)."""
        self.created: Counter[str] = Counter()
        self.tasks: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        super().__init__(_handler(self))

    @property
    def url(self) -> str:
        return self.base_url

    # -- the agent

    def card(self) -> dict[str, Any]:
        if self.version == "0.3":
            return {
                "name": "booking",
                "url": self.url,
                "preferredTransport": "JSONRPC",
                "protocolVersion": "0.3.0",
                "version": "1",
                "capabilities": {},
                "skills": [],
            }
        interface = {"url": self.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        return {"name": "booking", "version": "1", "supportedInterfaces": [interface]}

    def book(self, message: dict[str, Any]) -> dict[str, Any]:
        text = "".join(str(p.get("text", "")) for p in message.get("parts") or ())
        with self._lock:
            self.created[text] += 1
            task_id = f"task-{sum(self.created.values())}"
            task = self._task(task_id, self.artifact or f"booked: {text}")
            self.tasks[task_id] = task
        return task

    def _task(self, task_id: str, text: str) -> dict[str, Any]:
        if self.version == "0.3":
            part = {"kind": "text", "text": text}
            return {
                "kind": "task",
                "id": task_id,
                "contextId": "c1",
                "status": {"state": "completed"},
                "artifacts": [{"artifactId": "a1", "parts": [part]}],
            }
        return {
            "id": task_id,
            "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a1", "parts": [{"text": text}]}],
        }

    def events(self, doc: dict[str, Any]) -> list[dict[str, Any]]:
        """A streamed booking (``SendStreamingMessage``): the task working, its artifact, and
        its completion, each event a JSON-RPC response."""
        task = self.book((doc.get("params") or {}).get("message") or {})
        artifact = task.pop("artifacts")[0]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        if self.version == "0.3":
            task["status"] = {"state": "working"}
            results = [
                task,
                {"kind": "artifact-update", **ids, "artifact": artifact},
                {"kind": "status-update", **ids, "status": {"state": "completed"}, "final": True},
            ]
        else:
            task["status"] = {"state": "TASK_STATE_WORKING"}
            done = {"state": "TASK_STATE_COMPLETED"}
            results = [
                {"task": task},
                {"artifactUpdate": {**ids, "artifact": artifact}},
                {"statusUpdate": {**ids, "status": done}},
            ]
        return [{"jsonrpc": "2.0", "id": doc.get("id"), "result": r} for r in results]

    def answer(self, doc: dict[str, Any]) -> dict[str, Any]:
        method, params = doc.get("method"), doc.get("params") or {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": doc.get("id")}
        if method in ("SendMessage", "message/send"):
            task = self.book(params.get("message") or {})
            reply["result"] = {"task": task} if self.version == "1.0" else task
        elif method in ("GetTask", "tasks/get"):
            task = self.tasks.get(str(params.get("id")))
            if task is None:
                reply["error"] = {"code": -32001, "message": "Task not found"}
            else:
                reply["result"] = task
        else:
            reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        return reply


def _handler(agent: BookingAgent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, value: Any, status: int = 200) -> None:
            body = json.dumps(value).encode()
            head = (
                f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            self.wfile.write(head + body)

        def _rest(self) -> bool:
            """The HTTP+JSON binding (1.0): ``POST /message:send``, ``GET /tasks/ID``."""
            if self.command == "POST" and self.path.endswith("/message:send"):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send({"task": agent.book(json.loads(body).get("message") or {})})
                return True
            if self.command == "GET" and "/tasks/" in self.path:
                task = agent.tasks.get(self.path.rsplit("/", 1)[1])
                self._send(task if task else {"error": "not found"}, 200 if task else 404)
                return True
            return False

        def do_GET(self) -> None:
            if self._rest():
                return
            card_path = (
                "/.well-known/agent.json"
                if agent.version == "0.3"
                else ("/.well-known/agent-card.json")
            )
            if self.path == card_path:
                self._send(agent.card())
            else:
                self._send({"error": "not found"}, 404)

        def do_POST(self) -> None:
            if self._rest():
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            doc = json.loads(body)
            if doc.get("method") in ("SendStreamingMessage", "message/stream"):
                frames = b"".join(
                    b"data: " + json.dumps(e).encode() + b"\n\n" for e in agent.events(doc)
                )
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                self.wfile.write(head + b"Connection: close\r\n\r\n" + frames)
                self.close_connection = True
                return
            self._send(agent.answer(doc))

    return Handler
