"""Paths into a document: ``("contract", "invariants", 0)``, written ``contract.invariants[0]``."""

from __future__ import annotations

from collections.abc import Sequence

ConfigPath = tuple[str | int, ...]


def format_path(path: Sequence[str | int]) -> str:
    """``("contract", "invariants", 0, "severity")`` -> ``contract.invariants[0].severity``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
