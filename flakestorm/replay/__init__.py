"""The replay phase's offline parts (SPEC §7): how the calls an agent makes now differ from
the recorded ones (``divergence``), sessions written from a run's results (``export``), and
sessions imported from LangSmith (``langsmith``). The phase itself is
:mod:`flakestorm.engine.phases.replay`; sessions are read and checked by
:mod:`flakestorm.loader.replays`; what a session serves is :mod:`flakestorm.chaos.faults.recording`;
the commands are :mod:`flakestorm.cli.replay`.
"""
