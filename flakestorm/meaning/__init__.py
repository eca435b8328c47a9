"""Meaning checks of a config (SPEC §2): what its structure cannot say, read across the
config once each part has the structure the models give it (:mod:`flakestorm.structure`) —
type-specific fields of invariants, faults and context attacks, regexes that compile, unique
ids and names, weights that sum to 1.0, python references, URLs, request templates, and
``when`` values that never apply (a warning).

They run on every part of the file that validated, even when other parts did not, so one
``validate`` lists every problem: ``parts.py`` validates the config's sections and list items
one by one (:class:`Parts`), ``registry.py`` holds the checks (:data:`CHECKS`, one
``register`` line each, with the parts each reads) and runs those whose parts validated
(:func:`check`). The checks live in a module per concern: ``agent``, ``invariants``,
``faults``, ``sections`` (golden prompts, proxy, scoring, advanced), ``mutations`` (the
mutations package's checks, placed); ``scope.py`` is what a check is given. The replay
sessions' checks register from :mod:`flakestorm.loader.replays`. Nothing here knows of files:
every finding becomes a Problem through the ``locate`` hook the loader passes in.
"""

from flakestorm.meaning.parts import Parts
from flakestorm.meaning.registry import CHECKS, Check, check, register
from flakestorm.meaning.scope import Findings, Locate, Scope

__all__ = ["CHECKS", "Check", "Findings", "Locate", "Parts", "Scope", "check", "register"]
