"""The replay phase's parts (SPEC §7): the sessions a config replays (``sessions``), what a
session serves to the agent (``recording``), how the calls it makes now differ from the
recorded ones (``divergence``), and sessions written from a run's results (``export``).
The phase itself is :mod:`flakestorm.phases.replay`; its commands are :mod:`flakestorm.cli.replay`.
"""
