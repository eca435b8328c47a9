"""What the loader knows of earlier config formats: warnings, refusals and pointers.

- flakestorm 1.x configs (``version: "1.0"``) are read as 2.0, with a warning;
- the flat scoring form (``scoring: {mutation: 0.1, ...}``) is read, with a warning, and
  refused when ``weights:`` is set too (:func:`precheck`, before pydantic, which would only
  see the flat keys it then cannot place; :func:`prepare` hides them from it);
- keys and values of the public flakestorm 1.x / 2.0.0 format that this version does not read
  are refused with what to write instead (:data:`UPSTREAM_KEYS`, :data:`UPSTREAM_VALUES`);
  a number the models' bounds would only call out of range (a recorded tool response's
  ``status: 0``, :data:`UPSTREAM_NUMBERS`) is reported by :func:`precheck`.

Each of these messages also names ``flakestorm migrate`` (:data:`MIGRATE`), which rewrites such
a config (:mod:`flakestorm.authoring.migrate`, whose notes reuse the hints). A session's
``source`` (2.0.0 metadata) is not among them: the model accepts it. Keys 2.0.0 took and never
acted on that ask for behaviour are (a context attack's ``inject_at``, an LLM fault's
``severity``): accepted, they would promise what no version did.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from flakestorm.config import (
    LEGACY_WEIGHT_KEYS,
    AgentConfig,
    Config,
    ContextAttack,
    ContractInvariant,
    Invariant,
    LangsmithSource,
    LlmFault,
    Mutations,
    Output,
    Scoring,
    Session,
    ToolResponse,
)
from flakestorm.config import Advanced as AdvancedSection
from flakestorm.errors import Problem
from flakestorm.loader.locations import Locator
from flakestorm.structure import Hints
from flakestorm.structure.paths import ConfigPath
from flakestorm.structure.wording import MIGRATE as MIGRATE
from flakestorm.structure.wording import unknown_key_message

SCORING_KEYS = ("weights", "min_score")
"""The keys ``scoring:`` offers (``legacy_form`` is the model's, not the user's)."""


def precheck(data: Any, where: Locator) -> list[Problem]:
    """Problems of the scoring section and upstream numbers that pydantic would misreport."""
    problems: list[Problem] = []
    if not isinstance(data, dict):
        return problems
    problems += status_problems(_upstream_statuses(data), where)
    scoring = data.get("scoring")
    if isinstance(scoring, dict):
        if "legacy_form" in scoring:
            problems.append(
                where.at(
                    ("scoring", "legacy_form"),
                    unknown_key_message("legacy_form", SCORING_KEYS),
                    key=True,
                )
            )
        flat = [k for k in LEGACY_WEIGHT_KEYS if k in scoring]
        if flat and "weights" in scoring:
            problems.append(
                where.at(
                    ("scoring", flat[0]),
                    f"both the flat form ({', '.join(flat)}) and 'weights' are set; "
                    "keep only 'weights:' (mutation, chaos, contract, replay)" + MIGRATE,
                    key=True,
                )
            )
    return problems


def prepare(data: Any) -> Any:
    """Remove what :func:`precheck` reported so pydantic does not report it again."""
    if not isinstance(data, dict):
        return data
    scoring = data.get("scoring")
    if isinstance(scoring, dict):
        scoring = {k: v for k, v in scoring.items() if k != "legacy_form"}
        if "weights" in scoring:
            scoring = {k: v for k, v in scoring.items() if k not in LEGACY_WEIGHT_KEYS}
        data = {**data, "scoring": scoring}
    return _statuses_replaced(data)


UPSTREAM_ERROR_STATUS = 0
"""The ``status`` flakestorm 2.0.0 recorded for a tool call that errored (its
``ReplayToolResponseConfig``: "HTTP status or 0 for error"; its LangSmith import wrote it for
every tool run with an error)."""
ERRORED_STATUS = 500
"""What a session records for it today (as ``flakestorm replay import langsmith`` does)."""


def _upstream_status(response: Any) -> bool:
    status = response.get("status") if isinstance(response, dict) else None
    return type(status) is int and status == UPSTREAM_ERROR_STATUS


def _inline_sessions(data: dict[str, Any]) -> list[Any]:
    """``replays.sessions`` of a config (2.0.0 had no conversations: no ``turns``)."""
    replays = data.get("replays")
    sessions = replays.get("sessions") if isinstance(replays, dict) else None
    return sessions if isinstance(sessions, list) else []


def session_statuses(session: Any) -> tuple[Any, list[ConfigPath]]:
    """A session's tool responses with ``status: 0`` (their paths within it), and the session
    with them read as an error status, so pydantic does not report them again (an inline
    session of the config, or one of a session file)."""
    responses = session.get("tool_responses") if isinstance(session, dict) else None
    if not isinstance(responses, list):
        return session, []
    paths: list[ConfigPath] = [
        ("tool_responses", j) for j, r in enumerate(responses) if _upstream_status(r)
    ]
    if not paths:
        return session, []
    fixed = [{**r, "status": ERRORED_STATUS} if _upstream_status(r) else r for r in responses]
    return {**session, "tool_responses": fixed}, paths


def status_problems(paths: list[ConfigPath], where: Locator) -> list[Problem]:
    """The located error of each ``status: 0`` at ``paths`` (each a tool response's)."""
    hint = UPSTREAM_NUMBERS[(ToolResponse, "status", UPSTREAM_ERROR_STATUS)]
    return [where.at((*path, "status"), hint + MIGRATE) for path in paths]


def _upstream_statuses(data: dict[str, Any]) -> list[ConfigPath]:
    """The paths of the inline sessions' tool responses with ``status: 0``."""
    return [
        ("replays", "sessions", i, *path)
        for i, session in enumerate(_inline_sessions(data))
        for path in session_statuses(session)[1]
    ]


def _statuses_replaced(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each ``status: 0`` :func:`precheck` reported read as an error status."""
    if not _upstream_statuses(data):
        return data
    sessions = [session_statuses(session)[0] for session in _inline_sessions(data)]
    return {**data, "replays": {**data["replays"], "sessions": sessions}}


def version_warnings(version: str | None, scoring: Scoring | None, where: Locator) -> list[Problem]:
    """Warnings for a 1.0 config and for the flat scoring form (None: the part is invalid)."""
    out = []
    if version == "1.0":
        out.append(
            where.at(
                ("version",),
                "version 1.0 configs are read as 2.0: chaos, contract, replays and "
                "scoring.weights are available, 'model:' is replaced by mutations.llm and "
                "output uses 'dir' and 'formats' (write version: \"2.0\")" + MIGRATE,
            )
        )
    if scoring is not None and scoring.legacy_form:
        w = scoring.weights
        out.append(
            where.at(
                ("scoring",),
                "the flat scoring form is deprecated; write scoring: weights: {mutation: "
                f"{w.mutation:g}, chaos: {w.chaos:g}, contract: {w.contract:g}, "
                f"replay: {w.replay:g}}}" + MIGRATE,
            )
        )
    return out


UPSTREAM_KEYS: dict[tuple[type[BaseModel], str], str] = {
    (Config, "model"): (
        "the 'model' section is not read any more: configure the mutation LLM under "
        "mutations.llm {base_url, model, api_key} and set mutations.generator: llm "
        "(any OpenAI-compatible API; Ollama serves one at http://localhost:11434/v1)"
    ),
    (Config, "chaos_matrix"): (
        "the chaos matrix is the contract's: write its scenarios under contract.chaos_matrix"
    ),
    (Output, "format"): "use 'formats:' with a list of junit, markdown, json, html",
    (Output, "path"): "use 'dir:' for the report directory",
    (Output, "filename_template"): "report file names are fixed; remove 'filename_template'",
    (AdvancedSection, "retries"): (
        "invocations are not retried; for a flaky agent use advanced.repeat and advanced.min_pass"
    ),
    (AgentConfig, "query_params"): "put query parameters in agent.endpoint itself",
    (AgentConfig, "parse_structured_input"): (
        "structured golden prompts are not parsed; request_template substitutes {prompt} only"
    ),
    (Mutations, "custom_templates"): (
        "use 'templates:' (a list of strings, each containing {prompt}) and add 'custom' "
        "to mutations.types"
    ),
    (Invariant, "dangerous_prompts"): (
        "use 'expect: refuse' (or 'expect: comply') on a refusal_check invariant"
    ),
    (ContractInvariant, "dangerous_prompts"): (
        "use 'expect: refuse' (or 'expect: comply') on a refusal_check invariant"
    ),
    (LlmFault, "severity"): (
        "how far a response_drift changes a reply is not set ('drift_type' says how); "
        "severity is an invariant's field"
    ),
    (LlmFault, "direction"): (
        "verbosity_shift makes a reply much shorter or much longer, drawn with the run's seed"
    ),
    (LlmFault, "factor"): (
        "how much verbosity_shift changes a reply is not set (much shorter or much longer, "
        "drawn with the run's seed)"
    ),
    (ContextAttack, "inject_at"): (
        "where an attack acts follows from its type: memory_poisoning changes the agent's "
        "input ('strategy': prepend, append or replace), the others tool results or LLM requests"
    ),
    (Session, "captured_at"): "remove 'captured_at' (when the session was recorded is not read)",
    (LangsmithSource, "filter"): (
        "LangSmith filters are not supported; give 'project' or 'run_id' (and 'contract')"
    ),
    (LangsmithSource, "auto_import"): (
        "remove 'auto_import': LangSmith sources are imported on every run"
    ),
}
"""Upstream keys this version does not read -> what to write instead (by the model they are in)."""

MOVED_HERE: dict[tuple[str, str], str] = {
    ("contract", "missing required field 'chaos_matrix'"): "chaos_matrix",
}
"""A problem (path, message) that an earlier format's key at the top says already: 2.0.0's
top-level ``chaos_matrix`` is the contract's missing one, and its own message says where it
goes, so the contract's "missing" is not said a second time."""


UPSTREAM_VALUES: dict[tuple[type[BaseModel], str, str], str] = {
    (AgentConfig, "type", "langchain"): (
        "'langchain' is not supported: use type: python with endpoint "
        "'module:attr' of a function that invokes the chain"
    ),
    (LangsmithSource, "type", "langsmith_run"): (
        "'langsmith_run' is not supported: use type: langsmith with run_id: <the run id>"
    ),
}
"""Upstream values this version refuses -> the whole message (by model, field and value)."""

UPSTREAM_NUMBERS: dict[tuple[type[BaseModel], str, int], str] = {
    (ToolResponse, "status", UPSTREAM_ERROR_STATUS): (
        f"{UPSTREAM_ERROR_STATUS} is how flakestorm 2.0.0 recorded a tool call that errored: "
        f"write status: {ERRORED_STATUS} (a status outside 2xx is served as an error)"
    ),
}
"""Upstream numbers this version refuses -> the whole message (:func:`precheck` reports them
in a config's inline sessions)."""


NULL_STATUS = "2.0.0 wrote null when it recorded no status; 200 is served"
NULL_LATENCY = "2.0.0 wrote null when it recorded no latency; the response is served at once"
NULL_SEED = "runs use a fixed default seed; 1.x drew a new one for each run"
UPSTREAM_NULLS: dict[tuple[type[BaseModel], str], str] = {
    (ToolResponse, "status"): NULL_STATUS,
    (ToolResponse, "latency_ms"): NULL_LATENCY,
    (AdvancedSection, "seed"): NULL_SEED,
}
"""Fields earlier formats wrote ``null`` in -> what that null meant (remove the key): the
loader's message and ``flakestorm migrate``'s note alike."""


UNMIGRATED: frozenset[tuple[type[BaseModel], str, str]] = frozenset(
    {(AgentConfig, "type", "langchain")}
)
"""What ``flakestorm migrate`` cannot write for the user (it needs their code): left as is."""


def _migrate_says(key: tuple[type[BaseModel], str, str], hint: str) -> str:
    if key in UNMIGRATED:
        return f"{hint}; `flakestorm migrate` rewrites the rest of a 1.x / 2.0.0 config, not this"
    return hint + MIGRATE


LEGACY_HINTS = Hints(
    keys={key: hint + MIGRATE for key, hint in UPSTREAM_KEYS.items()},
    values={key: _migrate_says(key, hint) for key, hint in UPSTREAM_VALUES.items()},
    nulls={
        key: f"null is not read here: remove the key ({why})" + MIGRATE
        for key, why in UPSTREAM_NULLS.items()
    },
)
"""How :func:`~flakestorm.structure.validate_model` words keys and values of older formats."""
