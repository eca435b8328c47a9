"""A caller agent for tests (an http agent on 127.0.0.1, port 0) that books a table through a
downstream A2A agent reached through the chaos proxy's ``/a2a/booking`` route: it reads the
agent's card there, then sends ``SendMessage`` to the JSON-RPC interface the card names (the
proxy's route, as flakestorm rewrote it), forwarding the invocation's ``X-Flakestorm-Cell``.
The message is ``Book a table (SCENARIO)``, so the downstream's count of tasks per text is its
count per scenario.

Two styles (``style``):

- ``naive``: reports any final state as success ("Booked!") and passes on all the booking
  agent said, re-sends the message once when its reply is lost, and polls a task still
  working up to 10 times;
- ``careful``: reports what the task's state says and quotes only the first line of the
  booking agent's confirmation, never re-sends blindly (a lost reply is reported as
  unknown), and polls a working task at most twice.
"""

from __future__ import annotations

import json
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

import requests

from support.threaded_server import ThreadedServer

WORKING = ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED", "working", "submitted")
DONE = ("TASK_STATE_COMPLETED", "completed")


class Caller(ThreadedServer):
    """The caller; a context manager."""

    def __init__(self, proxy_url: str, style: str, version: str = "1.0") -> None:
        self.proxy_url = proxy_url
        self.style = style
        self.version = version
        super().__init__(_handler(self))

    @property
    def url(self) -> str:
        return self.base_url + "/chat"

    # -- one invocation

    def answer(self, scenario: str, cell: str | None) -> str:
        session = requests.Session()
        session.trust_env = False
        headers = {"X-Flakestorm-Cell": cell} if cell else {}
        if self.version == "1.0":
            headers["A2A-Version"] = "1.0"  # an official 1.0 server reads none as 0.3
        base = f"{self.proxy_url}/a2a/booking"
        v03 = self.version == "0.3"
        card = session.get(
            base + ("/.well-known/agent.json" if v03 else "/.well-known/agent-card.json"),
            timeout=10,
        ).json()
        endpoint = card["url"] if v03 else card["supportedInterfaces"][0]["url"]

        def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            doc = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
            reply = session.post(endpoint, json=doc, headers=headers, timeout=10).json()
            if "error" in reply:
                raise LookupError(reply["error"].get("message", "error"))
            result: dict[str, Any] = reply["result"]
            return result

        text = f"Book a table ({scenario})"
        part: dict[str, Any] = {"kind": "text", "text": text} if v03 else {"text": text}
        role = "user" if v03 else "ROLE_USER"

        def send() -> dict[str, Any]:
            message = {"messageId": str(uuid.uuid4()), "role": role, "parts": [part]}
            result = call("message/send" if v03 else "SendMessage", {"message": message})
            task: dict[str, Any] = result if v03 else result["task"]
            return task

        try:
            task = send()
        except requests.ConnectionError:
            if self.style == "careful":
                return (
                    "I do not know whether the table is booked: the booking agent's reply was lost."
                )
            task = send()  # naive: send it again
        except LookupError as error:
            return f"I could not book: {error}"
        polls = 10 if self.style == "naive" else 2
        while task["status"]["state"] in WORKING and polls:
            polls -= 1
            task = call("tasks/get" if v03 else "GetTask", {"id": task["id"]})
        state = task["status"]["state"]
        said = "\n".join(
            str(part.get("text", ""))
            for artifact in task.get("artifacts") or ()
            for part in artifact.get("parts") or ()
        )
        if self.style == "naive":
            note = f" The booking agent says: {said}" if said else ""
            return f"Booked! Your table is confirmed.{note}"
        if state in DONE:
            return f"Booked! Your table is confirmed ({said.splitlines()[0] if said else ''})."
        if state in WORKING:
            return f"Your booking is still pending (task {task['id']})."
        return f"I could not book the table: the booking agent says {state}."


def _handler(caller: Caller) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            scenario = self.headers.get("X-Flakestorm-Scenario", "")
            output = caller.answer(scenario, self.headers.get("X-Flakestorm-Cell"))
            body = json.dumps({"output": output}).encode()
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            self.wfile.write(head + body)

    return Handler
