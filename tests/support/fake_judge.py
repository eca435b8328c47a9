"""A fake OpenAI-compatible judge for ``llm_judge`` tests: a real HTTP server (``LoopbackServer``)
that reads the rubric and the output flakestorm asks about and answers in one of its modes.

- ``well``: a verdict, PASS when the output contains ``keyword`` (case-insensitive);
- ``fenced``: the same verdict inside a markdown code fence, after a preamble;
- ``refuse``: a refusal; ``prose``: text without a verdict; ``error``: HTTP 500;
- ``huge``: the ``well`` verdict with a reason of 2 MiB;
- ``timeout``: never answers (the client's ``timeout_s`` gives up);
- ``flip``: the ``well`` verdict on odd calls, the opposite on even ones;
- ``pass``: a PASS verdict whatever the output (a judge that passes everything);
- ``say``: ``said`` as it is, every time (any text, a verdict or not).

``asked`` counts the calls per (rubric, output); the mode may change at any time.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

from support.server import LoopbackServer, Request, Response

MODES = ("well", "fenced", "refuse", "prose", "error", "timeout", "flip", "huge", "pass", "say")


def completion(content: str) -> Response:
    return Response.chat_completion(content, model="judge-1")


def asked_about(body: dict[str, Any]) -> tuple[str, str]:
    """(rubric, output) of a judge request."""
    user = body["messages"][-1]["content"]
    rubric = user.split("RUBRIC:\n", 1)[1].split("\n\n", 1)[0]
    output = json.loads(user.split("OUTPUT TO JUDGE (a JSON string):\n", 1)[1])
    return rubric, output


class FakeJudge:
    def __init__(self, mode: str = "well", keyword: str = "fine", said: str = "") -> None:
        assert mode in MODES
        self.mode = mode
        self.keyword = keyword
        self.said = said
        self.asked: Counter[tuple[str, str]] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._calls = 0
        self.server = LoopbackServer(self.answer)

    def __enter__(self) -> FakeJudge:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return self.server.url_for("/v1")

    @property
    def calls(self) -> int:
        return sum(self.asked.values())

    def answer(self, request: Request) -> Response:
        body = request.json()
        rubric, output = asked_about(body)
        with self._lock:
            self.asked[(rubric, output)] += 1
            self.bodies.append(body)
            self._calls += 1
            call = self._calls
        passed = self.keyword.casefold() in output.casefold()
        mode = self.mode
        if mode == "timeout":
            return self.server.hang(request)
        if mode == "error":
            return Response.json({"error": {"message": "judge overloaded"}}, status=500)
        if mode == "refuse":
            return completion("I'm sorry, but I can't help with evaluating that content.")
        if mode == "prose":
            return completion("The answer looks reasonable overall, with a friendly tone.")
        if mode == "say":
            return completion(self.said)
        if mode == "flip" and call % 2 == 0:
            passed = not passed
        if mode == "pass":
            passed = True
        verdict = {
            "verdict": "PASS" if passed else "FAIL",
            "reason": f"keyword {'found' if passed else 'missing'}",
        }
        if mode == "fenced":
            return completion("Here is my verdict:\n```json\n" + json.dumps(verdict) + "\n```")
        if mode == "huge":
            verdict["reason"] += " " + "x" * (2 * 1024 * 1024)
        return completion(json.dumps(verdict))
