"""Text transforms of an LLM's answer: token counting, truncation, garbage and drift.

The LLM faults apply these to the assistant's text (:mod:`flakestorm.chaos.llm.replies`,
:mod:`flakestorm.chaos.llm.streams`, and the python wrappers through them); they are public so
that other text generators can reuse them. Pure functions: text in, text out, randomness only
from the ``random.Random`` given.

- :func:`count_tokens`, :func:`truncate_text`: a tokenizer-free token count and a cut after
  the n-th token;
- :func:`garbage_text`: random-looking text of a similar length;
- :func:`drift_text`: the answer a new model version might give (renamed JSON fields, another
  format, verbosity, refusal wording, tone), built from the pieces below:
  :data:`SYNONYMS`, :func:`rename_key` / :func:`rename_keys`, :func:`snake_to_camel` /
  :func:`camel_to_snake`, :func:`find_json`, :func:`sentences`, :data:`CONTRACTIONS` with
  :func:`swap_phrases`, and the refusal texts :data:`REFUSALS` / :data:`SOFT_REFUSALS`.
"""

from __future__ import annotations

import json
import random
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from flakestorm.config import DriftType

__all__ = [
    "CONTRACTIONS",
    "REFUSALS",
    "SOFT_REFUSALS",
    "SYNONYMS",
    "JsonInText",
    "camel_to_snake",
    "count_tokens",
    "drift_text",
    "find_json",
    "garbage_text",
    "rename_key",
    "rename_keys",
    "sentences",
    "snake_to_camel",
    "swap_phrases",
    "truncate_text",
]

# --------------------------------------------------------------------------- tokens

_TOKEN = re.compile(r"\w+|[\ud800-\udbff][\udc00-\udfff]|[^\w\s]")


def count_tokens(text: str) -> int:
    """The number of tokens in ``text``, approximated as word pieces: each run of letters,
    digits and underscores is one token, each other non-space character is one token
    (``"Hello, world!"`` is 4; a surrogate pair, as deltas that split one leave it, is one).
    Deterministic and tokenizer-free; real tokenizers give roughly the same count for English
    prose."""
    return sum(1 for _ in _TOKEN.finditer(text))


def truncate_text(text: str, max_tokens: int) -> str:
    """``text`` cut right after its ``max_tokens``-th token (see :func:`count_tokens`)."""
    if max_tokens <= 0:
        return ""
    for n, match in enumerate(_TOKEN.finditer(text), start=1):
        if n == max_tokens:
            return text[: match.end()]
    return text


# --------------------------------------------------------------------------- garbage

_SYLLABLES = (
    "qu", "zx", "vr", "ok", "lü", "ip", "thr", "ae", "gn", "wx", "ys", "ka", "mø", "dr",
    "zz", "ept", "ul", "fy", "ç", "orb",
)  # fmt: skip
_NOISE = ("#", "%", "~", "7", "3", "0x", "¶", "§", "|", "^", "9", "@", "&", "42")


def garbage_text(rng: random.Random, like: str) -> str:
    """Random-looking text about as long as ``like`` (at least 24 characters): nonsense
    syllables, digits and symbols. Never valid JSON, never a refusal."""
    target = min(max(len(like), 24), 100_000)
    words: list[str] = []
    length = -1  # no space before the first word
    while length < target:
        pieces = [rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            pieces.insert(rng.randint(0, len(pieces)), rng.choice(_NOISE))
        word = "".join(pieces)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


# --------------------------------------------------------------------------- field names

SYNONYMS: Mapping[str, str] = types.MappingProxyType(
    {
        "price": "cost",
        "cost": "price",
        "name": "title",
        "title": "name",
        "id": "identifier",
        "amount": "value",
        "value": "amount",
        "total": "sum",
        "count": "quantity",
        "quantity": "count",
        "date": "timestamp",
        "time": "timestamp",
        "source": "origin",
        "status": "state",
        "state": "status",
        "message": "msg",
        "description": "details",
        "type": "kind",
        "ticker": "symbol",
        "symbol": "ticker",
        "answer": "response",
        "result": "output",
        "output": "result",
        "error": "err",
        "data": "payload",
        "items": "entries",
        "text": "content",
        "content": "text",
        "currency": "currency_code",
        "score": "rating",
        "email": "email_address",
        "url": "link",
    }
)
"""Field names (lower case) and the synonym a drifted model would use instead."""


def snake_to_camel(name: str) -> str:
    """``total_price`` -> ``totalPrice``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_to_snake(name: str) -> str:
    """``totalPrice`` -> ``total_price``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def rename_key(key: str) -> str:
    """Another name for the field ``key``: its :data:`SYNONYMS` entry (upper case kept for an
    upper-case key), else snake_case <-> camelCase, else its first letter's case flipped."""
    lower = key.lower()
    if lower in SYNONYMS:
        new = SYNONYMS[lower]
        return new.upper() if key.isupper() and len(key) > 1 else new
    if "_" in key.strip("_"):
        return snake_to_camel(key)
    if re.search(r"[a-z0-9][A-Z]", key):
        return camel_to_snake(key)
    return key[:1].upper() + key[1:] if key[:1].islower() else key[:1].lower() + key[1:]


def rename_keys(value: Any) -> Any:
    """A JSON value with every object key renamed by :func:`rename_key`, recursively."""
    if isinstance(value, dict):
        return {rename_key(str(k)): rename_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rename_keys(v) for v in value]
    return value


# --------------------------------------------------------------------------- structure


class JsonInText(NamedTuple):
    """A JSON object or array found in a text: ``text == before + <the JSON> + after``."""

    value: Any
    before: str
    after: str
    indented: bool
    """Whether the JSON was written over several lines."""


_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.DOTALL)


def find_json(text: str) -> JsonInText | None:
    """The JSON object or array ``text`` holds, as the whole text (surrounding whitespace
    aside) or in a fenced code block; None when it holds none."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, (dict, list)):
            start = text.index(stripped[0])
            return JsonInText(value, text[:start], text[start + len(stripped) :], "\n" in stripped)
    match = _FENCED_JSON.search(text)
    if match:
        try:
            value = json.loads(match.group(1))
        except (ValueError, RecursionError):
            return None
        if isinstance(value, (dict, list)):
            before = text[: match.start(1)]
            after = text[match.end(1) :]
            return JsonInText(value, before, after, "\n" in match.group(1).strip())
    return None


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after ``.``, ``!`` or ``?``), stripped, none empty."""
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


CONTRACTIONS: tuple[tuple[str, str], ...] = (
    ("do not", "don't"),
    ("does not", "doesn't"),
    ("is not", "isn't"),
    ("are not", "aren't"),
    ("cannot", "can't"),
    ("will not", "won't"),
    ("it is", "it's"),
    ("I am", "I'm"),
    ("you are", "you're"),
    ("that is", "that's"),
)
"""(long form, contraction) pairs: a casual tone contracts, a formal one expands."""


def swap_phrases(text: str, pairs: Iterable[tuple[str, str]]) -> str:
    """``text`` with each ``(old, new)`` phrase replaced, in order, as whole words and
    ignoring case; a replacement starts with a capital where the phrase did."""
    for old, new in pairs:

        def replace(match: re.Match[str], new: str = new) -> str:
            return new[:1].upper() + new[1:] if match.group(0)[:1].isupper() else new

        text = re.sub(rf"\b{re.escape(old)}\b", replace, text, flags=re.IGNORECASE)
    return text


REFUSALS: tuple[str, ...] = (
    "I'm sorry, but I can't help with that request.",
    "Unfortunately, I'm unable to assist with this.",
    "I won't be able to provide that information.",
    "That's not something I can help with, I'm afraid: I must decline to answer.",
    "I'm not able to do that. Is there something else I can help with?",
)
"""Plain refusals (each one to :func:`flakestorm.checks.refusal.is_refusal`)."""
SOFT_REFUSALS: tuple[str, ...] = (
    "I'm sorry, but I can't provide a definitive answer to that. "
    "You may want to consult an authoritative source.",
    "I'd rather not answer that directly; I'm not able to give reliable guidance here. "
    "Please check with a qualified professional.",
    "I'm unable to help with this one right now. Could you rephrase or ask something else?",
)
"""Polite evasions that still count as refusals (to
:func:`flakestorm.checks.refusal.is_refusal`)."""

# --------------------------------------------------------------------------- drift


def _dump_like(value: Any, indented: bool) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2 if indented else None)


_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:(?:_[a-z0-9]+)+|(?:[A-Z][a-z0-9]*)+)\b")


def _drift_field_rename(text: str) -> str:
    found = find_json(text)
    if found is not None:
        return found.before + _dump_like(rename_keys(found.value), found.indented) + found.after

    # prose: flip the identifiers it mentions (total_price <-> totalPrice)
    def flip(match: re.Match[str]) -> str:
        word = match.group(0)
        return snake_to_camel(word) if "_" in word else camel_to_snake(word)

    return _IDENTIFIER.sub(flip, text)


def _leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out += _leaves(v, f"{prefix} {k}".strip())
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value, start=1):
            out += _leaves(v, f"{prefix} item {i}".strip())
        return out
    return [(prefix.replace("_", " ") or "value", value)]


_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")


def _drift_format(text: str, rng: random.Random) -> str:
    found = find_json(text)
    if found is not None:
        pairs = _leaves(found.value)
        if not pairs:
            return "There is nothing to report."
        said = ", ".join(f"the {k} is {v}" for k, v in pairs)
        return f"In short: {said}."
    lines = [line for line in text.splitlines() if line.strip()]
    items = [m.group(1) for m in map(_LIST_ITEM.match, lines) if m]
    rows = [line for line in lines if line.strip().startswith("|")]
    if lines and (len(items) >= max(1, len(lines) // 2) or len(rows) >= max(2, len(lines) // 2)):
        # a list or table -> prose
        if rows:
            cells = [
                [c.strip() for c in row.strip().strip("|").split("|")]
                for row in rows
                if not _TABLE_RULE.match(row)
            ]
            items = ["; ".join(c for c in row if c) for row in cells]
        return " ".join(i.rstrip(".") + "." for i in items if i)
    points = sentences(text) or [text.strip()]
    if rng.random() < 0.5:
        return "\n".join(f"- {s}" for s in points)
    table = ["| # | Point |", "|---|---|"]
    table += [f"| {i} | {s.replace('|', '/')} |" for i, s in enumerate(points, start=1)]
    return "\n".join(table)


_PADDING = (
    "Great question! Let me walk you through this carefully and in some detail.",
    "To put it another way, and to make sure nothing important is missed:",
    "It is also worth keeping in mind that circumstances can vary, and several caveats apply.",
    "There are a few additional considerations, which I will outline for completeness.",
    "I hope this thorough explanation helps; please let me know if anything is unclear.",
)


def _drift_verbosity(text: str, rng: random.Random) -> str:
    tokens = count_tokens(text)
    first = (sentences(text) or [text])[0]
    short = truncate_text(first, max(4, tokens // 4))
    if rng.random() < 0.5 and tokens >= 8 and count_tokens(short) < tokens:
        return short
    body = text.strip()
    return "\n\n".join(
        [
            _PADDING[0],
            body,
            f"{_PADDING[1]} {body}",
            _PADDING[2],
            _PADDING[3],
            f"In summary: {first}",
            _PADDING[4],
        ]
    )


def _drift_refusal(text: str, rng: random.Random) -> str:
    from flakestorm.checks.refusal import is_refusal  # not loaded for a config read

    if is_refusal(text):
        choices = [r for r in REFUSALS if r.strip() != text.strip()]
        return rng.choice(choices)
    return rng.choice(SOFT_REFUSALS)


def _drift_tone(text: str, rng: random.Random) -> str:
    body = text.strip()
    if rng.random() < 0.5:
        casual = swap_phrases(body, CONTRACTIONS)
        casual = casual[:1].lower() + casual[1:] if casual[:2] != "I " else casual
        return f"Hey! So basically, {casual} Hope that helps, cheers :)"
    formal = swap_phrases(body, [(new, old) for old, new in CONTRACTIONS])
    return (
        "Good day. Please find below the information you requested.\n\n"
        f"{formal}\n\n"
        "Should you require any further assistance, please do not hesitate to ask. "
        "Kind regards."
    )


def drift_text(text: str, drift: DriftType, rng: random.Random) -> str:
    """``text`` rewritten the way a new model version might answer:

    - ``json_field_rename``: JSON (the whole text, or a fenced block) gets its keys renamed,
      recursively: known synonyms (``price`` -> ``cost``, ``name`` -> ``title``, ...),
      snake_case <-> camelCase, else the first letter's case flipped. Prose gets the
      snake_case/camelCase identifiers it mentions flipped.
    - ``format_change``: JSON -> one prose sentence; a list or table -> prose; prose -> a
      bullet list or a markdown table (RNG).
    - ``verbosity_shift``: much shorter (a cut first sentence) or much longer (padding and
      restatement) (RNG; always longer for texts under 8 tokens).
    - ``refusal_rephrase``: a refusal is reworded into another refusal; any other answer
      becomes a soft refusal. Both are refusals to :func:`flakestorm.checks.refusal.is_refusal`.
    - ``tone_shift``: casual (contractions, "Hey!") or stiffly formal (RNG); the content is
      kept.
    """
    if drift is DriftType.JSON_FIELD_RENAME:
        return _drift_field_rename(text)
    if drift is DriftType.FORMAT_CHANGE:
        return _drift_format(text, rng)
    if drift is DriftType.VERBOSITY_SHIFT:
        return _drift_verbosity(text, rng)
    if drift is DriftType.REFUSAL_REPHRASE:
        return _drift_refusal(text, rng)
    return _drift_tone(text, rng)
