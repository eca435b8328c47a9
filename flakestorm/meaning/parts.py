"""The parts of a config, each validated on its own (SPEC §2: every problem in one pass).

A file whose structure is wrong in one place is still right in others, and the meaning checks
must see those. :class:`Parts` holds each section of the file, and each item of the lists users
write many of (the top-level invariants, the contract's invariants and scenarios), as a model
validated alone — or marks it *failed* when it does not validate; the loader reports why, from
the validation of the whole document. Each fault of a scenario (or of the chaos section) is
validated alone too (:class:`FaultSet`), whether its scenario validated or not. A check
(:mod:`flakestorm.meaning.registry`) declares the parts it reads and runs when none of them
failed; a check over items looks at the items that validated.

Part names: each section of :class:`~flakestorm.config.Config` by its key (``agent``,
``scoring``, ``contract`` as a whole, …); ``contract.name``, ``contract.invariants`` and
``contract.chaos_matrix`` for the contract's pieces (a list part fails when it is not a
list); and ``invariants[*]``, ``contract.invariants[*]``, ``contract.chaos_matrix[*]``, which
fail when any item fails.

:meth:`Parts.of_config` takes a whole valid config (nothing failed); :meth:`Parts.of_data`
the document's data, whatever its shape.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel

from flakestorm.config import (
    Accepted,
    Advanced,
    AgentConfig,
    Chaos,
    Config,
    ContextAttack,
    Contract,
    ContractInvariant,
    Faults,
    GoldenPrompt,
    Invariant,
    LlmFault,
    Mutations,
    Output,
    Proxy,
    Replays,
    Scenario,
    Scoring,
    ToolFault,
    version_text,
)
from flakestorm.structure import validate_alone
from flakestorm.structure.paths import ConfigPath

T = TypeVar("T")

_SECTIONS = (
    "version",
    "golden_prompts",
    "contract",
    "chaos",
    "proxy",
    "mutations",
    "replays",
    "scoring",
    "output",
    "advanced",
)
"""The sections :meth:`Parts.config` takes as they are (``agent`` and ``invariants`` aside)."""


@dataclass(frozen=True)
class Item(Generic[T]):
    """One item of a list: where it is, its model (None: it did not validate), as written."""

    path: ConfigPath
    model: T | None
    raw: Any = field(default=None, compare=False)
    """The item as written (None when the item comes from a whole valid config)."""

    def text(self, name: str) -> str | None:
        """The item's text field ``name`` (an id, a name): from the model, else as written if
        it is non-empty text — worth comparing even on an item that is wrong elsewhere."""
        if self.model is not None:
            value = getattr(self.model, name, None)
        else:
            value = self.raw.get(name) if isinstance(self.raw, dict) else None
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class FaultSet:
    """The faults of one scenario, or of the top-level chaos section, each validated alone
    (a scenario wrong in one fault still has its other faults checked)."""

    path: ConfigPath
    scenario: str | None
    """The scenario's name; None for the chaos section (or a scenario without a valid name)."""
    tool_faults: tuple[Item[ToolFault], ...] = ()
    llm_faults: tuple[Item[LlmFault], ...] = ()
    context_attacks: tuple[Item[ContextAttack], ...] = ()

    @property
    def label(self) -> str:
        if self.path == ("chaos",):
            return "chaos"
        return f"scenario {self.scenario!r}" if self.scenario else "this scenario"

    @classmethod
    def of(cls, path: ConfigPath, faults: Faults) -> FaultSet:
        return cls(
            path,
            faults.name if isinstance(faults, Scenario) else None,
            _items((*path, "tool_faults"), faults.tool_faults),
            _items((*path, "llm_faults"), faults.llm_faults),
            _items((*path, "context_attacks"), faults.context_attacks),
        )


@dataclass(frozen=True)
class Parts:
    """The config's parts (see the module doc). A section that failed, or an optional section
    the file does not set, is None; ``failed`` says which."""

    version: str | None
    agent: AgentConfig | None
    golden_prompts: list[GoldenPrompt] | None
    invariants: tuple[Item[Invariant], ...]
    contract: Contract | None
    """The contract section validated as a whole (part ``contract``)."""
    contract_name: str | None
    contract_invariants: tuple[Item[ContractInvariant], ...]
    chaos_matrix: tuple[Item[Scenario], ...]
    chaos: Chaos | None
    proxy: Proxy | None
    mutations: Mutations | None
    replays: Replays | None
    scoring: Scoring | None
    output: Output | None
    advanced: Advanced | None
    accepted: tuple[Item[Accepted], ...]
    fault_sets: tuple[FaultSet, ...]
    """The faults of each scenario (whether the scenario validated or not), then the chaos
    section's."""
    written: frozenset[str]
    """The sections the file sets (to something other than null), by key."""
    failed: frozenset[str] = frozenset()
    """The names of the parts that did not validate."""

    def config(self) -> Config:
        """A config of the parts, for a check written against a whole config: the sections it
        declared it reads are the file's; any other section that did not validate is left at
        its default (or out), and list items that did not validate are left out."""
        values: dict[str, Any] = {
            name: getattr(self, name)
            for name in _SECTIONS
            if name not in self.failed and name in self.written
        }
        values["invariants"] = [item.model for item in self.invariants if item.model is not None]
        values["accepted"] = [item.model for item in self.accepted if item.model is not None]
        if self.agent is not None:
            values["agent"] = self.agent
        return Config.model_construct(**values)

    @classmethod
    def of_config(cls, config: Config) -> Parts:
        """The parts of a config that validated as a whole."""
        contract = config.contract
        return cls(
            version=config.version,
            agent=config.agent,
            golden_prompts=config.golden_prompts,
            invariants=_items(("invariants",), config.invariants),
            contract=contract,
            contract_name=contract.name if contract else None,
            contract_invariants=(
                _items(("contract", "invariants"), contract.invariants) if contract else ()
            ),
            chaos_matrix=(
                _items(("contract", "chaos_matrix"), contract.chaos_matrix) if contract else ()
            ),
            chaos=config.chaos,
            proxy=config.proxy,
            mutations=config.mutations,
            replays=config.replays,
            scoring=config.scoring,
            output=config.output,
            advanced=config.advanced,
            accepted=_items(("accepted",), config.accepted),
            fault_sets=_fault_sets(config),
            written=frozenset(
                name for name in config.model_fields_set if getattr(config, name) is not None
            ),
        )

    @classmethod
    def of_data(cls, data: Any) -> Parts:
        """The parts of the document's ``data`` (a mapping at the top), each validated alone."""
        doc: Mapping[str, Any] = data if isinstance(data, dict) else {}
        build = _Builder(doc)
        contract = doc.get("contract")
        chaos_matrix = build.contract_items(contract, "chaos_matrix", Scenario)
        fault_sets = [
            build.fault_set(item.path, item.raw, item.text("name")) for item in chaos_matrix
        ]
        fault_sets.append(build.fault_set(("chaos",), doc.get("chaos"), None))
        return cls(
            version=build.section("version"),
            agent=build.section("agent"),
            golden_prompts=build.section("golden_prompts"),
            invariants=build.items("invariants", doc.get("invariants", []), Invariant),
            contract=build.section("contract"),
            contract_name=build.contract_name(contract),
            contract_invariants=build.contract_items(contract, "invariants", ContractInvariant),
            chaos_matrix=chaos_matrix,
            chaos=build.section("chaos"),
            proxy=build.section("proxy"),
            mutations=build.section("mutations"),
            replays=build.section("replays"),
            scoring=build.section("scoring"),
            output=build.section("output"),
            advanced=build.section("advanced"),
            accepted=build.items("accepted", doc.get("accepted", []), Accepted),
            fault_sets=tuple(f for f in fault_sets if f is not None),
            written=frozenset(k for k, v in doc.items() if v is not None),
            failed=frozenset(build.failed),
        )


def _fault_sets(config: Config) -> tuple[FaultSet, ...]:
    scenarios = config.contract.chaos_matrix if config.contract else []
    out = [FaultSet.of(("contract", "chaos_matrix", i), s) for i, s in enumerate(scenarios)]
    if config.chaos is not None:
        out.append(FaultSet.of(("chaos",), config.chaos))
    return tuple(out)


def _items(path: ConfigPath, models: list[T]) -> tuple[Item[T], ...]:
    return tuple(Item((*path, i), model) for i, model in enumerate(models))


class _Builder:
    """Validates the document's parts one by one, noting those that fail."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self.failed: set[str] = set()

    def section(self, name: str) -> Any:
        info = Config.model_fields[name]
        if name not in self.doc:
            if info.is_required():
                self.failed.add(name)
                return None
            return info.get_default(call_default_factory=True)
        value = self.doc[name]
        if name == "version":
            value = version_text(value)
        valid = validate_alone(_field_kind(Config, name), value)
        if valid is None:
            self.failed.add(name)
            return None
        return valid.value

    def items(self, name: str, value: Any, model: type[BaseModel]) -> tuple[Item[Any], ...]:
        path = tuple(name.split("."))
        if not isinstance(value, list):
            self.failed.update((name, f"{name}[*]"))
            return ()
        out = []
        for i, raw in enumerate(value):
            valid = validate_alone(model, raw)
            if valid is None:
                self.failed.add(f"{name}[*]")
            out.append(Item((*path, i), valid.value if valid else None, raw))
        return tuple(out)

    def contract_name(self, contract: Any) -> str | None:
        if contract is None:
            return None
        valid = (
            validate_alone(_field_kind(Contract, "name"), contract["name"])
            if isinstance(contract, dict) and "name" in contract
            else None
        )
        if valid is None:
            self.failed.add("contract.name")
            return None
        name: str = valid.value
        return name

    def contract_items(
        self, contract: Any, name: str, model: type[BaseModel]
    ) -> tuple[Item[Any], ...]:
        if contract is None:
            return ()
        value = contract.get(name) if isinstance(contract, dict) else None
        return self.items(f"contract.{name}", value, model)

    def fault_set(self, path: ConfigPath, raw: Any, scenario: str | None) -> FaultSet | None:
        """Each fault of ``raw`` (a scenario or the chaos section as written) validated alone,
        as the one fault of a fault list (so the dict form of context attacks reads as ever)."""
        if not isinstance(raw, dict):
            return None
        lists = {}
        for key in _FAULT_LISTS:
            value = raw.get(key)
            entries: list[Any]
            if isinstance(value, list):
                entries = [[entry] for entry in value]
            elif isinstance(value, dict) and key == "context_attacks":
                entries = [{name: params} for name, params in value.items()]
            else:
                entries = []  # none, or not a list: a structural problem
            items = []
            for i, entry in enumerate(entries):
                valid = validate_alone(Faults, {key: entry})
                model = getattr(valid.value, key)[0] if valid is not None else None
                items.append(Item((*path, key, i), model, entry))
            lists[key] = tuple(items)
        return FaultSet(
            path,
            scenario,
            lists["tool_faults"],
            lists["llm_faults"],
            lists["context_attacks"],
        )


_FAULT_LISTS = ("tool_faults", "llm_faults", "context_attacks")


@functools.cache
def _field_kind(model: type[BaseModel], name: str) -> Any:
    """The type of ``model``'s field ``name`` with its constraints (``min_length``, …)."""
    info = model.model_fields[name]
    if not info.metadata:
        return info.annotation
    params = (info.annotation, *info.metadata)
    return Annotated[params]
