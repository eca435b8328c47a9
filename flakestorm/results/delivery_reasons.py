"""Why a declared fault was not delivered, in words (SPEC §4, §10): the sentences
:meth:`~flakestorm.results.model.ScenarioInfo.why` builds from a scenario's delivery proof alone, so
a merged run says the same as an unsharded one.

- :func:`replaced`: a context attack whose every matching call a fault answered in place of
  the tool (a tool fault that replaces the result) or of the LLM (an LLM fault that stops the
  request before it reaches the LLM);
- :func:`saw`: what flakestorm saw instead of a call matching a fault, leading its wiring hint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TOOL_OF_LABEL = re.compile(r" on (\S+)$")
_LLM_SIDE = ("llm_faults", "injection_via_context")
"""What a label of a fault acting on LLM calls contains."""


def llm_side(label: str) -> bool:
    """Whether the fault ``label`` acts on LLM calls (an LLM fault, ``injection_via_context``)."""
    return any(part in label for part in _LLM_SIDE)


def replaced(attack: str, by: Mapping[str, int]) -> str:
    """Why the context attack ``attack`` was not delivered when a fault answered every call it
    matched, ``by`` counting those calls per fault label."""
    total = sum(by.values())
    counted = "; ".join(f"{fault}: {n}" for fault, n in by.items())
    if llm_side(attack):
        if len(by) == 1:
            (fault,) = by
            answered = f"{fault} answered {'it' if total == 1 else 'each one'}"
        else:
            answered = f"an LLM fault answered each one ({counted})"
        return (
            f"it matched {calls(total, 'LLM call')} but {answered} instead of the LLM: "
            "no request carrying it reached the LLM"
        )
    if len(by) == 1:
        (fault,) = by
        whose = "its result was" if total == 1 else "each one's result was"
        return f"it matched {calls(total)} but {whose} replaced by {fault}: nothing was poisoned"
    return (
        f"it matched {calls(total)} but each one's result was replaced by a tool fault "
        f"({counted}): nothing was poisoned"
    )


def saw(seen: Mapping[str, int], label: str) -> str:
    """What flakestorm saw instead of a call matching ``label``, in a sentence."""
    total = sum(seen.values())
    if not total:
        return "flakestorm saw no call in this scenario"
    on_llm = llm_side(label)
    match = _TOOL_OF_LABEL.search(label)
    tool = match.group(1) if match is not None and not on_llm else None
    forward = {k[len("forward ") :]: n for k, n in seen.items() if k.startswith("forward ")}
    if not on_llm and forward:
        origin, n = max(forward.items(), key=lambda item: item[1])
        rest = sum(forward.values()) - n
        more = f" (and {rest} to {len(forward) - 1} other hosts)" if rest else ""
        return (
            f"flakestorm saw {calls(n, 'forward-proxy call')} to {origin.partition('://')[2]}"
            f"{more}, none mapped to a tool: add it to proxy.tools "
            f"(proxy.tools.{tool or '<name>'}: {origin})"
        )
    listed = ", ".join(f"{n} {_kind(k)}" for k, n in seen.items())
    wanted = "an LLM endpoint" if on_llm else (f"`{tool}`" if tool else "a tool")
    return f"flakestorm saw {calls(total)} ({listed}), none to {wanted}"


def calls(n: int, what: str = "call") -> str:
    """``1 call``, ``3 calls``."""
    return f"{n} {what}{'' if n == 1 else 's'}"


def _kind(key: str) -> str:
    kind, _, name = key.partition(" ")
    return {"tool": f"to tool `{name}`", "llm": "to an LLM", "forward": f"to {name}"}.get(
        kind, "other"
    )
