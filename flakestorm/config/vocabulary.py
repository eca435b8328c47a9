"""The closed vocabularies of flakestorm.yaml as enums, and the fields each invariant type and
context attack takes. The enums that carry behaviour (``Severity.weight``, ``When.applies``,
``MutationType.default_weight``) carry it here."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flakestorm.config.contract import Scenario
    from flakestorm.config.root import Config


class AgentType(str, enum.Enum):
    HTTP = "http"
    PYTHON = "python"


class ToolDelivery(str, enum.Enum):
    """Where the faults of a python agent's tool go when it is named both in ``agent.tools``
    (or its registry) and in ``proxy.tools`` (SPEC §10)."""

    HTTP = "http"
    """At its HTTP call, through the in-process proxy (the default): the tool's code runs."""
    CALLABLE = "callable"
    """At the callable, by its wrapper: the tool's HTTP call is not routed."""


class Severity(str, enum.Enum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def weight(self) -> int:
        """Weight of a cell of this severity in the resilience score (SPEC §5)."""
        return {"critical": 3, "high": 2, "medium": 1, "low": 1}[self.value]


class When(str, enum.Enum):
    ALWAYS = "always"
    TOOL_FAULTS_ACTIVE = "tool_faults_active"
    LLM_FAULTS_ACTIVE = "llm_faults_active"
    ANY_CHAOS_ACTIVE = "any_chaos_active"
    NO_CHAOS = "no_chaos"

    def applies(self, scenario: Scenario) -> bool:
        """Whether an invariant with this ``when`` is evaluated under ``scenario``."""
        return self.applies_to(
            bool(scenario.tool_faults), bool(scenario.llm_faults), scenario.has_chaos
        )

    def applies_to(self, tool_faults: bool, llm_faults: bool, any_chaos: bool) -> bool:
        """Whether it is evaluated where tool faults / LLM faults / any chaos are active (a
        scenario, or a replayed session whose recorded responses failed)."""
        if self is When.ALWAYS:
            return True
        if self is When.TOOL_FAULTS_ACTIVE:
            return tool_faults
        if self is When.LLM_FAULTS_ACTIVE:
            return llm_faults
        if self is When.ANY_CHAOS_ACTIVE:
            return any_chaos
        return not any_chaos


class InvariantType(str, enum.Enum):
    CONTAINS = "contains"
    CONTAINS_ANY = "contains_any"
    REGEX = "regex"
    EXCLUDES_PATTERN = "excludes_pattern"
    LATENCY = "latency"
    VALID_JSON = "valid_json"
    SIMILARITY = "similarity"
    BEHAVIOR_UNCHANGED = "behavior_unchanged"
    EXCLUDES_PII = "excludes_pii"
    REFUSAL_CHECK = "refusal_check"
    COMPLETES = "completes"
    OUTPUT_NOT_EMPTY = "output_not_empty"
    LLM_JUDGE = "llm_judge"
    MAX_CALLS = "max_calls"
    MAX_TOKENS = "max_tokens"
    MAX_COST = "max_cost"
    MAX_AMPLIFICATION = "max_amplification"
    RETRY_DISCIPLINE = "retry_discipline"
    NO_DUPLICATE_EFFECTS = "no_duplicate_effects"
    TTFT = "ttft"
    MAX_STALL = "max_stall"
    STREAM_COMPLETES = "stream_completes"

    @property
    def reads_stream(self) -> bool:
        """Whether an invariant of this type is judged on how the agent's reply streamed
        (``agent.stream``, SPEC §16), not on its text."""
        return self in STREAM_TYPES

    @property
    def reads_calls(self) -> bool:
        """Whether an invariant of this type is judged on the calls the agent made, not on its
        reply (SPEC §15)."""
        return self in CONDUCT_TYPES


CONDUCT_TYPES = frozenset(
    {
        InvariantType.MAX_CALLS,
        InvariantType.MAX_TOKENS,
        InvariantType.MAX_COST,
        InvariantType.MAX_AMPLIFICATION,
        InvariantType.RETRY_DISCIPLINE,
        InvariantType.NO_DUPLICATE_EFFECTS,
    }
)
"""The invariant types judged on what the agent did — its calls, tokens and cost — counted
where its calls pass through flakestorm (SPEC §15)."""

STREAM_TYPES = frozenset(
    {InvariantType.TTFT, InvariantType.MAX_STALL, InvariantType.STREAM_COMPLETES}
)
"""The invariant types judged on the timing of a streamed reply (SPEC §16)."""


class StreamFormat(str, enum.Enum):
    """How a streamed reply is framed and where its text is (``agent.stream.format``)."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    SSE = "sse"
    NDJSON = "ndjson"
    TEXT = "text"

    @property
    def generic(self) -> bool:
        """Whether ``path`` and ``done`` say where the text is and what ends the stream (the
        other formats know both)."""
        return self in (StreamFormat.SSE, StreamFormat.NDJSON)

    @property
    def framed_as_sse(self) -> bool:
        """Whether the body is server-sent events (else JSON lines, or plain text)."""
        return self in (StreamFormat.OPENAI, StreamFormat.ANTHROPIC, StreamFormat.SSE)

    def terminal(self, done: str | None) -> str:
        """The terminal event's name in a reason: ``[DONE]``, ``message_stop``, ``done``'s."""
        if self is StreamFormat.OPENAI:
            return "[DONE]"
        if self is StreamFormat.ANTHROPIC:
            return "message_stop"
        if self is StreamFormat.TEXT:
            return "the end of the body"
        return done or "its terminal event"


class TokenKind(str, enum.Enum):
    """Which tokens ``max_tokens`` counts."""

    TOTAL = "total"
    INPUT = "input"
    """Every prompt token, cached ones included."""
    OUTPUT = "output"


class Measure(str, enum.Enum):
    """What ``max_amplification`` compares with the same prompt without chaos."""

    CALLS = "calls"
    TOKENS = "tokens"
    COST = "cost"


class EffectMethod(str, enum.Enum):
    """The HTTP methods ``no_duplicate_effects`` looks at."""

    GET = "GET"
    HEAD = "HEAD"
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"


INVARIANT_FIELDS: dict[InvariantType, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # type: (required fields, optional fields)
    InvariantType.CONTAINS: (("value",), ("case_sensitive",)),
    InvariantType.CONTAINS_ANY: (("values",), ("case_sensitive",)),
    InvariantType.REGEX: (("pattern",), ()),
    InvariantType.EXCLUDES_PATTERN: (("patterns",), ()),
    InvariantType.LATENCY: (("max_ms",), ()),
    InvariantType.VALID_JSON: ((), ("schema",)),
    InvariantType.SIMILARITY: (("expected",), ("threshold",)),
    InvariantType.BEHAVIOR_UNCHANGED: ((), ("baseline", "similarity_threshold")),
    InvariantType.EXCLUDES_PII: ((), ("kinds",)),
    InvariantType.REFUSAL_CHECK: ((), ("expect",)),
    InvariantType.COMPLETES: ((), ()),
    InvariantType.OUTPUT_NOT_EMPTY: ((), ()),
    InvariantType.LLM_JUDGE: (("rubric",), ("examples", "judge")),
    InvariantType.MAX_CALLS: (("target", "max"), ()),
    InvariantType.MAX_TOKENS: (("max",), ("kind",)),
    InvariantType.MAX_COST: (("max_usd",), ()),
    InvariantType.MAX_AMPLIFICATION: (("max",), ("target", "measure")),
    InvariantType.RETRY_DISCIPLINE: ((), ("target",)),
    InvariantType.NO_DUPLICATE_EFFECTS: (("target",), ("methods",)),
    InvariantType.TTFT: (("max_ms",), ()),
    InvariantType.MAX_STALL: (("max_ms",), ()),
    InvariantType.STREAM_COMPLETES: ((), ()),
}
"""Type-specific invariant fields. A type field set on an invariant of another type is an error."""


class JudgeVerdict(str, enum.Enum):
    """What an ``llm_judge`` example must be judged: the verdict a judge answers."""

    PASS = "PASS"
    FAIL = "FAIL"


class PiiKind(str, enum.Enum):
    EMAIL = "email"
    PHONE = "phone"
    SSN = "ssn"
    CREDIT_CARD = "credit_card"
    IBAN = "iban"
    IP_ADDRESS = "ip_address"


class RefusalExpect(str, enum.Enum):
    REFUSE = "refuse"
    COMPLY = "comply"


class ToolFaultMode(str, enum.Enum):
    TIMEOUT = "timeout"
    ERROR = "error"
    MALFORMED = "malformed"
    SLOW = "slow"
    MALICIOUS_RESPONSE = "malicious_response"
    EMPTY = "empty"
    TOOL_REMOVED = "tool_removed"
    SESSION_EXPIRED = "session_expired"
    TASK_STATE = "task_state"
    LOST_REPLY = "lost_reply"
    STREAM_CUT = "stream_cut"
    CARD = "card"

    @property
    def mcp_only(self) -> bool:
        """Whether the mode means something only on an MCP tool (SPEC §11)."""
        return self in (ToolFaultMode.TOOL_REMOVED, ToolFaultMode.SESSION_EXPIRED)

    @property
    def a2a_only(self) -> bool:
        """Whether the mode means something only on a downstream A2A agent (SPEC §17)."""
        return self in (ToolFaultMode.TASK_STATE, ToolFaultMode.STREAM_CUT, ToolFaultMode.CARD)


class A2aTaskState(str, enum.Enum):
    """The state a ``task_state`` fault gives a downstream A2A agent's task (SPEC §17)."""

    FAILED = "FAILED"
    REJECTED = "REJECTED"
    CANCELED = "CANCELED"
    INPUT_REQUIRED = "INPUT_REQUIRED"
    AUTH_REQUIRED = "AUTH_REQUIRED"
    WORKING = "WORKING"
    """Forever: every later look at the task finds it still working."""


class A2aCard(str, enum.Enum):
    """What a ``card`` fault does to a downstream A2A agent's card (SPEC §17)."""

    MISSING = "missing"
    """The card is not found (404)."""
    V0_3 = "v0_3"
    """The card has the 0.3 shape: a top-level ``url``, no ``supportedInterfaces``."""


class A2aMethod(str, enum.Enum):
    """The A2A methods a fault may be scoped to (``method``), by their 1.0 names; the 0.3
    names (``message/send``, ``tasks/get``, ...) are read as these."""

    SEND_MESSAGE = "SendMessage"
    SEND_STREAMING_MESSAGE = "SendStreamingMessage"
    GET_TASK = "GetTask"
    CANCEL_TASK = "CancelTask"
    SUBSCRIBE_TO_TASK = "SubscribeToTask"


A2A_V03_METHODS = {
    "message/send": A2aMethod.SEND_MESSAGE,
    "message/stream": A2aMethod.SEND_STREAMING_MESSAGE,
    "tasks/get": A2aMethod.GET_TASK,
    "tasks/cancel": A2aMethod.CANCEL_TASK,
    "tasks/resubscribe": A2aMethod.SUBSCRIBE_TO_TASK,
}
"""The A2A 0.3 JSON-RPC method names, as their 1.0 methods."""


class McpErrorForm(str, enum.Enum):
    """How an ``error`` fault on an MCP tool answers (SPEC §11)."""

    RESULT = "result"
    """A tool result with ``isError: true`` and the error text."""
    JSONRPC = "jsonrpc"
    """A JSON-RPC error response."""


class LlmFaultMode(str, enum.Enum):
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    TRUNCATED_RESPONSE = "truncated_response"
    EMPTY = "empty"
    GARBAGE = "garbage"
    RESPONSE_DRIFT = "response_drift"
    CUT_STREAM = "cut_stream"
    SLOW_STREAM = "slow_stream"


class DriftType(str, enum.Enum):
    JSON_FIELD_RENAME = "json_field_rename"
    FORMAT_CHANGE = "format_change"
    VERBOSITY_SHIFT = "verbosity_shift"
    REFUSAL_REPHRASE = "refusal_rephrase"
    TONE_SHIFT = "tone_shift"


class ContextAttackType(str, enum.Enum):
    MEMORY_POISONING = "memory_poisoning"
    INDIRECT_INJECTION = "indirect_injection"
    OVERFLOW = "overflow"
    CONFLICTING_CONTEXT = "conflicting_context"
    INJECTION_VIA_CONTEXT = "injection_via_context"

    @property
    def acts_on_calls(self) -> bool:
        """Whether the attack travels with the agent's calls (tool results, LLM requests), so a
        fault channel must deliver it; ``memory_poisoning`` acts on the agent's input."""
        return self is not ContextAttackType.MEMORY_POISONING


TOOL_RESULT_ATTACKS = frozenset(
    {
        ContextAttackType.INDIRECT_INJECTION,
        ContextAttackType.OVERFLOW,
        ContextAttackType.CONFLICTING_CONTEXT,
    }
)
"""Context attacks delivered inside tool results."""
LLM_REQUEST_ATTACKS = frozenset({ContextAttackType.INJECTION_VIA_CONTEXT})
"""Context attacks delivered inside LLM requests."""


SCHEDULE_FIELDS = ("calls", "every", "window_ms")
"""The fields of a schedule (SPEC §4.1): every fault has them, and the context attacks that act
on calls (not ``memory_poisoning``, which acts on the prompt)."""

CONTEXT_ATTACK_FIELDS: dict[ContextAttackType, tuple[tuple[str, ...], tuple[str, ...]]] = {
    ContextAttackType.MEMORY_POISONING: (("payload",), ("strategy",)),
    ContextAttackType.INDIRECT_INJECTION: (
        ("payloads",),
        ("trigger_probability", "tool", *SCHEDULE_FIELDS),
    ),
    ContextAttackType.OVERFLOW: (("inject_tokens",), ("tool", *SCHEDULE_FIELDS)),
    ContextAttackType.CONFLICTING_CONTEXT: ((), ("statements", "tool", *SCHEDULE_FIELDS)),
    ContextAttackType.INJECTION_VIA_CONTEXT: (("payload",), SCHEDULE_FIELDS),
}
"""Type-specific context-attack fields, like :data:`INVARIANT_FIELDS`."""


class PoisonStrategy(str, enum.Enum):
    PREPEND = "prepend"
    APPEND = "append"
    REPLACE = "replace"


class MutationType(str, enum.Enum):
    PARAPHRASE = "paraphrase"
    NOISE = "noise"
    TONE_SHIFT = "tone_shift"
    PROMPT_INJECTION = "prompt_injection"
    ENCODING_ATTACKS = "encoding_attacks"
    CONTEXT_MANIPULATION = "context_manipulation"
    LENGTH_EXTREMES = "length_extremes"
    CUSTOM = "custom"
    MULTI_TURN_ATTACK = "multi_turn_attack"
    ADVANCED_JAILBREAK = "advanced_jailbreak"
    SEMANTIC_SIMILARITY_ATTACK = "semantic_similarity_attack"
    FORMAT_POISONING = "format_poisoning"
    LANGUAGE_MIXING = "language_mixing"
    TOKEN_MANIPULATION = "token_manipulation"
    TEMPORAL_ATTACK = "temporal_attack"
    HTTP_HEADER_INJECTION = "http_header_injection"
    PAYLOAD_SIZE_ATTACK = "payload_size_attack"
    CONTENT_TYPE_CONFUSION = "content_type_confusion"
    QUERY_PARAMETER_POISONING = "query_parameter_poisoning"
    REQUEST_METHOD_ATTACK = "request_method_attack"
    PROTOCOL_LEVEL_ATTACK = "protocol_level_attack"
    RESOURCE_EXHAUSTION = "resource_exhaustion"
    CONCURRENT_REQUEST_PATTERN = "concurrent_request_pattern"
    TIMEOUT_MANIPULATION = "timeout_manipulation"

    @property
    def request_level(self) -> bool:
        """Whether this mutation changes the HTTP request itself, not only the prompt."""
        return self in _REQUEST_LEVEL

    @property
    def default_weight(self) -> float:
        """The type's weight in the mutation score when ``mutations.weights`` does not set it
        (SPEC §6)."""
        return _MUTATION_WEIGHTS[self.value]


_REQUEST_LEVEL = frozenset(list(MutationType)[-9:])
_MUTATION_WEIGHTS = {
    "paraphrase": 1.0,
    "noise": 0.8,
    "tone_shift": 0.9,
    "prompt_injection": 1.5,
    "encoding_attacks": 1.3,
    "context_manipulation": 1.1,
    "length_extremes": 1.2,
    "custom": 1.0,
    "multi_turn_attack": 1.4,
    "advanced_jailbreak": 2.0,
    "semantic_similarity_attack": 1.3,
    "format_poisoning": 1.6,
    "language_mixing": 1.2,
    "token_manipulation": 1.5,
    "temporal_attack": 1.1,
    "http_header_injection": 1.7,
    "payload_size_attack": 1.4,
    "content_type_confusion": 1.5,
    "query_parameter_poisoning": 1.6,
    "request_method_attack": 1.3,
    "protocol_level_attack": 1.8,
    "resource_exhaustion": 1.5,
    "concurrent_request_pattern": 1.4,
    "timeout_manipulation": 1.3,
}


class MutationGenerator(str, enum.Enum):
    TEMPLATES = "templates"
    LLM = "llm"


class LlmFallback(str, enum.Enum):
    """What the ``llm`` generator does with a variant the model would not write."""

    TEMPLATES = "templates"


class OutputFormat(str, enum.Enum):
    JUNIT = "junit"
    MARKDOWN = "markdown"
    JSON = "json"
    HTML = "html"


class SimilarityBackend(str, enum.Enum):
    LEXICAL = "lexical"
    EMBEDDINGS = "embeddings"


class PhaseName(str, enum.Enum):
    """The pillars of SPEC §5, each scored 0–100 and weighted in the overall score."""

    MUTATION = "mutation"
    CHAOS = "chaos"
    CONTRACT = "contract"
    REPLAY = "replay"

    @property
    def section(self) -> str:
        """The config section whose presence turns the phase on."""
        return _SECTIONS[self]

    def configured(self, config: Config) -> bool:
        return getattr(config, self.section) is not None

    def weight(self, config: Config) -> float:
        """The phase's weight in the overall score (``scoring.weights``)."""
        return float(getattr(config.scoring.weights, self.value))


_SECTIONS = {
    PhaseName.MUTATION: "mutations",
    PhaseName.CHAOS: "chaos",
    PhaseName.CONTRACT: "contract",
    PhaseName.REPLAY: "replays",
}
