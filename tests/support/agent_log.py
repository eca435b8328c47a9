"""What an agent of ``tests/test_compatibility.py`` received, in its own words: the agent writes
each request as it sees it — a reset, the start of an invocation with its prompt, the end with
its answer — as one JSON line appended to a file, so the test reads what really reached the
agent and does not take flakestorm's report for it.

Each line is one ``write`` to a file opened for appending, so lines from the agent's threads
and from an agent in another process (the OpenTelemetry one) never interleave, and the file's
order is the order the agent saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESET, BEGIN, END = "reset", "begin", "end"


def record(path: str | Path, event: str, **fields: Any) -> None:
    """Append one event (``reset``, ``begin`` with ``prompt``, ``end`` with ``prompt`` and
    ``output``) to the log at ``path``."""
    line = json.dumps({"event": event, **fields}) + "\n"
    with open(path, "a", encoding="utf-8") as log:
        log.write(line)


@dataclass(frozen=True)
class Received:
    """The events of one log, in the order the agent saw them."""

    events: tuple[dict[str, Any], ...]

    @classmethod
    def read(cls, path: Path) -> Received:
        if not path.exists():
            return cls(())
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls(tuple(json.loads(line) for line in lines))

    @property
    def prompts(self) -> list[str]:
        """The prompt of each invocation, in the order they began."""
        return [e["prompt"] for e in self.events if e["event"] == BEGIN]

    @property
    def answers(self) -> list[tuple[str, str]]:
        """(prompt, answer) of each invocation, in the order they ended."""
        return [(e["prompt"], e["output"]) for e in self.events if e["event"] == END]

    @property
    def resets(self) -> int:
        return sum(e["event"] == RESET for e in self.events)

    def one_at_a_time(self) -> list[list[str]] | None:
        """The prompts sent after each reset, when the log starts with a reset and no
        invocation overlapped another (each ``begin`` followed at once by its ``end``); None
        when it does not."""
        groups: list[list[str]] = []
        events = list(self.events)
        while events:
            event = events.pop(0)
            if event["event"] == RESET:
                groups.append([])
            elif not groups or event["event"] != BEGIN or not events:
                return None
            else:
                end = events.pop(0)
                if end["event"] != END or end["prompt"] != event["prompt"]:
                    return None
                groups[-1].append(event["prompt"])
        return groups
