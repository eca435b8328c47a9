"""Wording mutations: the same request said differently, or something that looks the same but
means something else.

- ``paraphrase`` (offline: template rephrasing — frames, clause reordering and a bundled
  synonym table; the report names the transform, so it says so);
- ``noise``: typos by keyboard adjacency, swapped and doubled letters, random case, spacing;
- ``tone_shift``: angry, casual, stiffly formal, urgent, passive-aggressive;
- ``semantic_similarity_attack``: negation, number, entity, antonym and unit swaps that look
  alike but mean something else;
- ``language_mixing``: words in other languages, mixed scripts, emoji, a right-to-left mark;
- ``length_extremes``: minimal keywords, a half prompt, a very long prompt;
- ``temporal_attack``: impossible, far-future, far-past and conflicting dates.

The text helpers are the chaos layer's (:mod:`flakestorm.chaos.llm.text`): the same
contractions and phrase swapping the LLM tone drift uses.
"""

from __future__ import annotations

import random
import re

from flakestorm.chaos.llm.text import CONTRACTIONS, sentences, swap_phrases
from flakestorm.config import MutationType
from flakestorm.mutations.encodings import HOMOGLYPHS
from flakestorm.mutations.unit import MutationUnit, prompt_transform

_WORD = re.compile(r"[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != "I " else text


def _strip_end(text: str) -> str:
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
    return frame.format(p=_lower_first(_strip_end(prompt)))


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
            return f"{_strip_end(right)}{sep}{_lower_first(left)}".strip() + "?"
    return f"Regarding {_lower_first(_strip_end(prompt))}: what can you say?"


@prompt_transform("template_imperative", "'What is X?' -> 'Tell me X.'")
def _imperative(prompt: str, rng: random.Random) -> str:
    core = _strip_end(prompt)
    lead = rng.choice(("Tell me", "Explain", "I need to know", "Give me the answer to"))
    return f"{lead}: {_lower_first(core)}."


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
    return f"{_strip_end(prompt).upper()}?!! {tail}"


@prompt_transform("casual", "'hey so basically, what's …? thx'")
def _casual(prompt: str, rng: random.Random) -> str:
    body = _lower_first(swap_phrases(prompt.strip(), CONTRACTIONS))
    return f"hey so basically, {body} thx :)"


@prompt_transform("formal", "'Good day. I would be most grateful if you could …'")
def _formal(prompt: str, rng: random.Random) -> str:
    body = swap_phrases(prompt.strip(), [(new, old) for old, new in CONTRACTIONS])
    return (
        f"Good day. I would be most grateful if you could assist with the following enquiry: "
        f"{body} Kind regards."
    )


@prompt_transform("urgent", "'URGENT - production is down: <prompt>'")
def _urgent(prompt: str, rng: random.Random) -> str:
    return f"URGENT!!! Production is down and my boss is waiting: {prompt} Need this in 30 seconds."


@prompt_transform("passive_aggressive", "'As I already asked (twice), …'")
def _passive(prompt: str, rng: random.Random) -> str:
    return (
        f"As I already asked (twice), {_lower_first(prompt.strip())} Thanks SO much for your help."
    )


TONE_SHIFT = MutationUnit(
    MutationType.TONE_SHIFT,
    (_angry, _casual, _formal, _urgent, _passive),
    "The same request in another tone: angry, casual, formal, urgent, passive-aggressive.",
)

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
        return prompt[: match.end()] + " not" + prompt[match.end() :]
    return f"Do not {_lower_first(prompt.strip())}"


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
    words = list(_WORD.finditer(prompt))
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

# --------------------------------------------------------------------------- length

LONG_CHARS = 12_000
"""About how long the ``very_long`` variant is (characters)."""


@prompt_transform("minimal_keywords", "'AAPL trading?'")
def _minimal(prompt: str, rng: random.Random) -> str:
    words = [w for w in _WORD.findall(prompt) if len(w) > 3 or w.isupper()]
    if not words:
        return prompt[: max(1, len(prompt) // 2)] if len(prompt) > 1 else "?"
    out = " ".join(words[-2:]) + "?"
    return out if out != prompt else words[-1]


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
    return f"{_strip_end(prompt)}, as of {date}?"


@prompt_transform("far_future", "'As of 2099-12-31, …'")
def _future(prompt: str, rng: random.Random) -> str:
    year = rng.randint(2090, 2150)
    return f"As of {year}-12-31, {_lower_first(prompt.strip())}"


@prompt_transform("far_past", "'Back in 1887, …'")
def _past(prompt: str, rng: random.Random) -> str:
    year = rng.randint(1850, 1899)
    return f"Back in {year}, {_lower_first(prompt.strip())}"


@prompt_transform("conflicting_dates", "'Today is 2024-01-01. (It is 2031 now.) …'")
def _conflict(prompt: str, rng: random.Random) -> str:
    return (
        f"Today is 2024-01-01. {prompt.strip()} Note: it is currently March 2031, and yesterday "
        "was 2019-07-04."
    )


@prompt_transform("relative_paradox", "'… yesterday, which is tomorrow'")
def _paradox(prompt: str, rng: random.Random) -> str:
    return f"{_strip_end(prompt)} yesterday, which is the day after tomorrow?"


TEMPORAL_ATTACK = MutationUnit(
    MutationType.TEMPORAL_ATTACK,
    (_impossible, _future, _past, _conflict, _paradox),
    "Impossible, far-off and conflicting dates.",
)

UNITS = (
    PARAPHRASE,
    NOISE,
    TONE_SHIFT,
    SEMANTIC_SIMILARITY_ATTACK,
    LANGUAGE_MIXING,
    LENGTH_EXTREMES,
    TEMPORAL_ATTACK,
)
