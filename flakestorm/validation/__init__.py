"""Data validated with the config models and worded for people — the one home of pydantic's
errors, for ``flakestorm.yaml`` (:mod:`flakestorm.loader`) and the proxy's scenario documents
alike: :func:`validate_model` raises :class:`InvalidData` naming every bad node, what is wrong
and what would be valid. ``model.py`` translates the errors, ``error_path.py`` resolves a
pydantic ``loc`` against the document, ``wording.py`` names values and suggests, ``paths.py``
writes paths."""

from flakestorm.validation.model import (
    FieldProblem,
    Hints,
    InvalidData,
    Valid,
    validate_alone,
    validate_model,
)

__all__ = ["FieldProblem", "Hints", "InvalidData", "Valid", "validate_alone", "validate_model"]
