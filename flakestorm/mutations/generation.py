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

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flakestorm.agents.request import RequestShape
from flakestorm.config import (
    Config,
    LlmFallback,
    MutationGenerator,
    MutationType,
    last_turn,
    turns_of,
)
from flakestorm.mutations.registry import types_of, unit
from flakestorm.mutations.turns import real_turns
from flakestorm.mutations.unit import Target, mutation_rng
from flakestorm.mutations.usability import Unusable, UnusableAnswerError

UNCHANGED_SUFFIX = " ?"
FALLBACK_MARKS = tuple(f" (llm {kind.value})" for kind in Unusable)
"""What a fallen-back mutation's transform name ends with."""
TEMPLATES = MutationGenerator.TEMPLATES.value


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
    generator: str = TEMPLATES
    turns: tuple[str, ...] = ()
    """The turns sent before ``prompt`` (the last turn), in the same session: the turns of the
    golden conversation the mutated last turn belongs to, then an attack's own real turns
    (:mod:`flakestorm.mutations.turns`)."""
    history: int = 0
    """How many of ``turns`` are the golden conversation's own (the first ones)."""

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


def generate(
    config: Config, llm: LlmWriter | None = None, sessions: bool = False
) -> tuple[Mutation, ...]:
    """Every mutation of ``config``'s mutation phase, in index order. ``llm`` writes the
    prompt-level ones when ``mutations.generator`` is ``llm`` (request-level types and
    ``custom`` always use their catalogues). ``sessions``: made for an agent that keeps
    sessions, the variants that have one in the form of real turns (:func:`in_turns`)."""
    mutations = config.mutations
    if mutations is None:
        return ()
    seed = config.advanced.seed
    target = Target(method=config.agent.method, timeout_ms=config.agent.timeout)
    by_llm = mutations.generator is MutationGenerator.LLM and llm is not None
    fallback = mutations.llm is not None and mutations.llm.fallback is LlmFallback.TEMPLATES
    kinds = types_of(config)
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
        made = transform.apply(prompt, rng, target)
        text = made.prompt
        if made.request is None and text == prompt:
            text, name = text + UNCHANGED_SUFFIX, f"{name}+suffix"
        out.append(
            Mutation(
                len(out), kind, name + fell_back, p, variant, prompt, text, made.request, weight
            )
        )
    inside = tuple(_inside(m, config) for m in out)
    return in_turns(inside, config) if sessions else inside


def history_of(config: Config, prompt_index: int) -> tuple[str, ...]:
    """The turns before the last of golden prompt ``prompt_index`` (none for one message)."""
    return turns_of(config.golden_prompts[prompt_index])[:-1]


def _inside(mutation: Mutation, config: Config) -> Mutation:
    """A mutation of a conversation's last turn, sent inside its conversation: the turns before
    it first, in the same session (SPEC §12), so the mutation meets the conversation it
    belongs to."""
    history = history_of(config, mutation.prompt_index)
    if not history:
        return mutation
    return dataclasses.replace(mutation, turns=history, history=len(history))


def in_turns(mutations: Sequence[Mutation], config: Config) -> tuple[Mutation, ...]:
    """``mutations`` as an agent that keeps sessions is sent them: each template variant with
    a real-turns form (:mod:`flakestorm.mutations.turns`: ``multi_turn_attack``,
    ``false_premise``) sends its history as turns before its prompt, named ``NAME (turns)``,
    its turns drawn from the variant's own RNG (byte-identical for a seed); the others as
    they are. The same mutation, index and variant either way, so a plan made before the run
    knew the agent keeps sessions (a python agent taking ``session_id``) is put in this form
    when it runs."""
    if config.mutations is None:
        return tuple(mutations)
    units = {kind: unit(kind, config.mutations.templates) for kind in types_of(config)}
    seed = config.advanced.seed
    out = []
    for m in mutations:
        made = units.get(m.type)
        attacked = len(m.turns) > m.history  # already in its real-turns form
        if attacked or m.request is not None or made is None or m.generator != TEMPLATES:
            out.append(m)
            continue
        name = made.transform(m.variant).name
        mark = next((f for f in FALLBACK_MARKS if m.transform.endswith(f)), "")
        rng = mutation_rng(seed, m.type, m.original, m.variant)
        turns = real_turns(m.type, name, m.original, rng)
        if turns is None:
            out.append(m)
            continue
        out.append(
            dataclasses.replace(
                m,
                transform=f"{name} (turns){mark}",
                prompt=turns[-1],
                turns=(*m.turns[: m.history], *turns[:-1]),
            )
        )
    return tuple(out)


def sends(config: Config, sessions: bool) -> int:
    """The requests one run of every mutation sends the agent: one each, after the turns of
    the conversation it is the mutated last turn of; a request-level burst its identical
    requests (``copies``); sent as real turns to an agent with sessions (``sessions``), one per
    turn (the ``templates`` variants; an ``llm``-written one is counted as one message)."""
    mutations = config.mutations
    if mutations is None:
        return 0
    seed = config.advanced.seed
    target = Target(method=config.agent.method, timeout_ms=config.agent.timeout)
    units = {kind: unit(kind, mutations.templates) for kind in types_of(config)}
    llm = mutations.generator is MutationGenerator.LLM
    total = 0
    for p, prompt, kind, variant in slots(config):
        total += len(history_of(config, p))
        transform = units[kind].transform(variant)
        rng = mutation_rng(seed, kind, prompt, variant)
        if kind.request_level:
            request = transform.apply(prompt, rng, target).request
            total += request.copies if request is not None else 1
            continue
        if not sessions or (llm and writes(kind)):
            total += 1
            continue
        turns = real_turns(kind, transform.name, prompt, rng)
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
