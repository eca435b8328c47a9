"""Which LLM SDK method a python agent's framework really calls, when ``agent.llm`` names one.

A framework picks its SDK method itself: Pydantic AI's ``openai:`` models call the Responses
API (``responses.create``), its chat models ``chat.completions.create``. When ``agent.llm``
names one and the framework calls another, the LLM faults are not delivered, and the hint
should name the method it did call rather than blame the wiring. So while a run wraps an SDK
method, :class:`SdkWatch` counts the calls of its siblings in the same SDK (observe only: each
call goes on to the method unchanged), and :meth:`SdkWatch.called` lists them for one
scenario: the hint of a scenario's undelivered fault counts that scenario's calls only, as
what flakestorm saw of the scenario does.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from flakestorm.agents.closing import Closing

SDK_METHODS: dict[str, tuple[str, ...]] = {
    "openai": (
        "openai.resources.chat.completions:Completions.create",
        "openai.resources.chat.completions:AsyncCompletions.create",
        "openai.resources.chat.completions:Completions.parse",
        "openai.resources.chat.completions:AsyncCompletions.parse",
        "openai.resources.responses:Responses.create",
        "openai.resources.responses:AsyncResponses.create",
        "openai.resources.responses:Responses.stream",
        "openai.resources.responses:AsyncResponses.stream",
        "openai.resources.completions:Completions.create",
        "openai.resources.completions:AsyncCompletions.create",
    ),
    "anthropic": (
        "anthropic.resources.messages:Messages.create",
        "anthropic.resources.messages:AsyncMessages.create",
        "anthropic.resources.messages:Messages.stream",
        "anthropic.resources.messages:AsyncMessages.stream",
    ),
}
"""The generation methods of each SDK, as ``module:Class.method`` (what ``agent.llm`` takes)."""


Seen = Counter[tuple[str, str]]
"""Calls counted by scenario and method."""


def _counting(
    name: str, original: Callable[..., Any], seen: Seen, scenario: Callable[[], str]
) -> Any:
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            seen[scenario(), name] += 1
            return await original(*args, **kwargs)

        return counted_async

    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        seen[scenario(), name] += 1
        return original(*args, **kwargs)

    return counted


class SdkWatch(Closing):
    """Counts the calls of the SDK methods beside ``wrapped`` (``agent.llm``) while entered;
    nothing when ``wrapped`` is not an SDK method, or its SDK is not imported. ``scenario()``
    names the scenario a call is made in (that of the invocation making it)."""

    def __init__(self, wrapped: str | None, scenario: Callable[[], str] = lambda: "") -> None:
        package = (wrapped or "").partition(".")[0]
        loaded = package in SDK_METHODS and package in sys.modules
        self._names = [m for m in SDK_METHODS.get(package, ()) if loaded and m != wrapped]
        self._seen: Seen = Counter()
        self._scenario = scenario
        self._restores: list[Callable[[], None]] = []

    def __enter__(self) -> SdkWatch:
        for name in self._names:
            module_name, _, path = name.partition(":")
            owner_name, _, attr = path.rpartition(".")
            try:
                owner = getattr(importlib.import_module(module_name), owner_name)
            except (ImportError, AttributeError):  # another version of the SDK
                continue
            original = vars(owner).get(attr)
            if not inspect.isfunction(original):
                continue
            setattr(owner, attr, _counting(name, original, self._seen, self._scenario))
            self._restores.append(functools.partial(setattr, owner, attr, original))
        return self

    def close(self) -> None:
        """Put the SDK's methods back."""
        while self._restores:
            self._restores.pop()()

    def called(self, scenario: str) -> list[tuple[str, int]]:
        """The watched methods the agent called in ``scenario``, most called first, with
        their counts."""
        return [(name, n) for (where, name), n in self._seen.most_common() if where == scenario]

    def forget(self, scenario: str) -> None:
        """Drop ``scenario``'s counts (its hints are made)."""
        for key in [key for key in self._seen if key[0] == scenario]:
            del self._seen[key]
