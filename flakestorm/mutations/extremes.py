"""Extreme mutations: the request at the edges of length and time.

- ``length_extremes``: minimal keywords, a half prompt, a very long prompt, the prompt
  repeated;
- ``temporal_attack``: impossible, far-future, far-past, conflicting and paradoxical dates.
"""

from __future__ import annotations

import random

from flakestorm.config import MutationType
from flakestorm.mutations.unit import MutationUnit, framed, prompt_transform
from flakestorm.mutations.wording import WORD, lower_first, strip_end

# --------------------------------------------------------------------------- length

LONG_CHARS = 12_000
"""About how long the ``very_long`` variant is (characters)."""


@prompt_transform("minimal_keywords", "'AAPL trading?' (its three main words)")
def _minimal(prompt: str, rng: random.Random) -> str:
    words = [w for w in WORD.findall(prompt) if len(w) > 3 or w.isupper()]
    if not words:
        return prompt[: max(1, len(prompt) // 2)] if len(prompt) > 1 else "?"
    # the three longest words (names and tickers first), in their order
    ranked = sorted(range(len(words)), key=lambda i: (not words[i].isupper(), -len(words[i])))
    out = " ".join(words[i] for i in sorted(ranked[:3])) + "?"
    return out if out != prompt else words[0]


@prompt_transform("half_prompt", "'What is AAPL tr'")
def _half(prompt: str, rng: random.Random) -> str:
    return prompt[: max(1, len(prompt) // 2)] if len(prompt) > 1 else "?"


@prompt_transform("very_long", "the prompt after ~12,000 characters of rambling context")
def _long(prompt: str, rng: random.Random) -> str:
    filler = (
        "Let me give you some background first, because context matters a lot here. ",
        "I have been reading about this for weeks and I keep finding contradicting sources. ",
        "Some people say one thing, others say the opposite, and it is hard to know. ",
        "I want to be thorough, so please bear with me while I explain everything. ",
    )
    parts = []
    size = 0
    while size < LONG_CHARS:
        part = rng.choice(filler)
        parts.append(part)
        size += len(part)
    return "".join(parts) + f"\n\nSo, my actual question: {prompt}"


@prompt_transform("repeated", "the prompt repeated 40 times")
def _repeated(prompt: str, rng: random.Random) -> str:
    return " ".join([prompt.strip()] * 40)


LENGTH_EXTREMES = MutationUnit(
    MutationType.LENGTH_EXTREMES,
    (_minimal, _long, _half, _repeated),
    "Minimal and very long versions of the prompt.",
)

# --------------------------------------------------------------------------- dates


@prompt_transform("impossible_date", "prompt + 'as of February 30, 2025'")
def _impossible(prompt: str, rng: random.Random) -> str:
    date = rng.choice(("February 30, 2025", "2023-02-29", "April 31st", "the 32nd of March"))
    return f"{strip_end(prompt)}, as of {date}?"


@prompt_transform("far_future", "'As of 2099-12-31, …'")
def _future(prompt: str, rng: random.Random) -> str:
    year = rng.randint(2090, 2150)
    return f"As of {year}-12-31, {lower_first(prompt.strip())}"


@prompt_transform("far_past", "'Back in 1887, …'")
def _past(prompt: str, rng: random.Random) -> str:
    year = rng.randint(1850, 1899)
    return f"Back in {year}, {lower_first(prompt.strip())}"


_conflict = framed(
    "conflicting_dates",
    "'Today is 2024-01-01. (It is 2031 now.) …'",
    before="Today is 2024-01-01. ",
    after=" Note: it is currently March 2031, and yesterday was 2019-07-04.",
    shape=str.strip,
)


_paradox = framed(
    "relative_paradox",
    "'… yesterday, which is tomorrow'",
    after=" yesterday, which is the day after tomorrow?",
    shape=strip_end,
)


TEMPORAL_ATTACK = MutationUnit(
    MutationType.TEMPORAL_ATTACK,
    (_impossible, _future, _past, _conflict, _paradox),
    "Impossible, far-off and conflicting dates.",
)

UNITS = (LENGTH_EXTREMES, TEMPORAL_ATTACK)
