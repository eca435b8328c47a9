"""Sweeps: one scenario run at every value of one fault field, and where the agent breaks
(SPEC §4.1, "Sweeps"). Pure.

``sweep: {field: tool_faults[0].delay_ms, values: [250, 500, 1000, 2000]}`` on a scenario named
``slow-quotes`` expands it into ``slow-quotes[250]``, ``slow-quotes[500]``, … (:func:`expand`),
each run and reported like any other scenario: the plan, shards, the baseline delta and every
matrix see only the expanded scenarios. :class:`SweepInfo` keeps which scenarios belong to the
sweep, so reports can give, per invariant, the **breaking point**
(:func:`flakestorm.results.sweeps.breaking_point`): the first value at which it fails and stays
failed. Expanding a sweep is reading the config: ``validate`` and the plan do it alike.

The fields a sweep may vary (:data:`SWEEPABLE`): ``delay_ms``, ``probability``, ``max_tokens``,
``after_chunks``, ``first_token_ms`` and ``chunk_delay_ms`` (LLM faults), ``inject_tokens``
(``overflow`` attacks) and ``calls``, whose upper bound moves
(``calls: "1-2"`` swept over ``[1, 2, 3]`` is ``"1-1"``, ``"1-2"``, ``"1-3"``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flakestorm.config import Contract, Scenario
from flakestorm.results.sweeps import SweepInfo

SWEEPABLE: Mapping[str, tuple[str, ...]] = {
    "tool_faults": ("delay_ms", "probability", "calls"),
    "llm_faults": (
        "delay_ms",
        "probability",
        "calls",
        "max_tokens",
        "after_chunks",
        "first_token_ms",
        "chunk_delay_ms",
    ),
    "context_attacks": ("inject_tokens", "calls"),
}
"""Per fault list, the numeric fields a sweep may vary."""
_PATH = re.compile(r"^(tool_faults|llm_faults|context_attacks)\[(\d+)\]\.([a-z_]+)$")
PATH_EXAMPLE = "tool_faults[0].delay_ms, llm_faults[0].max_tokens, context_attacks[0].inject_tokens"


_WHOLE = frozenset(
    {"delay_ms", "max_tokens", "inject_tokens", "after_chunks", "first_token_ms", "chunk_delay_ms"}
)
"""The sweepable fields that take whole numbers."""


class SweepError(ValueError):
    """A sweep that cannot be expanded: what is wrong, and what is valid."""


@dataclass(frozen=True)
class SweepPath:
    """Which field of which fault of the scenario a sweep varies."""

    faults: str
    index: int
    field: str

    def __str__(self) -> str:
        return f"{self.faults}[{self.index}].{self.field}"


def parse_path(text: str) -> SweepPath:
    match = _PATH.match(text.strip())
    if not match:
        raise SweepError(f"{text!r} is not a fault field: give LIST[INDEX].FIELD ({PATH_EXAMPLE})")
    path = SweepPath(match[1], int(match[2]), match[3])
    allowed = SWEEPABLE[path.faults]
    if path.field not in allowed:
        raise SweepError(
            f"{path.field!r} cannot be swept on {path.faults} (numeric fields: "
            f"{', '.join(allowed)})"
        )
    return path


def value_text(value: float) -> str:
    """``1200.0`` -> ``1200``, ``0.25`` -> ``0.25``: how a value names its scenario."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def swept_name(scenario: str, value: float) -> str:
    return f"{scenario}[{value_text(value)}]"


def _set(fault: Any, field: str, value: float) -> Any:
    """``fault`` with ``field`` at ``value``, validated as the config would be."""
    data = fault.model_dump(by_alias=True, exclude_unset=True)
    if field == "calls":
        if not float(value).is_integer() or value < 1:
            raise SweepError(f"calls takes whole call numbers from 1, not {value_text(value)}")
        start = _calls_start(fault.calls)
        if int(value) < start:
            raise SweepError(
                f"{value_text(value)} is below the first call of calls: {fault.calls!r}"
            )
        data["calls"] = f"{start}-{int(value)}"
        data.pop("after_calls", None)
    elif field in _WHOLE:
        if not float(value).is_integer():
            raise SweepError(f"{field} takes whole numbers, not {value_text(value)}")
        data[field] = int(value)
    else:
        data[field] = value
    try:
        return type(fault).model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        first = exc.errors()[0]["msg"] if hasattr(exc, "errors") else str(exc)
        raise SweepError(f"{field}: {value_text(value)}: {first}") from None


def _calls_start(calls: str | None) -> int:
    if not calls:
        return 1
    head = calls.split(",", 1)[0].split("-", 1)[0].strip()
    return int(head) if head.isdigit() else 1


def expand(scenario: Scenario) -> list[Scenario]:
    """The scenarios a swept ``scenario`` stands for, one per value (itself when unswept).
    Raises :class:`SweepError` for a sweep that cannot be expanded."""
    sweep = scenario.sweep
    if sweep is None:
        return [scenario]
    path = parse_path(sweep.field)
    faults: list[Any] = list(getattr(scenario, path.faults))
    if path.index >= len(faults):
        raise SweepError(
            f"the scenario has {len(faults)} {path.faults.replace('_', ' ')} (indexes from 0)"
        )
    out = []
    for value in sweep.values:
        changed = list(faults)
        changed[path.index] = _set(faults[path.index], path.field, value)
        out.append(
            scenario.model_copy(
                update={
                    path.faults: changed,
                    "name": swept_name(scenario.name, value),
                    "sweep": None,
                }
            )
        )
    return out


def expanded_matrix(contract: Contract) -> list[Scenario]:
    """The contract's scenarios, sweeps expanded, in config order."""
    return [s for declared in contract.chaos_matrix for s in expand(declared)]


def sweeps_of(contract: Contract) -> tuple[SweepInfo, ...]:
    """Every sweep of the contract, for the reports."""
    out = []
    for declared in contract.chaos_matrix:
        sweep = declared.sweep
        if sweep is None:
            continue
        out.append(
            SweepInfo(
                scenario=declared.name,
                field=sweep.field,
                values=tuple(value_text(v) for v in sweep.values),
                scenarios=tuple(swept_name(declared.name, v) for v in sweep.values),
            )
        )
    return tuple(out)
