"""Shards: one run's work split over N processes or CI jobs (SPEC §9), and what they share.

A :class:`Shard` ``K/N`` runs a deterministic 1/N of every phase's items (contract cells,
mutations, sessions): item ``i`` of a phase (its stable index, 0-based, the order the phase
plans its items in) belongs to shard ``i mod N + 1``. Dealing round-robin keeps the shards
balanced and runs every item in exactly one shard, whatever the phase.

Shards of one run must have been run from the same config and seed: each records the
:func:`config_digest` of the config it ran, and ``flakestorm merge`` refuses shards whose digests
or seeds differ.

The digest is the SHA-256 of the resolved config as canonical JSON (:func:`config_document`):
every field with its default filled in, after ``${VAR}`` expansion and the command line's
overrides (``--seed``, ``--agent-url``, …), with every value that came from the environment
replaced by ``***``. So comments and formatting do not change it, a changed field or default
does, and secrets are never hashed (a digest cannot be used to guess one).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from flakestorm.redaction import Redactor, redact_data

_T = TypeVar("_T")
_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
MAX_SHARDS = 1000


class ShardError(ValueError):
    """A shard written wrongly (``--shard 0/4``, ``5/4``, ``two``)."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``total`` (1-based: ``1/4`` … ``4/4``)."""

    index: int
    total: int

    def __post_init__(self) -> None:
        if not (1 <= self.total <= MAX_SHARDS and 1 <= self.index <= self.total):
            raise ShardError(
                f"shard {self.index}/{self.total} does not exist (K/N with 1 ≤ K ≤ N ≤ "
                f"{MAX_SHARDS}, e.g. 2/4)"
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` → ``Shard(2, 4)``; :class:`ShardError` says what is valid otherwise."""
        match = _SHARD.fullmatch(text)
        if match is None:
            raise ShardError(f"{text!r} is not a shard: write K/N, e.g. 2/4 (shard 2 of 4)")
        return cls(int(match.group(1)), int(match.group(2)))

    def owns(self, index: int) -> bool:
        """Whether the item at stable index ``index`` (0-based) is this shard's."""
        return index % self.total == self.index - 1

    def deal(self, items: Iterable[_T]) -> list[_T]:
        """This shard's items of ``items`` (in order; the position in ``items`` is the stable
        index)."""
        return [item for i, item in enumerate(items) if self.owns(i)]


def deal(shard: Shard | None, items: Sequence[_T]) -> list[_T]:
    """``shard``'s part of ``items`` — all of them when the run is not sharded."""
    return list(items) if shard is None else shard.deal(items)


def config_document(config: Any, secrets: Iterable[str]) -> dict[str, Any]:
    """The resolved config as a JSON document (a pydantic model: every field, by alias), with
    every value that came from the environment replaced by ``***``."""
    redactor = Redactor(secrets)
    dumped = config.model_dump(mode="json", by_alias=True)
    return redact_data(dumped, redactor) if redactor else dumped  # type: ignore[no-any-return]


NOT_DIGESTED = ("accepted",)
"""Top-level config keys that do not change what runs, only how the gate reads it (accepted
failures): a run's digest, and so its baseline, stays the same when they change."""


def digest_of(document: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of ``document`` as canonical JSON (without :data:`NOT_DIGESTED`)."""
    kept = {k: v for k, v in document.items() if k not in NOT_DIGESTED}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def config_digest(config: Any, secrets: Iterable[str]) -> str:
    """The digest shards of one run share (see the module docstring)."""
    return digest_of(config_document(config, secrets))
