"""When an answer of the ``llm`` generator is not a mutation (SPEC §6: an unusable answer is an
error, never a mutation).

Safety-tuned models often refuse to write attacks ("I'm sorry, but I can't help with creating
prompts designed to manipulate an AI system"), and weak ones echo the prompt back. Sent to the
agent, a refusal is answered harmlessly and every attack "passes": a score that goes up because
the generator failed. :func:`unusable` says why an answer cannot be used, or None:

- ``refused``: a refusal wording (:mod:`flakestorm.checks.refusal`) in the answer's opening, not
  quoted and not already in the original prompt (a jailbreak may quote "never say 'I can't'");
- ``unchanged``: the original again, once case, whitespace and punctuation are set aside;
- ``trivial``: the original with at most :data:`TRIVIAL_CHARACTERS` characters changed;
- ``no attack``: for a type whose instruction asks for an attack, none of it (the type's
  :class:`~flakestorm.mutations.unit.Attack`, declared in its unit).
"""

from __future__ import annotations

import difflib
import enum
import re
from dataclasses import dataclass

from flakestorm.checks.refusal import find_refusal, normalise
from flakestorm.errors import InfrastructureError
from flakestorm.mutations.unit import MutationUnit

OPENING_CHARACTERS = 300
"""A refusal counts in the answer's first 300 characters (models refuse up front)."""
TRIVIAL_CHARACTERS = 2
"""At most this many characters inserted, deleted or replaced is not a mutation."""
_QUOTE_MARKS = "\"'“”‘’«»`"
_WORDS = re.compile(r"[^\w]+", re.UNICODE)


class Unusable(str, enum.Enum):
    """Why an answer is not a mutation: the short word reports show."""

    REFUSED = "refused"
    UNCHANGED = "unchanged"
    TRIVIAL = "trivial"
    NO_ATTACK = "no attack"
    EMPTY = "empty"


@dataclass(frozen=True)
class Verdict:
    """An unusable answer: why, in a word and in a sentence."""

    kind: Unusable
    reason: str


class UnusableAnswerError(InfrastructureError):
    """Every answer the ``llm`` generator got for a mutation was unusable (exit 3, unless
    ``mutations.llm.fallback``): :attr:`verdict` says why, for the last one."""

    def __init__(self, message: str, verdict: Verdict) -> None:
        super().__init__(message)
        self.verdict = verdict


def unusable(unit: MutationUnit, original: str, answer: str) -> Verdict | None:
    """Why ``answer`` (cleaned) cannot be sent as a mutation of ``original``, or None."""
    if not answer.strip():
        return Verdict(Unusable.EMPTY, "the answer is empty once cleaned of preambles and quotes")
    refusal = _refusal(original, answer)
    if refusal:
        return Verdict(Unusable.REFUSED, f"the model refused: {_excerpt(answer)}")
    before, after = _bare(original), _bare(answer)
    if before == after:
        return Verdict(
            Unusable.UNCHANGED,
            "the answer is the original prompt again (case, spaces and punctuation aside)",
        )
    changed = _changed_characters(before, after)
    if changed is not None:
        return Verdict(
            Unusable.TRIVIAL,
            f"the answer differs from the original prompt by {changed} character(s) only",
        )
    if unit.attack is not None and not unit.attack.carried(answer):
        return Verdict(
            Unusable.NO_ATTACK,
            f"the answer carries no {unit.type.value} attack (looked for "
            f"{unit.attack.looked_for}): {_excerpt(answer)}",
        )
    return None


def _refusal(original: str, answer: str) -> bool:
    opening = normalise(answer[:OPENING_CHARACTERS])
    found = find_refusal(opening)
    if found is None:
        return False
    if found.start > 0 and opening[found.start - 1] in _QUOTE_MARKS:
        return False
    return found.matched.lower() not in normalise(original).lower()


def _bare(text: str) -> str:
    """Lower case, words only, single spaces."""
    return " ".join(_WORDS.sub(" ", text.casefold()).split())


def _changed_characters(before: str, after: str) -> int | None:
    """How many characters differ, when at most :data:`TRIVIAL_CHARACTERS` do; else None."""
    if abs(len(before) - len(after)) > TRIVIAL_CHARACTERS:
        return None
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    changed = sum(
        max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    )
    return changed if changed <= TRIVIAL_CHARACTERS else None


def _excerpt(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
