"""The mutation phase's generators (SPEC §6): 24 mutation types, one registered unit each.

- :mod:`~flakestorm.mutations.unit`: the unit contract (a catalogue of named transforms) and
  the seeded RNG every transform draws from;
- :mod:`~flakestorm.mutations.registry`: :data:`MUTATIONS`, the units by type, and the types
  a config generates;
- the families: :mod:`~flakestorm.mutations.encodings` (encodings, special tokens),
  :mod:`~flakestorm.mutations.frames` (injection, jailbreak, multi-turn, context, formats),
  :mod:`~flakestorm.mutations.wording` (paraphrase, noise, tone),
  :mod:`~flakestorm.mutations.lookalikes` (meaning swaps, languages and scripts),
  :mod:`~flakestorm.mutations.extremes` (length, dates),
  :mod:`~flakestorm.mutations.request_level` (the nine HTTP request types);
- :mod:`~flakestorm.mutations.generation`: config -> :class:`Mutation` values, in a stable
  order;
- :mod:`~flakestorm.mutations.llm`: the ``llm`` generator (an OpenAI-compatible chat
  completions endpoint, answers cached on disk);
- :mod:`~flakestorm.mutations.checks`: the meaning checks of the ``mutations`` section.

The phase that sends them is :mod:`flakestorm.engine.phases.mutation`.
"""
