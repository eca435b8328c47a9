"""How the tool calls an agent makes now differ from the ones a session recorded (SPEC §7):
which tools, in which order, with which arguments. Pure: recorded responses and the calls
flakestorm saw in, lines for the report out (empty when nothing diverged)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flakestorm.chaos.faults.recording import ordinal
from flakestorm.config import ToolResponse
from flakestorm.results.model import CallRecord

MAX_LINES = 10
"""Divergence lines kept per session; the rest are counted."""
SHOWN_CHARS = 120


def divergence(recorded: Sequence[ToolResponse], calls: Sequence[CallRecord]) -> list[str]:
    """One line per difference between the recorded tool calls and the ones in ``calls``."""
    then = [r.tool for r in recorded]
    made = [c for c in calls if c.target == "tool"]
    now = [_named(c, set(then)) for c in made]
    out = []
    if then != now:
        out.append(f"tools called: recorded {_sequence(then)}; now {_sequence(now)}")
        if sorted(then) == sorted(now):
            out[-1] += " (same calls, another order)"
    seen: dict[str, int] = {}
    by_tool: dict[str, list[ToolResponse]] = {}
    for response in recorded:
        by_tool.setdefault(response.tool, []).append(response)
    for call, name in zip(made, now, strict=True):
        n = seen.get(name, 0)
        seen[name] = n + 1
        responses = by_tool.get(name, [])
        if n >= len(responses) or responses[n].arguments is None or call.request is None:
            continue
        before, after = _canonical(responses[n].arguments), _canonical(_arguments(call.request))
        if before != after:
            out.append(
                f"arguments of the {ordinal(n + 1)} call to {name}: recorded "
                f"{_short(before)}, now {_short(after)}"
            )
    if len(out) > MAX_LINES:
        out = [*out[:MAX_LINES], f"… and {len(out) - MAX_LINES} more differences"]
    return out


def _named(call: CallRecord, recorded: set[str]) -> str:
    """The call's tool as the session names it: an MCP tool (``quotes.get_quote``) by its own
    name (``get_quote``) when the session recorded it so."""
    name = call.tool or call.url
    if name not in recorded and "." in name and name.partition(".")[2] in recorded:
        return name.partition(".")[2]
    return name


def _arguments(request: str) -> str:
    """What a call sent: an MCP ``tools/call``'s ``arguments``, else the request as it is."""
    try:
        message = json.loads(request)
    except (ValueError, RecursionError):
        return request
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return request
    params = message.get("params")
    if isinstance(params, dict) and "arguments" in params:
        return json.dumps(params["arguments"])
    return request


def _sequence(names: Sequence[str]) -> str:
    return " → ".join(names) if names else "none"


def _canonical(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return str(value).strip()
    return json.dumps(_keywords(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _keywords(value: Any) -> Any:
    """A python tool called by keyword only (the wrapper records ``{"args": [], "kwargs":
    {...}}``) as its keyword arguments, the form a trace records a tool's inputs in."""
    if isinstance(value, dict) and set(value) == {"args", "kwargs"} and value["args"] == []:
        return value["kwargs"]
    return value


def _short(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
