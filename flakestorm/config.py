"""The flakestorm.yaml v2 model (SPEC §2): pydantic, ``extra="forbid"``, data only.

Structure is checked here; meaning (a ``regex`` invariant needs ``pattern``, ids are unique,
weights sum to 1.0, ...) is checked by :mod:`flakestorm.semantics`, which reports every problem
with its place in the file. Closed vocabularies are enums; the ones that carry behaviour
(``Severity.weight``, ``When.applies``) carry it here.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

DEFAULT_SEED = 20_000_605
"""The seed used when ``advanced.seed`` is not given, so that runs are reproducible by default."""

DEFAULT_WEIGHTS = {"mutation": 0.20, "chaos": 0.35, "contract": 0.35, "replay": 0.10}


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values are immutable, and a
    boolean is not a number nor a number a boolean (:func:`strict_scalar`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("*", mode="before", check_fields=False)
    @classmethod
    def _strict_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        return value if field is None else strict_scalar(field.annotation, value)


def strict_scalar(annotation: Any, value: Any) -> Any:
    """``value`` for a field of type ``annotation``, refused when it is a boolean where only
    numbers are valid (``timeout: true``, ``repeat: yes``) or a number where only booleans are
    (``case_sensitive: 1``); also inside lists and mappings. Pydantic's lax mode would take
    ``true`` as 1 and ``1`` as true. A YAML integer stays valid for a float field, and text
    (``${VAR}``) is left to the field's own parsing."""
    kinds = _kinds(annotation)
    if isinstance(value, bool):
        if bool not in kinds and kinds & {int, float}:
            kind = "int_type" if int in kinds else "float_type"
            raise PydanticCustomError(kind, "a boolean is not a number")
    elif isinstance(value, (int, float)):
        if bool in kinds and not kinds & {int, float, str}:
            raise PydanticCustomError("bool_type", "a number is not a boolean")
    elif isinstance(value, list):
        item = _item_type(annotation, list)
        if item is not None:
            for element in value:
                strict_scalar(item, element)
    elif isinstance(value, dict):
        item = _item_type(annotation, dict)
        if item is not None:
            for element in value.values():
                strict_scalar(item, element)
    return value


def _unwrap(annotation: Any) -> list[Any]:
    """The plain types ``annotation`` may be: Annotated and unions (Optional) unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg)]
    return [annotation]


def _kinds(annotation: Any) -> set[Any]:
    return {t for t in _unwrap(annotation) if t in (bool, int, float, str)}


def _item_type(annotation: Any, container: type) -> Any:
    """The element type of a ``list[T]`` (or the value type of a ``dict[K, V]``) in
    ``annotation``, if it has one."""
    for option in _unwrap(annotation):
        if typing.get_origin(option) is container:
            args = typing.get_args(option)
            return args[-1] if args else None
    return None


# --------------------------------------------------------------------------- vocabularies


class AgentType(str, enum.Enum):
    HTTP = "http"
    PYTHON = "python"


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
}
"""Type-specific invariant fields. A type field set on an invariant of another type is an error."""


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


class LlmFaultMode(str, enum.Enum):
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    TRUNCATED_RESPONSE = "truncated_response"
    EMPTY = "empty"
    GARBAGE = "garbage"
    RESPONSE_DRIFT = "response_drift"


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


CONTEXT_ATTACK_FIELDS: dict[ContextAttackType, tuple[tuple[str, ...], tuple[str, ...]]] = {
    ContextAttackType.MEMORY_POISONING: (("payload",), ("strategy",)),
    ContextAttackType.INDIRECT_INJECTION: (("payloads",), ("trigger_probability", "tool")),
    ContextAttackType.OVERFLOW: (("inject_tokens",), ("tool",)),
    ContextAttackType.CONFLICTING_CONTEXT: ((), ("statements", "tool")),
    ContextAttackType.INJECTION_VIA_CONTEXT: (("payload",), ()),
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


class OutputFormat(str, enum.Enum):
    JUNIT = "junit"
    MARKDOWN = "markdown"
    JSON = "json"
    HTML = "html"


class SimilarityBackend(str, enum.Enum):
    LEXICAL = "lexical"
    EMBEDDINGS = "embeddings"


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
    tools: list[Callable_] | None = None
    tool_registry: Callable_ | None = None
    llm: Callable_ | None = None


# --------------------------------------------------------------------------- invariants


class Invariant(Model):
    id: str | None = Field(default=None, min_length=1)
    type: InvariantType
    severity: Severity = Severity.MEDIUM
    when: When = When.ALWAYS
    negate: bool = False
    description: str | None = None
    probes: list[str] | None = Field(default=None, min_length=1)
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

    @property
    def effective_threshold(self) -> float:
        """The similarity threshold for ``similarity`` / ``behavior_unchanged``."""
        if self.type is InvariantType.SIMILARITY:
            return self.threshold if self.threshold is not None else 0.75
        return self.similarity_threshold if self.similarity_threshold is not None else 0.75


class ContractInvariant(Invariant):
    id: str = Field(min_length=1)


# --------------------------------------------------------------------------- faults


class FaultTrigger(Model):
    """Fields every fault shares: how often and from which call on it fires."""

    probability: Probability = 1.0
    after_calls: Annotated[int, Field(ge=0)] = 0
    delay_ms: Annotated[int, Field(ge=0)] | None = None


class ToolFault(FaultTrigger):
    tool: str = Field(min_length=1)
    mode: ToolFaultMode
    error_code: Annotated[int, Field(ge=100, le=599)] = 503
    message: str | None = None
    payload: str | dict[str, Any] | list[Any] | None = None
    match_url: str | None = None


class LlmFault(FaultTrigger):
    mode: LlmFaultMode
    max_tokens: Annotated[int, Field(ge=0)] | None = None
    drift_type: DriftType | None = None


class ContextAttack(Model):
    type: ContextAttackType
    payload: str | None = None
    strategy: PoisonStrategy | None = None
    payloads: list[str] | None = Field(default=None, min_length=1)
    trigger_probability: Probability | None = None
    inject_tokens: Annotated[int, Field(gt=0, le=1_000_000)] | None = None
    statements: list[str] | None = Field(default=None, min_length=1)
    tool: str | None = None


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


_FAULT_LISTS = ("tool_faults", "llm_faults", "context_attacks")


class Scenario(Faults):
    name: str = Field(min_length=1)


class Contract(Model):
    name: str = Field(min_length=1)
    description: str | None = None
    invariants: list[ContractInvariant] = Field(min_length=1)
    chaos_matrix: list[Scenario] = Field(min_length=1)


class Chaos(Faults):
    """Top-level chaos for the chaos-only phase and ``flakestorm run --chaos``."""


# --------------------------------------------------------------------------- proxy


class Proxy(Model):
    url: str | None = None
    llm_upstream: str | None = None
    tools: dict[str, str] = {}
    token: str | None = None


# --------------------------------------------------------------------------- mutations


class LlmEndpoint(Model):
    """An OpenAI-compatible API (chat completions or embeddings)."""

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key: str | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    """Sampling temperature of the chat completions (the ``llm`` mutation generator)."""


MAX_TYPE_WEIGHT = 1000.0
"""The largest weight ``mutations.weights`` accepts: an infinite weight made the mutation
score NaN (``0 × inf / inf``), which passes any ``min_score``."""


class Mutations(Model):
    count: Annotated[int, Field(ge=1, le=50)] = 10
    types: list[MutationType] = Field(default_factory=lambda: list(MutationType), min_length=1)
    weights: dict[MutationType, Annotated[float, Field(ge=0.0, le=MAX_TYPE_WEIGHT)]] = {}
    """Per type, relative to the defaults (0.8–2.0); bounded so the score stays a number."""
    generator: MutationGenerator = MutationGenerator.TEMPLATES
    llm: LlmEndpoint | None = None
    templates: list[str] | None = Field(default=None, min_length=1)
    """Templates for the ``custom`` type; each holds ``{prompt}``."""
    cache_dir: str = ".flakestorm-cache"
    """Where the ``llm`` generator keeps its answers (relative to the config file)."""

    def weight(self, kind: MutationType) -> float:
        """``kind``'s weight in the mutation score: ``weights``, else its default."""
        return self.weights.get(kind, kind.default_weight)


# --------------------------------------------------------------------------- replays


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


# --------------------------------------------------------------------------- scoring etc.


class Weights(Model):
    mutation: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["mutation"]
    chaos: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["chaos"]
    contract: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["contract"]
    replay: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_WEIGHTS["replay"]

    def as_dict(self) -> dict[str, float]:
        return {
            "mutation": self.mutation,
            "chaos": self.chaos,
            "contract": self.contract,
            "replay": self.replay,
        }


LEGACY_WEIGHT_KEYS = ("mutation", "chaos", "contract", "replay")


class Scoring(Model):
    weights: Weights = Weights()
    min_score: Annotated[float, Field(ge=0.0, le=100.0)] = 0.0
    legacy_form: bool = Field(default=False, exclude=True)
    """Set by the loader when the flat ``scoring.mutation: 0.2`` form was used (warned)."""

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        if isinstance(data, dict):
            flat = {k: data[k] for k in LEGACY_WEIGHT_KEYS if k in data}
            if flat and "weights" not in data:
                rest = {k: v for k, v in data.items() if k not in LEGACY_WEIGHT_KEYS}
                return {**rest, "weights": flat, "legacy_form": True}
        return data


class Output(Model):
    dir: str = "flakestorm-reports"
    formats: list[OutputFormat] = Field(default_factory=lambda: list(OutputFormat))


class Advanced(Model):
    seed: int = DEFAULT_SEED
    concurrency: Annotated[int, Field(ge=1, le=256)] = 4
    repeat: Annotated[int, Field(ge=1, le=100)] = 1
    min_pass: Annotated[int, Field(ge=1)] | None = None
    max_invocations: Annotated[int, Field(ge=1)] | None = None
    similarity: SimilarityBackend = SimilarityBackend.LEXICAL
    embeddings: LlmEndpoint | None = None

    @property
    def effective_min_pass(self) -> int:
        return self.min_pass if self.min_pass is not None else self.repeat


# --------------------------------------------------------------------------- root


class Config(Model):
    version: Literal["2.0", "1.0"] = "2.0"
    agent: AgentConfig
    golden_prompts: list[str] = []
    invariants: list[Invariant] = []
    contract: Contract | None = None
    chaos: Chaos | None = None
    proxy: Proxy | None = None
    mutations: Mutations | None = None
    replays: Replays | None = None
    scoring: Scoring = Scoring()
    output: Output = Output()
    advanced: Advanced = Advanced()

    @model_validator(mode="before")
    @classmethod
    def _version_as_text(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            return {**data, "version": version_text(data["version"])}
        return data


def version_text(version: Any) -> Any:
    """``version: 2.0`` (a YAML float) means the same as ``version: "2.0"``."""
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        return f"{float(version):.1f}"
    return version
