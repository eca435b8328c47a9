"""The mutation unit contract: one registered unit per :class:`MutationType`, each a catalogue
of named transforms (Toxiproxy's one unit per toxic, applied to prompts and requests).

A transform is pure: the golden prompt and an RNG in, a :class:`Variant` out. Its randomness
comes only from the RNG it is given, which :func:`mutation_rng` fixes by (seed, type, prompt,
variant), so a seed gives byte-identical mutations on every machine and at any concurrency.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from flakestorm.agents.request import RequestShape
from flakestorm.chaos.faults.decisions import call_rng
from flakestorm.config import MutationType


@dataclass(frozen=True)
class Variant:
    """What a transform made of a prompt: the prompt to send, and for a request-level
    mutation the changes to the HTTP request."""

    prompt: str
    request: RequestShape | None = None


@dataclass(frozen=True)
class Target:
    """What a transform may need to know about the agent besides the prompt."""

    method: str = "POST"
    """The configured HTTP method (another method must differ from it)."""
    timeout_ms: int = 30_000
    """``agent.timeout``: a trickled body must end well before it."""


Apply = Callable[[str, random.Random, Target], Variant]


@dataclass(frozen=True)
class Transform:
    """One named way of mutating: ``apply(prompt, rng, target) -> Variant``."""

    name: str
    apply: Apply
    example: str = ""
    """What it does, in a few words (the mutation guide and ``mutations preview``)."""


def framed(
    name: str,
    example: str,
    before: str = "",
    after: str = "",
    shape: Callable[[str], str] = str,
) -> Transform:
    """A prompt-level transform that puts the prompt, shaped by ``shape``, between fixed text."""
    return Transform(
        name, lambda prompt, rng, target: Variant(f"{before}{shape(prompt)}{after}"), example
    )


def prompt_transform(
    name: str, example: str = ""
) -> Callable[[Callable[[str, random.Random], str]], Transform]:
    """Declare a prompt-level transform from ``fn(prompt, rng) -> mutated prompt``."""

    def wrap(fn: Callable[[str, random.Random], str]) -> Transform:
        return Transform(name, lambda prompt, rng, target: Variant(fn(prompt, rng)), example)

    return wrap


@dataclass(frozen=True)
class Attack:
    """What a written mutation of an attack type must carry to be one (the ``llm``
    generator's answers are checked against it): ``carried(text)``, and in words what was
    looked for."""

    looked_for: str
    carried: Callable[[str], bool]

    @classmethod
    def matching(cls, looked_for: str, pattern: str) -> Attack:
        """An attack carried when ``pattern`` matches (case-insensitive, multiline); compiled
        when first matched, not when the catalogue is imported."""
        compiled = functools.cache(lambda: re.compile(pattern, re.IGNORECASE | re.MULTILINE))
        return cls(looked_for, lambda text: compiled().search(text) is not None)


@dataclass(frozen=True)
class MutationUnit:
    """One mutation type: its catalogue of transforms, in a fixed order."""

    type: MutationType
    transforms: tuple[Transform, ...]
    summary: str
    attack: Attack | None = None
    """For the types whose instruction asks for an attack: how to tell an answer carries it."""

    def transform(self, variant: int) -> Transform:
        """Variant ``i`` takes transform ``i`` mod the catalogue (SPEC §6)."""
        return self.transforms[variant % len(self.transforms)]


SCOPE = "mutation"
"""The scenario slot of :func:`~flakestorm.chaos.faults.decisions.call_rng` for mutations."""


def mutation_rng(seed: int, kind: MutationType, prompt: str, variant: int) -> random.Random:
    """The RNG of variant ``variant`` of ``kind`` for ``prompt``: the one derivation of every
    random choice flakestorm makes (:func:`~flakestorm.chaos.faults.decisions.call_rng`), keyed by
    the type and the prompt's digest (so a long prompt costs nothing)."""
    return call_rng(seed, SCOPE, kind.value, _digest(prompt), variant)


@functools.lru_cache(maxsize=4096)
def _digest(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()
