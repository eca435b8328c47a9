"""The ``flakestorm`` command line, one module per command group.

``app.py`` holds the root group (:data:`main`, whose :class:`FlakestormGroup` maps errors to
exit codes) and the ``contract`` group; each other module registers its commands on them when
imported: ``project.py`` (validate, schema, init), ``run.py`` (contract run/score, run, ci),
``report.py`` (report), ``compare.py`` (compare), ``merge.py`` (merge), ``proxy.py`` (proxy),
``mutations.py`` (mutations preview), ``replay.py`` (replay run, export, import). A command's
module is imported when the command runs (``app.LazyGroup``): a new command group is a module
here and one line in the table of ``app.FlakestormGroup``.
"""

from flakestorm.cli.app import FlakestormGroup, main

__all__ = ["FlakestormGroup", "main"]
