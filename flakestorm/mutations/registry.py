"""The mutation types, one registered unit each: :data:`MUTATIONS`.

Each family module (:mod:`~flakestorm.mutations.encodings`, :mod:`~flakestorm.mutations.frames`,
:mod:`~flakestorm.mutations.wording`, :mod:`~flakestorm.mutations.lookalikes`,
:mod:`~flakestorm.mutations.extremes`, :mod:`~flakestorm.mutations.request_level`) declares its
units; they are registered here, one line per family. ``custom`` is the one unit built from
the config (:func:`custom_unit`): its catalogue is ``mutations.templates``. A type's default
weight is :attr:`MutationType.default_weight`; ``mutations.weights`` overrides it
(:meth:`~flakestorm.config.Mutations.weight`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from flakestorm.config import AgentConfig, AgentType, Config, Mutations, MutationType
from flakestorm.mutations import (
    encodings,
    extremes,
    frames,
    lookalikes,
    request_level,
    wording,
)
from flakestorm.mutations.unit import MutationUnit, Target, Transform, Variant

MUTATIONS: dict[MutationType, MutationUnit] = {}
"""Every built-in mutation type's unit (all but ``custom``)."""


def register(units: Iterable[MutationUnit]) -> None:
    for unit in units:
        MUTATIONS[unit.type] = unit


register(encodings.UNITS)
register(frames.UNITS)
register(wording.UNITS)
register(lookalikes.UNITS)
register(extremes.UNITS)
register(request_level.UNITS)


def _fill(template: str) -> Transform:
    def apply(prompt: str, rng: random.Random, target: Target) -> Variant:
        return Variant(template.replace("{prompt}", prompt))

    return Transform("template", apply, template)


def custom_unit(templates: Sequence[str]) -> MutationUnit:
    """The ``custom`` type for ``mutations.templates``: variant i fills template i mod n."""
    transforms = tuple(
        Transform(f"template_{i + 1}", _fill(t).apply, t) for i, t in enumerate(templates)
    )
    return MutationUnit(MutationType.CUSTOM, transforms, "Your templates, each with {prompt}.")


def unit(kind: MutationType, templates: Sequence[str] | None = None) -> MutationUnit:
    """The unit of ``kind`` (``custom`` needs ``templates``)."""
    if kind is MutationType.CUSTOM:
        if not templates:
            raise ValueError("the custom mutation type needs mutations.templates")
        return custom_unit(templates)
    return MUTATIONS[kind]


def types_of(config: Config) -> list[MutationType]:
    """The types a run generates, in order: ``mutations.types`` as listed, or by default every
    type but ``custom`` without templates and, for a python agent, the request-level ones."""
    return types_for(config.mutations, config.agent)


def types_for(mutations: Mutations | None, agent: AgentConfig) -> list[MutationType]:
    """:func:`types_of` from the two sections it reads (the config's meaning checks have the
    sections, not always a whole config)."""
    if mutations is None:
        return []
    if "types" in mutations.model_fields_set:
        return list(dict.fromkeys(mutations.types))
    python = agent.type is AgentType.PYTHON
    return [
        kind
        for kind in MutationType
        if not (kind is MutationType.CUSTOM and not mutations.templates)
        and not (python and kind.request_level)
    ]


assert set(MUTATIONS) == set(MutationType) - {MutationType.CUSTOM}, "a type has no unit"
