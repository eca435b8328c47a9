"""The answer inside a reply: ``agent.response_path`` or automatic extraction (SPEC §2.1).

Shared by http and python agents. A given path that does not resolve is an error
(:attr:`AgentErrorKind.UNPARSEABLE`) naming the path and what exists there: never a silent
fallback to another field.
"""

from __future__ import annotations

import json
from typing import Any

from flakestorm.errors import AgentError, AgentErrorKind

AUTO_KEYS = ("output", "response", "answer", "result", "text", "content", "message")
"""Keys tried in order when no ``response_path`` is configured."""


def as_text(value: Any) -> str:
    """A found value as answer text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def extract_path(body: Any, path: str) -> str:
    """Follow dotted ``path`` (``data.answer``, ``choices.0.text``) into a parsed JSON value."""
    node = body
    walked: list[str] = []
    for segment in path.split("."):
        where = ".".join(walked) or "the top level"
        if isinstance(node, dict):
            if segment not in node:
                keys = ", ".join(f'"{k}"' for k in list(node)[:20]) or "none"
                raise _missing(path, f'no key "{segment}" at {where} (keys there: {keys})')
            node = node[segment]
        elif isinstance(node, list):
            if not segment.lstrip("-").isdigit():
                raise _missing(path, f'"{segment}" is not an index; {where} is a list')
            index = int(segment)
            if not -len(node) <= index < len(node):
                raise _missing(
                    path, f"index {index} is out of range at {where} (a list of {len(node)})"
                )
            node = node[index]
        else:
            kind = "null" if node is None else type(node).__name__
            raise _missing(path, f'cannot look up "{segment}": {where} is {kind}, not an object')
        walked.append(segment)
    return as_text(node)


def extract_auto(body: Any) -> str | None:
    """The first of :data:`AUTO_KEYS` present (and not null) in a JSON object, else None."""
    if isinstance(body, dict):
        for key in AUTO_KEYS:
            if body.get(key) is not None:
                return as_text(body[key])
    return None


def _missing(path: str, detail: str) -> AgentError:
    return AgentError(
        AgentErrorKind.RESPONSE_PATH,
        f'agent.response_path "{path}" not found in the reply: {detail}',
    )
