"""The structure of data: is it what the config models say (types, required and unknown keys,
allowed values)? Checked with the pydantic models and worded for people — the one home of
pydantic's errors, for ``flakestorm.yaml`` (:mod:`flakestorm.loader`) and the proxy's scenario
documents alike: :func:`validate_model` raises :class:`InvalidData` naming every bad node,
what is wrong and what would be valid. ``model.py`` translates the errors, ``error_path.py``
resolves a pydantic ``loc`` against the document, ``wording.py`` names values and suggests,
``paths.py`` writes paths; ``strict_json.py`` reads JSON that may not repeat a key.

What a structurally valid config *means* — whether its parts agree with one another (a regex
that compiles, ids that are unique, a fault its channel can deliver) — is checked after this,
by :mod:`flakestorm.meaning`, on every part that passed here."""

from flakestorm.structure.model import (
    FieldProblem,
    Hints,
    InvalidData,
    Valid,
    validate_alone,
    validate_model,
)

__all__ = ["FieldProblem", "Hints", "InvalidData", "Valid", "validate_alone", "validate_model"]
