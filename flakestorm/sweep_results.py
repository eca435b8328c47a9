"""A sweep's results (SPEC §4.1, "Sweeps"): which scenarios a swept scenario ran as, and where
each invariant breaks. Data only, read back from ``results.json`` here too; what judges the
breaking points is :mod:`flakestorm.sweeps`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BreakingPoint:
    """Where one invariant breaks along a sweep (SPEC §4.1): ``value`` is the first value at
    which it fails and stays failed (None when it never breaks, or has no verdict)."""

    invariant: str
    value: str | None
    text: str
    """``breaks at 1200``, ``fails from the first value``, ``holds over the whole range``."""
    marks: tuple[str | None, ...]
    """Per value, in order: ``passed``, ``failed`` (a failed or errored cell) or None (skipped,
    not run)."""


@dataclass(frozen=True)
class SweepInfo:
    """A swept scenario (:mod:`flakestorm.sweeps`): the field it varies, its values in order,
    the scenario each value ran as, and per invariant its breaking point."""

    scenario: str
    field: str
    values: tuple[str, ...]
    scenarios: tuple[str, ...]
    breaking: tuple[BreakingPoint, ...] = ()


def sweep_from_document(d: Mapping[str, Any]) -> SweepInfo:
    return SweepInfo(
        **{
            **d,
            "values": tuple(d["values"]),
            "scenarios": tuple(d["scenarios"]),
            "breaking": tuple(
                BreakingPoint(**{**b, "marks": tuple(b["marks"])}) for b in d.get("breaking", ())
            ),
        }
    )
