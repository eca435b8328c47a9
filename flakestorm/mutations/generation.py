"""From the config to the mutations of a run (pure for the ``templates`` generator).

``count`` mutations per golden prompt, dealt round-robin over the types in order (SPEC §6):
mutation ``i`` of a prompt is of type ``types[i % len(types)]`` and is that type's variant
``i // len(types)``, which takes transform ``variant`` mod the type's catalogue and its
randomness from :func:`~flakestorm.mutations.unit.mutation_rng` (seed, type, prompt,
variant). The mutations are numbered in that order, prompt-major: :attr:`Mutation.index` is
stable for a config and seed, so shards can deal them and reports can name them.

Every variant differs from its original: a transform that happens to return the prompt
unchanged (an empty prompt, say) gets :data:`UNCHANGED_SUFFIX` appended, and says so in its
transform name. The ``llm`` generator never sends an answer that is not a mutation
(:mod:`~flakestorm.mutations.usability`): the writer raises, and with
``mutations.llm.fallback: templates`` the variant takes its template transform instead, named
``<transform> (llm refused)`` (or ``unchanged``, ``trivial``, ``no attack``) in every report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flakestorm.agents.request import RequestShape
from flakestorm.config import Config, LlmFallback, MutationGenerator, MutationType, last_turn
from flakestorm.mutations.registry import types_of, unit
from flakestorm.mutations.turns import real_turns
from flakestorm.mutations.unit import Target, mutation_rng
from flakestorm.mutations.usability import Unusable, UnusableAnswerError

UNCHANGED_SUFFIX = " ?"
FALLBACK_MARKS = tuple(f" (llm {kind.value})" for kind in Unusable)
"""What a fallen-back mutation's transform name ends with."""


@dataclass(frozen=True)
class Mutation:
    """One mutated request of the phase: what the agent is sent instead of a golden prompt."""

    index: int
    type: MutationType
    transform: str
    """The named transform of the type's catalogue (``base64``, ``template_2``, ``llm``;
    ``ignore_previous (llm refused)`` when the llm generator's answers were unusable)."""
    prompt_index: int
    variant: int
    original: str
    prompt: str
    """The prompt the agent is sent (for request-level types, before any padding)."""
    request: RequestShape | None
    weight: float
    generator: str = MutationGenerator.TEMPLATES.value
    turns: tuple[str, ...] = ()
    """Sent as real turns (:mod:`flakestorm.mutations.turns`): the turns sent before
    ``prompt`` (the last turn), in the same session."""

    @property
    def id(self) -> str:
        """``prompt_injection#0.1``: type, golden prompt (0-based), variant."""
        return f"{self.type.value}#{self.prompt_index}.{self.variant}"


LlmWriter = Callable[[MutationType, str, int], str]
"""Writes variant ``i`` of a prompt-level type for a prompt (the ``llm`` generator)."""


def slots(config: Config) -> list[tuple[int, str, MutationType, int]]:
    """(prompt index, prompt, type, variant) of every mutation, in index order."""
    mutations = config.mutations
    kinds = types_of(config)
    if mutations is None or not kinds:
        return []
    out = []
    for p, golden in enumerate(config.golden_prompts):
        prompt = last_turn(golden)  # a conversation: its last turn, mutated as one message
        for i in range(mutations.count):
            out.append((p, prompt, kinds[i % len(kinds)], i // len(kinds)))
    return out


def generate(config: Config, llm: LlmWriter | None = None) -> tuple[Mutation, ...]:
    """Every mutation of ``config``'s mutation phase, in index order. ``llm`` writes the
    prompt-level ones when ``mutations.generator`` is ``llm`` (request-level types and
    ``custom`` always use their catalogues)."""
    mutations = config.mutations
    if mutations is None:
        return ()
    seed = config.advanced.seed
    target = Target(method=config.agent.method, timeout_ms=config.agent.timeout)
    by_llm = mutations.generator is MutationGenerator.LLM and llm is not None
    fallback = mutations.llm is not None and mutations.llm.fallback is LlmFallback.TEMPLATES
    kinds = types_of(config)
    sessions = config.agent.session is not None
    units = {kind: unit(kind, mutations.templates) for kind in kinds}
    weights = {kind: mutations.weight(kind) for kind in kinds}
    out: list[Mutation] = []
    for p, prompt, kind, variant in slots(config):
        weight = weights[kind]
        fell_back = ""
        if by_llm and writes(kind):
            assert llm is not None
            try:
                written = llm(kind, prompt, variant)
            except UnusableAnswerError as exc:
                if not fallback:
                    raise
                fell_back = f" (llm {exc.verdict.kind.value})"
            else:
                out.append(
                    Mutation(
                        len(out), kind, "llm", p, variant, prompt, written, None, weight, "llm"
                    )
                )
                continue
        transform = units[kind].transform(variant)
        name = transform.name
        rng = mutation_rng(seed, kind, prompt, variant)
        turns = real_turns(kind, name, prompt, rng) if sessions else None
        if turns is not None:  # an agent with sessions: the history sent as real turns
            out.append(
                Mutation(
                    len(out), kind, f"{name} (turns){fell_back}", p, variant, prompt,
                    turns[-1], None, weight, turns=turns[:-1],
                )
            )  # fmt: skip
            continue
        made = transform.apply(prompt, rng, target)
        text = made.prompt
        if made.request is None and text == prompt:
            text, name = text + UNCHANGED_SUFFIX, f"{name}+suffix"
        out.append(
            Mutation(
                len(out), kind, name + fell_back, p, variant, prompt, text, made.request, weight
            )
        )
    return tuple(out)


def sends(config: Config) -> int:
    """The invocations one run of every mutation makes: one each, or, sent as real turns to
    an agent with sessions, one per turn (the ``templates`` variants; an ``llm``-written one is
    counted as one message)."""
    mutations = config.mutations
    if mutations is None:
        return 0
    if config.agent.session is None or mutations.generator is MutationGenerator.LLM:
        return len(slots(config))
    seed = config.advanced.seed
    units = {kind: unit(kind, mutations.templates) for kind in types_of(config)}
    total = 0
    for _, prompt, kind, variant in slots(config):
        name = units[kind].transform(variant).name
        turns = real_turns(kind, name, prompt, mutation_rng(seed, kind, prompt, variant))
        total += 1 if turns is None else len(turns)
    return total


def writes(kind: MutationType) -> bool:
    """Whether the ``llm`` generator writes ``kind`` (``custom`` and the request-level types
    always use their catalogues)."""
    return not kind.request_level and kind is not MutationType.CUSTOM


def fell_back(mutations: Sequence[Mutation]) -> int:
    """How many of ``mutations`` took their template transform because the llm generator's
    answers were unusable."""
    return sum(m.transform.endswith(FALLBACK_MARKS) for m in mutations)


def left_out(config: Config) -> list[MutationType]:
    """Types ``count`` leaves out (fewer mutations per prompt than types): validate warns."""
    mutations = config.mutations
    kinds = types_of(config)
    if mutations is None:
        return []
    return kinds[mutations.count :]


def weights_of(mutations: Sequence[Mutation]) -> dict[str, float]:
    """Each type's weight, as the phase scored it."""
    return {m.type.value: m.weight for m in mutations}
