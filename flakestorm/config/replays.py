"""The ``replays`` section and its sessions (SPEC §7)."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from pydantic import Field

from flakestorm.config.base import Model

HttpStatus = Annotated[int, Field(ge=100, le=599)]


class ToolResponse(Model):
    """What one call of a tool returned in the recorded session (SPEC §7)."""

    tool: str = Field(min_length=1)
    response: Any = None
    status: HttpStatus = 200
    latency_ms: Annotated[int, Field(ge=0)] = 0
    arguments: Any = None
    """What the agent sent the tool then (for the divergence report); optional."""
    fault: bool = False
    """The response was an injected fault whatever its status (a ``malformed`` 200)."""

    @property
    def failed(self) -> bool:
        """A non-2xx status: served as an error."""
        return not 200 <= self.status < 300

    @property
    def faulty(self) -> bool:
        """An error, or a fault: the session counts as having tool faults (``when``)."""
        return self.failed or self.fault


class LlmReply(Model):
    """One recorded reply of the agent's LLM: its text, or an error status."""

    content: str = ""
    status: HttpStatus = 200
    latency_ms: Annotated[int, Field(ge=0)] = 0
    fault: bool = False
    """The reply was an injected fault whatever its status (a truncated reply)."""

    @property
    def failed(self) -> bool:
        return not 200 <= self.status < 300

    @property
    def faulty(self) -> bool:
        """An error, or a fault: the session counts as having LLM faults (``when``)."""
        return self.failed or self.fault


class Verify(str, enum.Enum):
    """What a session's reply is checked against."""

    CONTRACT = "contract"
    """The invariants of the session's ``contract`` (the config's own by default)."""
    INVARIANTS = "invariants"
    """The config's top-level ``invariants``, as the mutation phase checks a reply (a session
    exported from a mutation)."""


class Session(Model):
    id: str = Field(min_length=1)
    name: str | None = None
    input: str
    context: str | list[Any] | dict[str, Any] | None = None
    tool_responses: list[ToolResponse] = []
    llm_responses: list[LlmReply] = []
    expected_output: str | None = None
    expected_failure: str | None = None
    contract: str | None = None
    verify: Verify = Verify.CONTRACT

    @property
    def has_tool_faults(self) -> bool:
        return any(r.faulty for r in self.tool_responses)

    @property
    def has_llm_faults(self) -> bool:
        return any(r.faulty for r in self.llm_responses)


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
