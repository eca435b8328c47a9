"""What a replayed session serves to the agent, call by call (SPEC §7).

A :class:`Recording` rides on the active scenario
(:attr:`~flakestorm.chaos.faults.decisions.ActiveScenario.replay`), so both delivery paths serve
it: the chaos proxy's replay upstream (http agents) and the python wrappers. Both count calls the
same
way — the fault book's ``call_index``, per cell and per tool (or the LLM) — and ask
:meth:`Recording.tool` / :meth:`Recording.llm` for the n-th call:

- a recorded tool response (status, body, latency) or LLM reply is served;
- a call with nothing recorded for it is a *replay miss* (:class:`Miss`, "3rd call to
  market_data_api; the session recorded 2"): the proxy answers 502 and the wrapper raises
  :class:`ReplayMissError`, and the interaction's ``upstream_error`` starts with
  :data:`MISS_PREFIX`, which makes the session ERRORED — unless ``replays.on_miss: live``,
  when the call goes to the real tool or LLM (:data:`LIVE`);
- LLM calls of a session with no recorded LLM replies are live.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from flakestorm.chaos.faults.modes import PythonPlan
from flakestorm.config import LlmReply, OnMiss, Session, ToolResponse
from flakestorm.errors import RateLimitFaultError, ToolFaultError

MISS_PREFIX = "replay_miss: "
"""How the ``upstream_error`` of a call with nothing recorded for it starts."""
LLM_NAME = "the LLM"
_R = TypeVar("_R", ToolResponse, LlmReply)


class Live:
    """The type of :data:`LIVE`."""

    def __repr__(self) -> str:
        return "LIVE"


LIVE: Final = Live()
"""The call goes to the real tool or LLM (``on_miss: live``, or no recorded LLM replies)."""


@dataclass(frozen=True)
class Miss:
    """A call with nothing recorded for it."""

    target: str
    """The tool's name, or :data:`LLM_NAME`."""
    call_index: int
    recorded: int

    def __str__(self) -> str:
        return (
            f"{ordinal(self.call_index + 1)} call to {self.target}; the session recorded "
            f"{self.recorded}"
        )

    @property
    def error(self) -> str:
        """The interaction's ``upstream_error``."""
        return f"{MISS_PREFIX}{self}"


class ReplayMissError(ConnectionError):
    """Raised into a python agent for a call the session has no recording for."""


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class Recording:
    """A session's recorded tool responses (per tool, in call order) and LLM replies."""

    session: str
    tools: tuple[tuple[str, tuple[ToolResponse, ...]], ...] = ()
    llm_replies: tuple[LlmReply, ...] = ()
    on_miss: OnMiss = OnMiss.ERROR

    @classmethod
    def of(cls, session: Session, on_miss: OnMiss = OnMiss.ERROR) -> Recording:
        return cls.build(session.id, session.tool_responses, session.llm_responses, on_miss)

    @classmethod
    def build(
        cls,
        session: str,
        tool_responses: Sequence[ToolResponse],
        llm_responses: Sequence[LlmReply],
        on_miss: OnMiss,
    ) -> Recording:
        tools: dict[str, list[ToolResponse]] = {}
        for response in tool_responses:
            tools.setdefault(response.tool, []).append(response)
        return cls(
            session,
            tuple((name, tuple(items)) for name, items in tools.items()),
            tuple(llm_responses),
            on_miss,
        )

    def tool_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.tools)

    def tool(self, name: str | None, call_index: int) -> ToolResponse | Miss | Live:
        """What the ``call_index``-th (0-based) call of tool ``name`` gets."""
        recorded = dict(self.tools).get(name or "", ())
        return self._nth(recorded, name or "an unknown tool", call_index)

    def llm(self, call_index: int) -> LlmReply | Miss | Live:
        """What the ``call_index``-th LLM call gets (live when no reply was recorded)."""
        if not self.llm_replies:
            return LIVE
        return self._nth(self.llm_replies, LLM_NAME, call_index)

    def _nth(self, recorded: Sequence[_R], target: str, call_index: int) -> _R | Miss | Live:
        if 0 <= call_index < len(recorded):
            return recorded[call_index]
        if self.on_miss is OnMiss.LIVE:
            return LIVE
        return Miss(target, call_index, len(recorded))

    # -- as documents (the proxy's control API)

    def to_document(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "tool_responses": [
                r.model_dump(mode="json", exclude_none=True) for _, rs in self.tools for r in rs
            ],
            "llm_responses": [r.model_dump(mode="json") for r in self.llm_replies],
            "on_miss": self.on_miss.value,
        }


def body_of(response: ToolResponse) -> tuple[bytes, str]:
    """A recorded tool response as an HTTP body and its content type (text as it is, any
    other value as JSON)."""
    if isinstance(response.response, str):
        return response.response.encode("utf-8"), "text/plain; charset=utf-8"
    return json.dumps(response.response).encode("utf-8"), "application/json"


# --------------------------------------------------------------------------- python agents


def python_plan(served: ToolResponse | LlmReply | Miss | Live, tool: bool) -> PythonPlan:
    """What a python wrapper does for a replayed call: wait the recorded latency, then return
    the recorded value (a tool's ``response``, an LLM reply's text) or raise the error a
    non-2xx status stands for (:class:`~flakestorm.errors.ToolFaultError`; a 429 from the LLM
    :class:`~flakestorm.errors.RateLimitFaultError`); a miss raises :class:`ReplayMissError`."""
    if isinstance(served, Live):
        return PythonPlan()
    if isinstance(served, Miss):
        return PythonPlan(error=ReplayMissError(f"flakestorm replay miss: {served}"))
    delay_s = served.latency_ms / 1000
    if served.failed:
        message = _error_text(served)
        if not tool and served.status == 429:
            return PythonPlan(delay_s, RateLimitFaultError(message))
        return PythonPlan(delay_s, ToolFaultError(served.status, message))
    if isinstance(served, ToolResponse):
        return PythonPlan(delay_s, value=copy.deepcopy(served.response))
    return PythonPlan(delay_s, value=served.content)


def _error_text(served: ToolResponse | LlmReply) -> str:
    if isinstance(served, LlmReply):
        return served.content or f"HTTP {served.status}"
    value = served.response
    if value is None:
        return f"HTTP {served.status}"
    return value if isinstance(value, str) else json.dumps(value)


__all__ = [
    "LIVE",
    "MISS_PREFIX",
    "Live",
    "Miss",
    "Recording",
    "ReplayMissError",
    "body_of",
    "python_plan",
]
