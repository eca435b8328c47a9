"""Meaning checks on a structurally valid :class:`~flakestorm.config.Config` (SPEC §2).

:func:`check` looks at what pydantic cannot: type-specific fields of invariants, context attacks
and faults, regexes that do not compile, duplicate ids and names, weights that do not sum to 1.0,
python references, URLs, request templates, and ``when`` values that never apply (replay
sessions are checked by :mod:`flakestorm.loader.replays`, which reads their files). It knows
nothing of files: every finding is turned into a Problem by the ``locate`` hook the loader
passes in, given the config path of the value (``("contract", "invariants", 0,
"pattern")``) and, with ``key=True``, asking for the position of the key rather than the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.modes import Fields, field_names
from flakestorm.chaos.tool_modes import TOOL_MODES
from flakestorm.config import (
    CONTEXT_ATTACK_FIELDS,
    INVARIANT_FIELDS,
    AgentType,
    Config,
    ContextAttack,
    Faults,
    Invariant,
    LlmFault,
    Scenario,
    SimilarityBackend,
    ToolFault,
    When,
)
from flakestorm.errors import Problem
from flakestorm.mutations.checks import check_mutations

ConfigPath = tuple[str | int, ...]


class Locate(Protocol):
    """Builds the Problem for ``message`` about the value (or key) at a config path."""

    def __call__(self, path: ConfigPath, message: str, key: bool = False) -> Problem: ...


# a fault's mode-specific fields are its mode unit's (besides tool, mode, probability,
# after_calls and match_url, which every fault has)
_TOOL_MODE_FIELDS = field_names(TOOL_MODES.values())
_LLM_MODE_FIELDS = field_names(LLM_MODES.values())
_INVARIANT_TYPE_FIELDS = frozenset(
    f for req, opt in INVARIANT_FIELDS.values() for f in (*req, *opt)
)
_ATTACK_TYPE_FIELDS = frozenset(
    f for req, opt in CONTEXT_ATTACK_FIELDS.values() for f in (*req, *opt)
)

WEIGHT_TOLERANCE = 1e-6
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_PATH_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]*$")
_URL = re.compile(r"^https?://[^\s/?#]+(?:[/?#]\S*)?$")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP header name (RFC 9110 token)."""
SESSION_ID = "{session_id}"
_NO_CHAOS = Scenario(name="(no chaos)")


@dataclass
class Findings:
    """What :func:`check` found: errors (the config is refused) and warnings."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def check(config: Config, locate: Locate, base_dir: Path) -> tuple[list[Problem], list[Problem]]:
    """Every semantic error and warning of ``config``; ``base_dir`` resolves ``file:`` paths."""
    checker = _Checker(config, locate, base_dir)
    checker.run()
    return checker.found.errors, checker.found.warnings


def _fields_set(model: Any) -> set[str]:
    """The fields explicitly given a non-null value, by their YAML names."""
    out = set()
    for name in model.model_fields_set:
        if getattr(model, name) is not None:
            out.add("schema" if name == "json_schema" else name)
    return out


def _list(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names) if names else "none"


class _Checker:
    def __init__(self, config: Config, locate: Locate, base_dir: Path) -> None:
        self.config = config
        self.locate = locate
        self.base_dir = base_dir
        self.found = Findings()

    def error(self, path: ConfigPath, message: str, key: bool = False) -> None:
        self.found.errors.append(self.locate(path, message, key))

    def warn(self, path: ConfigPath, message: str, key: bool = False) -> None:
        self.found.warnings.append(self.locate(path, message, key))

    def run(self) -> None:
        self.agent()
        for i, inv in enumerate(self.config.invariants):
            self.invariant(("invariants", i), inv)
        self.contract()
        if self.config.chaos is not None:
            self.faults(("chaos",), self.config.chaos)
        self.tool_delivery()
        self.prompts()
        self.mutations()
        self.proxy()
        self.scoring()
        self.advanced()
        self.when_warnings()

    # ------------------------------------------------------------------- agent

    def agent(self) -> None:
        agent = self.config.agent
        at = ("agent",)
        if agent.type is AgentType.PYTHON:
            if not _REFERENCE.match(agent.endpoint):
                self.error(
                    (*at, "endpoint"),
                    f"{agent.endpoint!r} is not a python reference for a python agent "
                    "(expected module:attr, e.g. myagent:handle)",
                )
            for name in ("reset_endpoint", "health_endpoint", "start"):
                if getattr(agent, name) is not None:
                    self.error(
                        (*at, name),
                        f"'{name}' applies to http agents only (this agent is type: python)",
                        key=True,
                    )
        else:
            if not _URL.match(agent.endpoint):
                hint = (
                    " (for a python callable write type: python)"
                    if _REFERENCE.match(agent.endpoint)
                    else ""
                )
                self.error(
                    (*at, "endpoint"),
                    f"{agent.endpoint!r} is not an http(s) URL{hint}",
                )
            for name in ("reset_function", "tools", "tool_registry", "llm"):
                if getattr(agent, name) is not None:
                    self.error(
                        (*at, name),
                        f"'{name}' applies to python agents only (write type: python, or "
                        "route an http agent's traffic through the proxy)",
                        key=True,
                    )
            if agent.health_endpoint is not None and not (
                _URL.match(agent.health_endpoint) or agent.health_endpoint.startswith("/")
            ):
                self.error(
                    (*at, "health_endpoint"),
                    f"{agent.health_endpoint!r} is not an http(s) URL or a path like /health",
                )
        if agent.response_path is not None and agent.response_path.startswith("$"):
            self.error(
                (*at, "response_path"),
                f"JSONPath is not supported; write the dotted path "
                f"{_dotted(agent.response_path)!r}",
            )
        self.request_template()
        self.session()

    def session(self) -> None:
        agent = self.config.agent
        session = agent.session
        at: ConfigPath = ("agent", "session")
        if session is None:
            return
        if agent.type is AgentType.PYTHON:
            self.error(
                at, "'session' applies to http agents only (this agent is type: python)", True
            )
            return
        if (session.header is None) == (not session.template):
            self.error(
                at,
                "give exactly one of `header: NAME` (the session id in that request header) "
                "and `template: true` (the session id fills {session_id} in request_template)",
            )
            return
        if session.header is not None and not _TOKEN.fullmatch(session.header):
            self.error((*at, "header"), f"{session.header!r} is not an HTTP header name")
        if session.template and not any(SESSION_ID in s for s in _strings(agent.request_template)):
            self.error(
                (*at, "template"),
                "request_template does not contain {session_id}, so the session id would "
                'never be sent (e.g. {"input": "{prompt}", "session": "{session_id}"})',
            )
        for name in ("reset_endpoint", "reset_function"):
            if getattr(agent, name) is not None:
                self.warn(
                    ("agent", name),
                    f"is not called: agent.session gives each cell its own conversation, so "
                    f"cells need no reset (remove {name}, or the session, to choose)",
                )

    def request_template(self) -> None:
        template = self.config.agent.request_template
        at: ConfigPath = ("agent", "request_template")
        if "request_template" not in self.config.agent.model_fields_set:
            return
        if isinstance(template, str):
            if "{prompt}" not in template:
                self.error(at, "does not contain {prompt}, so the prompt would never be sent")
                return
            body = template.replace('"{prompt}"', '"p"').replace("{prompt}", '"p"')
            try:
                json.loads(body)
            except json.JSONDecodeError as exc:
                self.error(
                    at,
                    f"is not valid JSON once {{prompt}} is substituted ({exc.msg} at line "
                    f"{exc.lineno}, column {exc.colno})",
                )
        elif not any("{prompt}" in s for s in _strings(template)):
            self.error(at, "does not contain {prompt}, so the prompt would never be sent")

    # ------------------------------------------------------------------- invariants

    def invariant(self, at: ConfigPath, inv: Invariant) -> None:
        required, optional = INVARIANT_FIELDS[inv.type]
        given = _fields_set(inv)
        kind = inv.type.value
        for name in required:
            if name not in given:
                self.error(
                    at,
                    f"{_a(kind)} invariant needs '{name}' (its fields: "
                    f"{_list((*required, *optional))})",
                )
        for name in sorted(given & _INVARIANT_TYPE_FIELDS - {*required, *optional}):
            self.error(
                (*at, name),
                f"'{name}' does not apply to {_a(kind)} invariant (its fields: "
                f"{_list((*required, *optional))})",
                key=True,
            )
        if inv.pattern is not None:
            self.regex((*at, "pattern"), inv.pattern)
        for i, pattern in enumerate(inv.patterns or ()):
            self.regex((*at, "patterns", i), pattern)

    def regex(self, at: ConfigPath, pattern: str) -> None:
        try:
            re.compile(pattern)
        except re.error as exc:
            where = f" at position {exc.pos}" if exc.pos is not None else ""
            self.error(at, f"regex {pattern!r} does not compile: {exc.msg}{where}")
        except (RecursionError, OverflowError, ValueError):
            self.error(at, f"regex {pattern!r} does not compile")

    # ------------------------------------------------------------------- contract

    def contract(self) -> None:
        contract = self.config.contract
        if contract is None:
            return
        at: ConfigPath = ("contract",)
        seen: dict[str, int] = {}
        for i, inv in enumerate(contract.invariants):
            self.invariant((*at, "invariants", i), inv)
            if inv.id in seen:
                self.error(
                    (*at, "invariants", i, "id"),
                    f"duplicate invariant id {inv.id!r} (also invariants[{seen[inv.id]}]; "
                    "ids must be unique within the contract)",
                )
            else:
                seen[inv.id] = i
        names: dict[str, int] = {}
        for i, scenario in enumerate(contract.chaos_matrix):
            where = (*at, "chaos_matrix", i)
            self.faults(where, scenario)
            if scenario.name in names:
                self.error(
                    (*where, "name"),
                    f"duplicate scenario name {scenario.name!r} (also "
                    f"chaos_matrix[{names[scenario.name]}]; names must be unique)",
                )
            else:
                names[scenario.name] = i

    # ------------------------------------------------------------------- faults

    def faults(self, at: ConfigPath, faults: Faults) -> None:
        for i, tool_fault in enumerate(faults.tool_faults):
            self.tool_fault((*at, "tool_faults", i), tool_fault)
        for i, llm_fault in enumerate(faults.llm_faults):
            self.llm_fault((*at, "llm_faults", i), llm_fault)
        for i, attack in enumerate(faults.context_attacks):
            self.attack((*at, "context_attacks", i), attack)

    def mode_fields(
        self,
        at: ConfigPath,
        what: str,
        mode: str,
        given: set[str],
        fields: Fields,
        mode_fields: frozenset[str],
    ) -> None:
        required, optional = fields.required, fields.optional
        for name in required:
            if name not in given:
                self.error(at, f"{_a(mode)} {what} needs '{name}'")
        for name in sorted(given & mode_fields - {*required, *optional}):
            self.error(
                (*at, name),
                f"'{name}' means nothing for {_a(mode)} {what} (its fields: "
                f"{_list((*required, *optional))})",
                key=True,
            )

    def tool_fault(self, at: ConfigPath, fault: ToolFault) -> None:
        fields = TOOL_MODES[fault.mode].fields
        given = _fields_set(fault)
        self.mode_fields(at, "tool fault", fault.mode.value, given, fields, _TOOL_MODE_FIELDS)

    def llm_fault(self, at: ConfigPath, fault: LlmFault) -> None:
        fields = LLM_MODES[fault.mode].fields
        given = _fields_set(fault)
        self.mode_fields(at, "LLM fault", fault.mode.value, given, fields, _LLM_MODE_FIELDS)

    def attack(self, at: ConfigPath, attack: ContextAttack) -> None:
        required, optional = CONTEXT_ATTACK_FIELDS[attack.type]
        given = _fields_set(attack)
        kind = attack.type.value
        for name in required:
            if name not in given:
                self.error(
                    at,
                    f"{_a(kind)} context attack needs '{name}' (its fields: "
                    f"{_list((*required, *optional))})",
                )
        for name in sorted(given & _ATTACK_TYPE_FIELDS - {*required, *optional}):
            self.error(
                (*at, name),
                f"'{name}' does not apply to {_a(kind)} context attack (its fields: "
                f"{_list((*required, *optional))})",
                key=True,
            )

    def scenarios(self) -> Iterator[tuple[ConfigPath, Faults]]:
        if self.config.contract is not None:
            for i, scenario in enumerate(self.config.contract.chaos_matrix):
                yield ("contract", "chaos_matrix", i), scenario
        if self.config.chaos is not None:
            yield ("chaos",), self.config.chaos

    def tool_delivery(self) -> None:
        agent = self.config.agent
        if agent.type is not AgentType.PYTHON or agent.tools or agent.tool_registry:
            return
        for at, faults in self.scenarios():
            if faults.tool_faults:
                name = f"scenario {faults.name!r}" if isinstance(faults, Scenario) else "chaos"
                self.error(
                    (*at, "tool_faults"),
                    f"{name} has tool faults but the python agent names no tools: set "
                    "agent.tools (module:attr of each tool) or agent.tool_registry",
                    key=True,
                )

    # ------------------------------------------------------------------- prompts

    def prompts(self) -> None:
        if self.config.golden_prompts:
            return
        needs = []
        if self.config.mutations is not None:
            needs.append("mutations")
        if self.config.chaos is not None:
            needs.append("chaos")
        contract = self.config.contract
        if contract is not None and not all(inv.probes for inv in contract.invariants):
            needs.append("contract (not every invariant has probes)")
        if needs:
            self.error(
                ("golden_prompts",),
                f"at least one golden prompt is required by {', '.join(needs)}",
                key=True,
            )

    # ------------------------------------------------------------------- mutations

    def mutations(self) -> None:
        for found in check_mutations(self.config):
            (self.warn if found.warning else self.error)(found.path, found.message, found.key)

    # ------------------------------------------------------------------- proxy

    def proxy(self) -> None:
        proxy = self.config.proxy
        if proxy is None:
            return
        at: ConfigPath = ("proxy",)
        if proxy.url is not None and not _URL.match(proxy.url):
            self.error((*at, "url"), f"{proxy.url!r} is not an http(s) URL")
        upstream = proxy.llm_upstream
        if (
            upstream is not None
            and upstream != "mock"
            and not upstream.startswith("cassette:")
            and not _URL.match(upstream)
        ):
            self.error(
                (*at, "llm_upstream"),
                f"{upstream!r} is not valid (expected an http(s) URL, 'mock' or 'cassette:PATH')",
            )
        if upstream is not None and upstream.startswith("cassette:") and upstream == "cassette:":
            self.error((*at, "llm_upstream"), "'cassette:' needs a path (cassette:PATH)")
        for name, url in proxy.tools.items():
            if not _PATH_SEGMENT.match(name) or name.startswith("_flakestorm"):
                self.error(
                    (*at, "tools", name),
                    f"tool name {name!r} cannot be a URL path segment (use letters, digits, "
                    "'.', '_', '~', '-'; not starting with '_flakestorm')",
                    key=True,
                )
            if not _URL.match(url):
                self.error((*at, "tools", name), f"{url!r} is not an http(s) URL")

    # ------------------------------------------------------------------- scoring

    def scoring(self) -> None:
        weights = self.config.scoring.weights.as_dict()
        total = sum(weights.values())
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            terms = " + ".join(f"{k} {v:g}" for k, v in weights.items())
            self.error(
                ("scoring", "weights"),
                f"weights must sum to 1.0, got {total:g} ({terms})",
            )

    def advanced(self) -> None:
        advanced = self.config.advanced
        if advanced.min_pass is not None and advanced.min_pass > advanced.repeat:
            self.error(
                ("advanced", "min_pass"),
                f"min_pass ({advanced.min_pass}) cannot exceed repeat ({advanced.repeat})",
            )
        if advanced.similarity is SimilarityBackend.EMBEDDINGS and advanced.embeddings is None:
            self.error(
                ("advanced", "similarity"),
                "the embeddings backend needs advanced.embeddings {base_url, model, api_key}",
            )

    # ------------------------------------------------------------------- when

    def when_warnings(self) -> None:
        contract = self.config.contract
        if contract is not None:
            for i, cinv in enumerate(contract.invariants):
                self.when(("contract", "invariants", i), cinv, contract.chaos_matrix, "contract")

        if self.config.invariants:
            phases: list[Scenario] = []
            if self.config.mutations is not None:
                phases.append(_NO_CHAOS)
            if self.config.chaos is not None:
                chaos = self.config.chaos
                phases.append(
                    Scenario(
                        name="chaos",
                        tool_faults=chaos.tool_faults,
                        llm_faults=chaos.llm_faults,
                        context_attacks=chaos.context_attacks,
                    )
                )
            if phases:
                for i, inv in enumerate(self.config.invariants):
                    self.when(("invariants", i), inv, phases, "mutation or chaos phase")

    def when(
        self, at: ConfigPath, inv: Invariant, scenarios: Sequence[Scenario], where: str
    ) -> None:
        if inv.when is When.ALWAYS or any(inv.when.applies(s) for s in scenarios):
            return
        self.warn(
            (*at, "when"),
            f"'{inv.when.value}' applies to no scenario of the {where}, so this invariant is "
            "never checked",
        )


def _a(word: str) -> str:
    """``'regex'`` -> ``a 'regex'``; ``'overflow'`` -> ``an 'overflow'``."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} '{word}'"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _dotted(jsonpath: str) -> str:
    """``$.choices[0].message.content`` -> ``choices.0.message.content``."""
    text = jsonpath.lstrip("$").lstrip(".")
    text = re.sub(r"\[(\d+)\]", r".\1", text)
    text = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", text)
    return text.lstrip(".")
