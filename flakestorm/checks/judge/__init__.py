"""The ``llm_judge`` invariant's judge (SPEC §3): a model asked for a structured verdict that
never fails open, calibrated by its invariant's examples, its verdicts cached per output.

- :mod:`.asking`: the question and how an answer is read;
- :mod:`.client`: one judge, its retries, its in-run and on-disk cache, its health (the only
  module here with an HTTP client);
- :mod:`.cache`: where verdicts are kept on disk;
- :mod:`.mock`: ``judge: mock``, the deterministic stand-in;
- :mod:`.which`: which invariants are judged, and by which judge;
- :mod:`.judges`: the run's judges and their calibration.

Import from the modules: this package's face imports nothing, so ``validate`` reads the cache
without loading an HTTP client.
"""
