"""Fault modes as registered units (SPEC §4.1): what every unit holds, and what they share.

Each mode of :class:`~flakestorm.config.ToolFaultMode` and
:class:`~flakestorm.config.LlmFaultMode` is one small unit, as each toxic is in Toxiproxy.
The unit holds, in one place, everything flakestorm knows about its mode:

- ``fields``: its :class:`Fields`, required and optional, besides the shared ``probability``
  and ``after_calls`` (:mod:`flakestorm.meaning` checks a fault against them);
- ``detail(fault)``: what the fault's label adds after the mode name (``error(503)``);
- its HTTP behaviour, for the chaos proxy: a tool unit's injected response and ``CONNECT``
  tunnel action, an LLM unit's reply before upstream or its text rewrite (which the reply
  and stream editors of :mod:`flakestorm.chaos.llm` apply, protocol by protocol);
- ``plan(...)``: its python behaviour, for the wrappers (:mod:`flakestorm.chaos.wrappers`): a
  :class:`PythonPlan`.

The tool units are :data:`flakestorm.chaos.faults.tool_modes.TOOL_MODES`; the LLM units are
:data:`flakestorm.chaos.llm.modes.LLM_MODES`, inside the LLM package because its reply and
stream editors dispatch on them. Both registries are built with :func:`registry`, keyed by the
mode enum, and a test checks that every member of each enum has its unit.

Which fault fires on which call is not a unit's business: :mod:`flakestorm.chaos.faults.decisions`
decides that, for every mode alike.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

DEFAULT_TIMEOUT_MS = 30_000
"""How long a ``timeout`` fault (tool or LLM) holds the call when it has no ``delay_ms``."""


@dataclass(frozen=True)
class Fields:
    """The mode-specific fields of a fault: required, then optional, in the order messages
    list them."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()
    """At least one of these is required (each is optional on its own)."""

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.required, *self.one_of, *self.optional)


class CallThrough(enum.Enum):
    """The :attr:`PythonPlan.value` that means "no value: call the real callable"."""

    CALL_THROUGH = "call through"


CALL_THROUGH = CallThrough.CALL_THROUGH


@dataclass(frozen=True)
class PythonPlan:
    """What a python wrapper does with a call its fault fired on: wait ``delay_s``, then raise
    ``error``, or return ``value``, or (neither) call the real callable."""

    delay_s: float = 0.0
    error: BaseException | None = None
    value: Any = CALL_THROUGH


class Unit(Protocol):
    """What every mode unit has."""

    @property
    def fields(self) -> Fields: ...


_Mode = TypeVar("_Mode", bound=enum.Enum)
_Unit = TypeVar("_Unit")


def registry(units: Iterable[tuple[_Mode, _Unit]]) -> Mapping[_Mode, _Unit]:
    """A registry keyed by mode, refusing a mode registered twice."""
    out: dict[_Mode, _Unit] = {}
    for mode, unit in units:
        if mode in out:
            raise ValueError(f"fault mode {mode.value!r} is registered twice")
        out[mode] = unit
    return out


def field_names(units: Iterable[Unit]) -> frozenset[str]:
    """Every mode-specific field of ``units``: a field outside a fault's own means nothing."""
    return frozenset(name for unit in units for name in unit.fields.names)
