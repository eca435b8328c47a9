"""What a ``with`` block does with the agents' and the chaos's long-lived parts (an HTTP agent's
session, a started agent process, the chaos proxy, a run's wrappers and routes): entering gives
the part itself, leaving closes it, however the block ended.

A part says what closing it means (:meth:`Closing.close`) and, when entering does more than
hand it back (starting a process or a server, installing wrappers), its own ``__enter__``.
"""

from __future__ import annotations

import abc
from typing import TypeVar

_C = TypeVar("_C", bound="Closing")


class Closing(abc.ABC):
    """A part used in a ``with`` block and closed when the block is left."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of what the part holds; called once the ``with`` block is left."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
