"""Conversation ids for ``agent.session`` (SPEC §9): each cell (and each repeat, mutation or
replayed session) is its own conversation with the agent, so cells are isolated without a
reset. The id is sent in the configured header or fills ``{session_id}`` in the request
template (:mod:`flakestorm.agents.http`)."""

from __future__ import annotations

import hashlib


def session_id(seed: int, key: str) -> str:
    """The conversation id of ``key`` (``cell#run``, ``mutation:ID#run``, or a pre-matrix
    invocation): the same for the same seed, so a rerun repeats it, and different for every
    key. 32 hex digits: safe in a header and in JSON as it is."""
    return hashlib.sha256(f"flakestorm-session\x00{seed}\x00{key}".encode()).hexdigest()[:32]
