"""Channels: the paths a run's faults take to the agent (SPEC §4.2, §13).

- :mod:`.channel`: :class:`~.channel.Channel` and its kinds, the chaos proxy over its control
  API, a python agent's wrappers, and both at once;
- :mod:`.choice`: which channel a run opens, decided once from the config (read by
  ``validate`` and the run alike), and the opening of it.
"""
