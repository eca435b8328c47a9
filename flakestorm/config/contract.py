"""The agent, invariants, faults, scenarios, the contract, and the chaos and proxy sections."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, model_validator

from flakestorm.config.base import Model
from flakestorm.config.judge import Judge, JudgeExample
from flakestorm.config.vocabulary import (
    A2A_V03_METHODS,
    A2aCard,
    A2aMethod,
    A2aTaskState,
    AgentType,
    ContextAttackType,
    DriftType,
    EffectMethod,
    InvariantType,
    LlmFaultMode,
    McpErrorForm,
    Measure,
    PiiKind,
    PoisonStrategy,
    RefusalExpect,
    Severity,
    StreamFormat,
    TokenKind,
    ToolDelivery,
    ToolFaultMode,
    When,
)

# --------------------------------------------------------------------------- agent

PositiveMs = Annotated[int, Field(gt=0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Callable_ = Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")]
"""A python ``module:attr`` reference."""


class AgentStart(Model):
    command: str = Field(min_length=1)
    cwd: str | None = None
    env: dict[str, str] = {}


class AgentSession(Model):
    header: str | None = Field(default=None, min_length=1)
    template: bool = False


class AgentStream(Model):
    """How the agent's reply streams (SPEC §16); its meaning: :mod:`flakestorm.meaning.agent`."""

    format: StreamFormat
    path: str | None = Field(default=None, min_length=1)
    """``sse`` / ``ndjson``: the dotted path to the text delta in each event's JSON."""
    done: str | None = Field(default=None, min_length=1)
    """``sse`` / ``ndjson``: the terminal event: an SSE event name, a whole data line or JSON
    line (``[DONE]``), or ``PATH=VALUE`` on the event's JSON (``done=true``)."""


class AgentConfig(Model):
    type: AgentType = AgentType.HTTP
    endpoint: str = Field(min_length=1)
    method: Literal["GET", "POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = {}
    request_template: str | dict[str, Any] | list[Any] = {"input": "{prompt}"}
    response_path: str | None = None
    timeout: PositiveMs = 30_000
    max_response_bytes: Annotated[int, Field(gt=0)] = 1_048_576
    health_endpoint: str | None = None
    ready_timeout: PositiveMs = 120_000
    start: AgentStart | None = None
    reset_endpoint: str | None = None
    reset_function: Callable_ | None = None
    session: AgentSession | None = None
    stream: AgentStream | None = None
    tools: list[Callable_] | None = None
    tool_registry: Callable_ | None = None
    llm: Callable_ | None = None
    tool_delivery: ToolDelivery | None = None
    """None: ``http`` (:class:`ToolDelivery`)."""


# --------------------------------------------------------------------------- invariants

TurnNumber = Annotated[int, Field(ge=1)]
"""A turn of a conversation (SPEC §12), numbered from 1; a one-message prompt is turn 1."""
TurnSelector = Literal["last", "every"] | TurnNumber
"""Which turns of a conversation an invariant checks: the last (default), every one, or turn N."""


def checks_turn(selector: TurnSelector, number: int, of: int) -> bool:
    """Whether an invariant with ``turn: selector`` checks turn ``number`` of ``of`` turns."""
    if selector == "every":
        return True
    if selector == "last":
        return number == of
    return number == selector


class Invariant(Model):
    id: str | None = Field(default=None, min_length=1)
    type: InvariantType
    severity: Severity = Severity.MEDIUM
    when: When = When.ALWAYS
    negate: bool = False
    description: str | None = None
    probes: list[str] | None = Field(default=None, min_length=1)
    turn: TurnSelector = "last"
    # type fields (see INVARIANT_FIELDS)
    value: str | None = None
    values: list[str] | None = Field(default=None, min_length=1)
    case_sensitive: bool | None = None
    pattern: str | None = None
    patterns: list[str] | None = Field(default=None, min_length=1)
    max_ms: PositiveMs | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    expected: str | None = None
    threshold: Probability | None = None
    baseline: str | None = None
    similarity_threshold: Probability | None = None
    kinds: list[PiiKind] | None = Field(default=None, min_length=1)
    expect: RefusalExpect | None = None
    rubric: str | None = Field(default=None, min_length=1)
    examples: list[JudgeExample] | None = Field(default=None, min_length=1)
    judge: Judge | None = None
    target: str | None = Field(default=None, min_length=1)
    """``llm``, a tool's name, ``SERVER.TOOL`` or ``*`` (SPEC §15)."""
    max: Annotated[float, Field(ge=0)] | None = None
    """Calls or tokens (whole numbers), or an amplification ratio."""
    kind: TokenKind | None = None
    max_usd: Annotated[float, Field(ge=0)] | None = None
    measure: Measure | None = None
    methods: list[EffectMethod] | None = Field(default=None, min_length=1)

    @property
    def effective_threshold(self) -> float:
        """The similarity threshold for ``similarity`` / ``behavior_unchanged``."""
        if self.type is InvariantType.SIMILARITY:
            return self.threshold if self.threshold is not None else 0.75
        return self.similarity_threshold if self.similarity_threshold is not None else 0.75


class ContractInvariant(Invariant):
    id: str = Field(min_length=1)


# --------------------------------------------------------------------------- faults


Calls = Annotated[str, Field(min_length=1)]
"""Which matching calls of an invocation (``"1-2"``, ``"3-"``, ``"2,4"``): checked by
:mod:`flakestorm.meaning.faults` with :func:`flakestorm.chaos.faults.schedule.parse_calls`."""
Every = Annotated[int, Field(ge=1)]
WindowMs = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]


class Scheduled(Protocol):
    """What has a schedule (SPEC §4.1): every fault, and the context attacks acting on calls."""

    @property
    def calls(self) -> str | None: ...

    @property
    def every(self) -> int | None: ...

    @property
    def window_ms(self) -> tuple[int, int] | None: ...

    @property
    def turns(self) -> list[int] | None: ...


class FaultTrigger(Model):
    """Fields every fault shares: how often and on which calls it fires."""

    probability: Probability = 1.0
    after_calls: Annotated[int, Field(ge=0)] = 0
    delay_ms: Annotated[int, Field(ge=0)] | None = None
    calls: Calls | None = None
    every: Every | None = None
    window_ms: WindowMs | None = None
    turns: list[TurnNumber] | None = Field(default=None, min_length=1)
    """Active only while these turns of a conversation run (None: every turn)."""


class ToolFault(FaultTrigger):
    tool: str = Field(min_length=1)
    mode: ToolFaultMode
    error_code: Annotated[int, Field(ge=100, le=599)] = 503
    message: str | None = None
    payload: str | dict[str, Any] | list[Any] | None = None
    match_url: str | None = None
    as_: McpErrorForm | None = Field(default=None, alias="as")
    """``error`` on an MCP tool: ``jsonrpc`` answers with a JSON-RPC error instead of an
    ``isError`` result."""
    state: A2aTaskState | None = None
    """``task_state``: the state the downstream A2A agent's task is given."""
    method: A2aMethod | None = None
    """On a downstream A2A agent: the one method whose calls the fault acts on (None: all)."""
    after_events: Annotated[int, Field(ge=0)] | None = None
    """``stream_cut``: the events of an A2A stream relayed before it is closed."""
    card: A2aCard | None = None
    """``card``: what the downstream A2A agent's card becomes."""

    @model_validator(mode="before")
    @classmethod
    def _a2a_names(cls, data: Any) -> Any:
        """A 0.3 method name (``message/send``) is its 1.0 method; a state in lower case
        (``failed``, ``input-required``) is the state."""
        if isinstance(data, dict):
            method, state = data.get("method"), data.get("state")
            if isinstance(method, str) and method in A2A_V03_METHODS:
                data = {**data, "method": A2A_V03_METHODS[method].value}
            if isinstance(state, str):
                data = {**data, "state": state.upper().replace("-", "_")}
        return data


class LlmFault(FaultTrigger):
    mode: LlmFaultMode
    max_tokens: Annotated[int, Field(ge=0)] | None = None
    drift_type: DriftType | None = None
    after_chunks: Annotated[int, Field(ge=0)] | None = None
    """``cut_stream``, ``timeout``: the content chunks relayed before the stream is cut (or,
    for ``timeout``, held)."""
    first_token_ms: Annotated[int, Field(ge=0)] | None = None
    """``slow_stream``: the wait before the stream's first content chunk."""
    chunk_delay_ms: Annotated[int, Field(ge=0)] | None = None
    """``slow_stream``: the wait before each later content chunk."""


class ContextAttack(Model):
    type: ContextAttackType
    payload: str | None = None
    strategy: PoisonStrategy | None = None
    payloads: list[str] | None = Field(default=None, min_length=1)
    trigger_probability: Probability | None = None
    inject_tokens: Annotated[int, Field(gt=0, le=1_000_000)] | None = None
    statements: list[str] | None = Field(default=None, min_length=1)
    tool: str | None = None
    calls: Calls | None = None
    every: Every | None = None
    window_ms: WindowMs | None = None
    turns: list[TurnNumber] | None = Field(default=None, min_length=1)
    """Active only while these turns of a conversation run (None: every turn)."""


def _attacks_dict_to_list(value: Any) -> Any:
    """``context_attacks: {memory_poisoning: {...}}`` is the dict form of the list form."""
    if isinstance(value, dict):
        out = []
        for key, params in value.items():
            if params is None:
                params = {}
            if isinstance(params, dict):
                out.append({"type": key, **params})
            else:
                out.append({"type": key, "_": params})
        return out
    return value


class Faults(Model):
    """The three fault lists shared by a scenario and the top-level ``chaos`` section."""

    tool_faults: list[ToolFault] = []
    llm_faults: list[LlmFault] = []
    context_attacks: list[ContextAttack] = []

    @model_validator(mode="before")
    @classmethod
    def _dict_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and "context_attacks" in data:
            data = {**data, "context_attacks": _attacks_dict_to_list(data["context_attacks"])}
        if isinstance(data, dict):
            # an explicit `tool_faults:` with nothing after it means "none"
            data = {k: ([] if v is None and k in _FAULT_LISTS else v) for k, v in data.items()}
        return data

    @property
    def has_chaos(self) -> bool:
        return bool(self.tool_faults or self.llm_faults or self.context_attacks)

    @property
    def needs_delivery(self) -> bool:
        """Whether these faults travel with the agent's tool or LLM calls: a channel (the
        proxy, the wrappers) must carry them to the agent."""
        return bool(
            self.tool_faults
            or self.llm_faults
            or any(a.type.acts_on_calls for a in self.context_attacks)
        )


_FAULT_LISTS = ("tool_faults", "llm_faults", "context_attacks")


class Sweep(Model):
    """One fault field run at several values (SPEC §4.1, "Sweeps"):
    :mod:`flakestorm.meaning.sweeps`."""

    field: str = Field(min_length=1)
    """``tool_faults[0].delay_ms``: which field of which of the scenario's faults."""
    values: list[float] = Field(min_length=2)
    """The values, in the order reports show them."""


class Scenario(Faults):
    name: str = Field(min_length=1)
    sweep: Sweep | None = None


class Contract(Model):
    name: str = Field(min_length=1)
    description: str | None = None
    invariants: list[ContractInvariant] = Field(min_length=1)
    chaos_matrix: list[Scenario] = Field(min_length=1)


class Chaos(Faults):
    """Top-level chaos for the chaos-only phase and ``flakestorm run --chaos``."""


# --------------------------------------------------------------------------- proxy

STDIO_SERVER = "stdio"
"""The ``proxy.mcp`` value of a stdio MCP server (reached through ``flakestorm mcp-stdio``)."""


class ToolRoute(Model):
    """A tool route that sends calls to one URL on to another (SPEC §2.5)."""

    match: str
    """The URL the agent's code calls (an API it hard-codes, https included)."""
    forward: str
    """Where those calls go instead: a staging server, a local stub."""


class Proxy(Model):
    url: str | None = None
    llm_upstream: str | None = None
    tools: dict[str, str | ToolRoute] = {}
    """Tool routes: a URL (the tool's calls are recognised by it and go to it), or ``{match,
    forward}``."""

    @property
    def tool_upstreams(self) -> dict[str, str]:
        """Where each tool's calls go: its URL, or its route's ``forward``."""
        return {n: r if isinstance(r, str) else r.forward for n, r in self.tools.items()}

    @property
    def tool_matches(self) -> dict[str, str]:
        """The URL under which a request is a call of each tool: its URL, or its ``match``."""
        return {n: r if isinstance(r, str) else r.match for n, r in self.tools.items()}

    @property
    def redirected(self) -> dict[str, str]:
        """The ``match`` of the routes that send their calls elsewhere (``match`` differs from
        ``forward``): what the proxy must know besides :attr:`tool_upstreams`."""
        upstreams = self.tool_upstreams
        return {n: m for n, m in self.tool_matches.items() if m != upstreams[n]}

    mcp: dict[str, str] = {}
    """MCP servers by name: ``<proxy>/mcp/NAME`` -> URL (streamable HTTP), or ``stdio``: a stdio
    server relayed by ``flakestorm mcp-stdio --name NAME`` (SPEC §11)."""
    a2a: dict[str, str] = {}
    """Downstream A2A agents by name: ``<proxy>/a2a/NAME`` -> the agent's base URL (its card
    at ``/.well-known/agent-card.json``), each call a call of ``NAME`` (SPEC §17)."""

    @property
    def mcp_routes(self) -> dict[str, str]:
        """The MCP servers the proxy routes to (streamable HTTP): not the stdio ones."""
        return {name: url for name, url in self.mcp.items() if url != STDIO_SERVER}

    token: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    """The port of the proxy flakestorm starts itself (default: a free one), for hosts where
    only some ports may be used; a proxy service (``url``) has its own."""
