"""The ``replays`` section and its sessions (SPEC §7)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from flakestorm.config.base import Model

HttpStatus = Annotated[int, Field(ge=100, le=599)]


class _Recorded:
    """What a recorded answer (a tool's response, an LLM's reply) says of how it went (the
    fields are the model's own, in its order)."""

    if TYPE_CHECKING:
        status: int
        fault: bool

    @property
    def failed(self) -> bool:
        """A non-2xx status: served as an error."""
        return not 200 <= self.status < 300

    @property
    def faulty(self) -> bool:
        """An error, or a fault: the session counts as having faults of its kind (``when``)."""
        return self.failed or self.fault


class ToolResponse(_Recorded, Model):
    """What one call of a tool returned in the recorded session (SPEC §7)."""

    tool: str = Field(min_length=1)
    response: Any = None
    status: HttpStatus = 200
    latency_ms: Annotated[int, Field(ge=0)] = 0
    arguments: Any = None
    """What the agent sent the tool then (for the divergence report); optional."""
    fault: bool = False
    """The response was an injected fault whatever its status (a ``malformed`` 200)."""


class LlmReply(_Recorded, Model):
    """One recorded reply of the agent's LLM: its text, or an error status."""

    content: str = ""
    status: HttpStatus = 200
    latency_ms: Annotated[int, Field(ge=0)] = 0
    fault: bool = False
    """The reply was an injected fault whatever its status (a truncated reply)."""


class Verify(str, enum.Enum):
    """What a session's reply is checked against."""

    CONTRACT = "contract"
    """The invariants of the session's ``contract`` (the config's own by default)."""
    INVARIANTS = "invariants"
    """The config's top-level ``invariants``, as the mutation phase checks a reply (a session
    exported from a mutation)."""


class SessionTurn(Model):
    """One turn of a recorded conversation (SPEC §12): its input, and the tool responses and
    LLM replies recorded while it ran."""

    input: str
    tool_responses: list[ToolResponse] = []
    llm_responses: list[LlmReply] = []


class Session(Model):
    id: str = Field(min_length=1)
    name: str | None = None
    input: str = ""
    """The input of a one-turn session (a conversation gives ``turns`` instead)."""
    turns: list[SessionTurn] | None = Field(default=None, min_length=1)
    """A recorded conversation: its turns, replayed in order in one session."""
    context: str | list[Any] | dict[str, Any] | None = None
    tool_responses: list[ToolResponse] = []
    llm_responses: list[LlmReply] = []
    expected_output: str | None = None
    expected_failure: str | None = None
    contract: str | None = None
    verify: Verify = Verify.CONTRACT
    source: str | None = None
    """Where the session came from (``manual``): metadata flakestorm 2.0.0 wrote, accepted
    and not read."""

    @property
    def steps(self) -> tuple[SessionTurn, ...]:
        """What is replayed, in order: the turns of a conversation, or the one input with the
        session's recorded responses."""
        if self.turns:
            return tuple(self.turns)
        return (SessionTurn(input=self.input, tool_responses=self.tool_responses,
                            llm_responses=self.llm_responses),)  # fmt: skip

    @property
    def first_input(self) -> str:
        return self.steps[0].input

    @property
    def all_tool_responses(self) -> list[ToolResponse]:
        return [r for step in self.steps for r in step.tool_responses]

    @property
    def has_tool_faults(self) -> bool:
        return any(r.faulty for r in self.all_tool_responses)

    @property
    def has_llm_replies(self) -> bool:
        return any(step.llm_responses for step in self.steps)

    @property
    def has_llm_faults(self) -> bool:
        return any(r.faulty for step in self.steps for r in step.llm_responses)


class SessionFile(Model):
    file: str = Field(min_length=1)
    """A YAML or JSON session file, or a glob (``sessions/*.yaml``), relative to the config."""


class LangsmithSource(Model):
    type: Literal["langsmith"] = "langsmith"
    project: str | None = None
    run_id: str | None = None
    contract: str | None = None


class OnMiss(str, enum.Enum):
    """What a call with nothing recorded for it gets."""

    ERROR = "error"
    """A replay miss: the session is ERRORED naming the call."""
    LIVE = "live"
    """The call goes to the real tool or LLM."""


class Replays(Model):
    sessions: list[Session | SessionFile] = []
    sources: list[LangsmithSource] = []
    on_miss: OnMiss = OnMiss.ERROR
