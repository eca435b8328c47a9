"""Wording mutations: the same request said differently.

- ``paraphrase`` (offline: template rephrasing — frames, clause reordering and a bundled
  synonym table; the report names the transform, so it says so);
- ``noise``: typos by keyboard adjacency, swapped and doubled letters, random case, spacing;
- ``tone_shift``: angry, casual, stiffly formal, urgent, passive-aggressive.

The lookalikes (meaning swaps, languages) are in :mod:`flakestorm.mutations.lookalikes`, the
extremes (length, dates) in :mod:`flakestorm.mutations.extremes`.

The text helpers are the chaos layer's (:mod:`flakestorm.chaos.llm.text`): the same
contractions and phrase swapping the LLM tone drift uses.
"""

from __future__ import annotations

import random
import re

from flakestorm.chaos.llm.text import CONTRACTIONS, sentences, swap_phrases
from flakestorm.config import MutationType
from flakestorm.mutations.unit import MutationUnit, framed, prompt_transform

WORD = re.compile(r"[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")


def lower_first(text: str) -> str:
    """``text`` to follow a comma: its first letter lower-cased, unless the first word is
    ``I`` or an acronym (``AAPL``)."""
    first = WORD.match(text.lstrip())
    if first is not None and (first.group(0) == "I" or first.group(0).isupper()):
        return text
    return text[:1].lower() + text[1:]


def strip_end(text: str) -> str:
    return text.strip().rstrip("?.!")


# --------------------------------------------------------------------------- paraphrase

PARAPHRASE_SYNONYMS: tuple[tuple[str, str], ...] = (
    ("what is", "what's"),
    ("how much", "what amount"),
    ("tell me", "let me know"),
    ("show me", "give me"),
    ("price", "cost"),
    ("buy", "purchase"),
    ("get", "obtain"),
    ("help", "assist"),
    ("need", "require"),
    ("want", "would like"),
    ("find", "look up"),
    ("check", "verify"),
    ("current", "present"),
    ("quickly", "fast"),
    ("big", "large"),
    ("small", "little"),
    ("start", "begin"),
    ("end", "finish"),
    ("about", "regarding"),
    ("because", "since"),
    ("explain", "describe"),
    ("answer", "reply"),
    ("question", "query"),
    ("today", "this day"),
    ("can you", "could you"),
    ("please", "kindly"),
)
"""The bundled synonym table: (phrase, replacement), whole words, case kept."""


@prompt_transform("template_polite_frame", "'Could you tell me: <prompt>'")
def _polite(prompt: str, rng: random.Random) -> str:
    frame = rng.choice(
        (
            "Could you tell me: {p}?",
            "I was wondering, {p}?",
            "Quick question: {p}?",
            "Would you mind letting me know: {p}?",
        )
    )
    return frame.format(p=lower_first(strip_end(prompt)))


@prompt_transform("template_synonyms", "'what is the price' -> \"what's the cost\"")
def _synonyms(prompt: str, rng: random.Random) -> str:
    pairs = list(PARAPHRASE_SYNONYMS)
    rng.shuffle(pairs)
    out = swap_phrases(prompt, pairs)
    if out == prompt:
        return f"In other words: {prompt}"
    return out


@prompt_transform("template_clause_reorder", "'A, and B' -> 'B, and A'")
def _reorder(prompt: str, rng: random.Random) -> str:
    parts = sentences(prompt)
    if len(parts) > 1:
        rng.shuffle(parts)
        out = " ".join(parts)
        return out if out != prompt else " ".join(parts[::-1])
    for sep in (", and ", " and ", ", ", " for ", " in "):
        if sep in prompt:
            left, right = prompt.split(sep, 1)
            return f"{strip_end(right)}{sep}{lower_first(left)}".strip() + "?"
    return f"Regarding {lower_first(strip_end(prompt))}: what can you say?"


@prompt_transform("template_imperative", "'What is X?' -> 'Tell me X.'")
def _imperative(prompt: str, rng: random.Random) -> str:
    core = strip_end(prompt)
    lead = rng.choice(("Tell me", "Explain", "I need to know", "Give me the answer to"))
    return f"{lead}: {lower_first(core)}."


PARAPHRASE = MutationUnit(
    MutationType.PARAPHRASE,
    (_polite, _synonyms, _reorder, _imperative),
    "Template rephrasing (offline): frames, a synonym table, clause reordering.",
)

# --------------------------------------------------------------------------- noise

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
KEYBOARD_NEIGHBOURS = {
    c: "".join(
        _ROWS[r2][c2]
        for r2 in range(max(0, r - 1), min(3, r + 2))
        for c2 in range(max(0, i - 1), min(len(_ROWS[r2]), i + 2))
        if (r2, c2) != (r, i)
    )
    for r, row in enumerate(_ROWS)
    for i, c in enumerate(row)
}
"""Each letter's neighbours on a QWERTY keyboard."""


def _letter_spots(prompt: str, rng: random.Random, share: float = 0.08) -> list[int]:
    spots = [m.start() for m in _LETTER.finditer(prompt)]
    if not spots:
        return []
    return sorted(rng.sample(spots, max(1, round(len(spots) * share))))


def _with_fallback(prompt: str, out: str) -> str:
    return out if out != prompt else prompt + prompt[-1:] if prompt else " "


@prompt_transform("keyboard_typos", "'price' -> 'prixe' (adjacent keys)")
def _typos(prompt: str, rng: random.Random) -> str:
    chars = list(prompt)
    for i in _letter_spots(prompt, rng):
        near = KEYBOARD_NEIGHBOURS[chars[i].lower()]
        new = rng.choice(near)
        chars[i] = new.upper() if chars[i].isupper() else new
    return _with_fallback(prompt, "".join(chars))


@prompt_transform("transposed_letters", "'trading' -> 'tradnig'")
def _transpose(prompt: str, rng: random.Random) -> str:
    chars = list(prompt)
    for i in _letter_spots(prompt, rng):
        if i + 1 < len(chars) and chars[i + 1].isalpha() and chars[i] != chars[i + 1]:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return _with_fallback(prompt, "".join(chars))


@prompt_transform("dropped_and_doubled", "'trading' -> 'tradding', 'at' -> 't'")
def _drop_double(prompt: str, rng: random.Random) -> str:
    spots = set(_letter_spots(prompt, rng))
    out = []
    for i, c in enumerate(prompt):
        if i in spots:
            out.append(c * 2 if rng.random() < 0.5 else "")
        else:
            out.append(c)
    return _with_fallback(prompt, "".join(out))


@prompt_transform("random_case", "'wHaT iS aapl TRADING at?'")
def _case(prompt: str, rng: random.Random) -> str:
    out = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in prompt)
    return (
        out if out != prompt else prompt.swapcase() if prompt.swapcase() != prompt else prompt + "!"
    )


@prompt_transform("messy_spacing", "'what  is AAPL trading at ? ?'")
def _spacing(prompt: str, rng: random.Random) -> str:
    words = prompt.split(" ")
    out = " ".join(w + (" " * rng.randint(1, 3) if rng.random() < 0.3 else "") for w in words)
    return f"  {out} ?? "


NOISE = MutationUnit(
    MutationType.NOISE,
    (_typos, _transpose, _drop_double, _case, _spacing),
    "Typing noise: keyboard-adjacent typos, swapped, dropped and doubled letters, case, spacing.",
)

# --------------------------------------------------------------------------- tone


@prompt_transform("angry", "'WHAT IS AAPL TRADING AT?!! Answer NOW.'")
def _angry(prompt: str, rng: random.Random) -> str:
    tail = rng.choice(("Answer NOW.", "This is ridiculous!!", "I've asked three times already!"))
    return f"{strip_end(prompt).upper()}?!! {tail}"


@prompt_transform("casual", "'hey so basically, what's …? thx'")
def _casual(prompt: str, rng: random.Random) -> str:
    body = lower_first(swap_phrases(prompt.strip(), CONTRACTIONS))
    return f"hey so basically, {body} thx :)"


@prompt_transform("formal", "'Good day. I would be most grateful if you could …'")
def _formal(prompt: str, rng: random.Random) -> str:
    body = swap_phrases(prompt.strip(), [(new, old) for old, new in CONTRACTIONS])
    return (
        f"Good day. I would be most grateful if you could assist with the following enquiry: "
        f"{body} Kind regards."
    )


_urgent = framed(
    "urgent",
    "'URGENT - production is down: <prompt>'",
    before="URGENT!!! Production is down and my boss is waiting: ",
    after=" Need this in 30 seconds.",
)


_passive = framed(
    "passive_aggressive",
    "'As I already asked (twice), …'",
    before="As I already asked (twice), ",
    after=" Thanks SO much for your help.",
    shape=lambda prompt: lower_first(prompt.strip()),
)


TONE_SHIFT = MutationUnit(
    MutationType.TONE_SHIFT,
    (_angry, _casual, _formal, _urgent, _passive),
    "The same request in another tone: angry, casual, formal, urgent, passive-aggressive.",
)

UNITS = (PARAPHRASE, NOISE, TONE_SHIFT)
