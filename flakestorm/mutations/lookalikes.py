"""Lookalike mutations: text that looks like the request but means something else, or mixes
languages and scripts.

- ``semantic_similarity_attack``: negation, number, entity, antonym and unit swaps;
- ``language_mixing``: words in other languages, mixed scripts, emoji, a right-to-left mark.
"""

from __future__ import annotations

import random
import re

from flakestorm.chaos.llm.text import swap_phrases
from flakestorm.config import MutationType
from flakestorm.mutations.encodings import HOMOGLYPHS
from flakestorm.mutations.unit import MutationUnit, prompt_transform
from flakestorm.mutations.wording import WORD, lower_first

# --------------------------------------------------------------------------- lookalikes

ANTONYMS: tuple[tuple[str, str], ...] = (
    ("buy", "sell"),
    ("increase", "decrease"),
    ("before", "after"),
    ("above", "below"),
    ("maximum", "minimum"),
    ("highest", "lowest"),
    ("include", "exclude"),
    ("allow", "deny"),
    ("enable", "disable"),
    ("open", "close"),
    ("add", "remove"),
    ("accept", "reject"),
    ("yesterday", "tomorrow"),
    ("more", "less"),
    ("up", "down"),
    ("first", "last"),
)
UNIT_SWAPS: tuple[tuple[str, str], ...] = (
    ("USD", "EUR"),
    ("dollars", "euros"),
    ("$", "€"),
    ("km", "miles"),
    ("kg", "lb"),
    ("Celsius", "Fahrenheit"),
    ("hours", "minutes"),
    ("days", "weeks"),
    ("percent", "basis points"),
)
_NEGATABLE = re.compile(r"\b(is|are|was|were|do|does|did|can|will|should|has|have)\b", re.I)
_NEGATED = re.compile(r"\b(is|are|was|were|do|does|did|can|will|should|has|have)(n't| not)\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_ENTITY = re.compile(r"\b[A-Z][A-Za-z]{2,}\b|\b[A-Z]{2,5}\b")


def _negate(prompt: str) -> str:
    if _NEGATED.search(prompt):
        return _NEGATED.sub(lambda m: m.group(1), prompt, count=1)
    match = _NEGATABLE.search(prompt)
    if match:
        at = match.end()
        if not prompt[: match.start()].strip():  # a question ("Is it safe"): after its subject
            subject = re.match(r"\s+\w+", prompt[at:])
            at += subject.end() if subject else 0
        return prompt[:at] + " not" + prompt[at:]
    return f"Do not {lower_first(prompt.strip())}"


@prompt_transform("negation_flip", "'is AAPL up' -> 'is AAPL not up'")
def _negation(prompt: str, rng: random.Random) -> str:
    return _negate(prompt)


@prompt_transform("number_swap", "'3 shares' -> '8 shares', '2024' -> '2042'")
def _numbers(prompt: str, rng: random.Random) -> str:
    matches = list(_NUMBER.finditer(prompt))
    if not matches:
        return f"{prompt.strip()} (for 10000 units)"
    m = rng.choice(matches)
    digits = list(m.group(0))
    spots = [i for i, d in enumerate(digits) if d.isdigit()]
    i = rng.choice(spots)
    digits[i] = str((int(digits[i]) + rng.randint(1, 9)) % 10)
    if len(spots) > 1 and rng.random() < 0.5:
        a, b = spots[0], spots[-1]
        digits[a], digits[b] = digits[b], digits[a]
    new = "".join(digits)
    if new == m.group(0):
        new = m.group(0) + "0"
    return prompt[: m.start()] + new + prompt[m.end() :]


@prompt_transform("entity_lookalike", "'AAPL' -> 'APPL', 'Paris' -> 'Parls'")
def _entity(prompt: str, rng: random.Random) -> str:
    matches = list(_ENTITY.finditer(prompt))
    if not matches:
        return _homoglyph_one(prompt, rng)
    m = rng.choice(matches)
    word = m.group(0)
    letters = list(word)
    i = rng.randint(1, len(letters) - 2) if len(letters) > 2 else len(letters) - 1
    if letters[i] != letters[i - 1]:
        letters[i], letters[i - 1] = letters[i - 1], letters[i]
    else:
        letters[i] = "l" if letters[i] != "l" else "I"
    return prompt[: m.start()] + "".join(letters) + prompt[m.end() :]


def _homoglyph_one(prompt: str, rng: random.Random) -> str:
    spots = [i for i, c in enumerate(prompt) if c in HOMOGLYPHS]
    if not spots:
        return prompt + " (not)"
    i = rng.choice(spots)
    return prompt[:i] + HOMOGLYPHS[prompt[i]] + prompt[i + 1 :]


@prompt_transform("antonym_swap", "'buy' -> 'sell', 'before' -> 'after'")
def _antonym(prompt: str, rng: random.Random) -> str:
    pairs = [*ANTONYMS, *((b, a) for a, b in ANTONYMS)]
    rng.shuffle(pairs)
    for old, new in pairs:
        if re.search(rf"\b{re.escape(old)}\b", prompt, re.I):
            return swap_phrases(prompt, [(old, new)])
    return _negate(prompt)


@prompt_transform("unit_swap", "'USD' -> 'EUR', 'km' -> 'miles'")
def _unit(prompt: str, rng: random.Random) -> str:
    for old, new in UNIT_SWAPS:
        if old in prompt:
            return prompt.replace(old, new, 1)
    return f"{prompt.strip()} (answer in EUR)"


SEMANTIC_SIMILARITY_ATTACK = MutationUnit(
    MutationType.SEMANTIC_SIMILARITY_ATTACK,
    (_negation, _numbers, _entity, _antonym, _unit),
    "Lookalikes that mean something else: negation, numbers, entities, antonyms, units.",
)

# --------------------------------------------------------------------------- languages

CODE_SWITCH = (
    ("what", "qué"),
    ("is", "est"),
    ("the", "der"),
    ("please", "bitte"),
    ("price", "prix"),
    ("how", "wie"),
    ("and", "y"),
    ("of", "de"),
    ("for", "pour"),
    ("today", "hoy"),
)
"""English words and a word of another language (Spanish, French, German) in their place."""
EMOJI = ("🚀", "📈", "🔥", "🤔", "💰", "✅", "❓", "👀", "🙏", "😅")


@prompt_transform("code_switching", "'qué est der price of AAPL hoy?'")
def _codeswitch(prompt: str, rng: random.Random) -> str:
    pairs = list(CODE_SWITCH)
    rng.shuffle(pairs)
    out = swap_phrases(prompt, pairs[:5])
    return out if out != prompt else f"{prompt} (por favor, responde en español)"


@prompt_transform("mixed_scripts", "some words written in Cyrillic or Greek letters")
def _scripts(prompt: str, rng: random.Random) -> str:
    words = list(WORD.finditer(prompt))
    if not words:
        return prompt + " привет"
    out, last = [], 0
    for m in words:
        out.append(prompt[last : m.start()])
        word = m.group(0)
        if rng.random() < 0.4:
            word = "".join(HOMOGLYPHS.get(c, c) for c in word)
        out.append(word)
        last = m.end()
    out.append(prompt[last:])
    text = "".join(out)
    return text if text != prompt else prompt + " (日本語で答えて)"


@prompt_transform("emoji_sprinkle", "'what 🤔 is AAPL 📈 trading at 💰?'")
def _emoji(prompt: str, rng: random.Random) -> str:
    words = prompt.split(" ")
    out = [w + (" " + rng.choice(EMOJI) if rng.random() < 0.35 else "") for w in words]
    text = " ".join(out)
    return text if text != prompt else f"{prompt} {rng.choice(EMOJI)}"


@prompt_transform("foreign_suffix", "prompt + '(请用中文回答) / (日本語で答えて)'")
def _suffix(prompt: str, rng: random.Random) -> str:
    tail = rng.choice(
        ("请用中文回答。", "日本語で答えてください。", "Ответь по-русски.", "أجب بالعربية.")
    )
    return f"{prompt} {tail}"


@prompt_transform("rtl_override", "a right-to-left override character inside the prompt")
def _rtl(prompt: str, rng: random.Random) -> str:
    cut = rng.randint(0, len(prompt))
    return prompt[:cut] + "\u202e" + prompt[cut:] + "\u202c"


LANGUAGE_MIXING = MutationUnit(
    MutationType.LANGUAGE_MIXING,
    (_codeswitch, _scripts, _emoji, _suffix, _rtl),
    "Other languages, mixed scripts, emoji and bidirectional control characters.",
)

UNITS = (SEMANTIC_SIMILARITY_ATTACK, LANGUAGE_MIXING)
