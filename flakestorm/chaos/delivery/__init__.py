"""Delivery: the calls the agent made, and the proof that a scenario's faults reached it
(SPEC §4, §10).

- :mod:`.interactions`: :class:`~.interactions.Interaction`, one call to a tool or the LLM as
  flakestorm saw it, and the run's :class:`~.interactions.InteractionLog` that both delivery
  paths append to;
- :mod:`.proof`: :func:`~.proof.prove` (what fired in each cell, and which declared faults some
  call matched) and :func:`~.proof.judge` (which faults were never delivered).
"""
