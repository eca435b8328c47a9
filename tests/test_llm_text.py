"""The public text transforms: token counting, truncation, garbage, drift and its pieces."""

from __future__ import annotations

import json
import random

import pytest

from flakestorm.chaos.llm.text import (
    CONTRACTIONS,
    REFUSALS,
    SOFT_REFUSALS,
    SYNONYMS,
    JsonInText,
    camel_to_snake,
    count_tokens,
    drift_text,
    find_json,
    garbage_text,
    rename_key,
    rename_keys,
    sentences,
    snake_to_camel,
    swap_phrases,
    truncate_text,
)
from flakestorm.checks.refusal import is_refusal
from flakestorm.config import DriftType

QUESTION = "Please explain in detail why the sky looks blue on a clear summer afternoon, 2024."


# --------------------------------------------------------------------------- tokens, garbage


def test_count_tokens_counts_words_and_punctuation() -> None:
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("") == 0
    assert count_tokens("  $187.23 ") == 4
    assert count_tokens("naïve café") == 2


def test_truncate_text() -> None:
    assert truncate_text("Hello, world! Bye.", 2) == "Hello,"
    assert truncate_text("Hello, world!", 10) == "Hello, world!"
    assert truncate_text("Hello", 0) == ""
    assert count_tokens(truncate_text(QUESTION, 5)) == 5


def test_garbage_text_is_seeded_and_sized() -> None:
    a = garbage_text(random.Random(1), "x" * 200)
    assert a == garbage_text(random.Random(1), "x" * 200)
    assert a != garbage_text(random.Random(2), "x" * 200)
    assert 200 <= len(a) < 230
    assert len(garbage_text(random.Random(1), "")) >= 24
    assert not is_refusal(a)
    with pytest.raises(ValueError):
        json.loads(a)


# --------------------------------------------------------------------------- drift


def test_drift_json_field_rename() -> None:
    text = '{"ticker": "AAPL", "last_price": 187.5, "asOf": "today", "nested": {"total": 1}}'
    out = json.loads(drift_text(text, DriftType.JSON_FIELD_RENAME, random.Random()))
    assert out == {"symbol": "AAPL", "lastPrice": 187.5, "as_of": "today", "Nested": {"sum": 1}}


def test_drift_json_field_rename_in_a_fenced_block_and_in_prose() -> None:
    fenced = 'Here you go:\n```json\n{\n  "price": 1\n}\n```\nBye.'
    out = drift_text(fenced, DriftType.JSON_FIELD_RENAME, random.Random())
    assert out.startswith("Here you go:\n```json\n") and out.endswith("```\nBye.")
    assert '"cost": 1' in out
    prose = "The field total_price replaces unitCount."
    assert drift_text(prose, DriftType.JSON_FIELD_RENAME, random.Random()) == (
        "The field totalPrice replaces unit_count."
    )


def test_drift_format_change() -> None:
    rng = random.Random(0)
    assert drift_text('{"price": 5, "ticker": "X"}', DriftType.FORMAT_CHANGE, rng) == (
        "In short: the price is 5, the ticker is X."
    )
    prose = "First point. Second point! Third?"
    outs = {drift_text(prose, DriftType.FORMAT_CHANGE, random.Random(s)) for s in range(10)}
    assert "- First point.\n- Second point!\n- Third?" in outs
    assert any(o.startswith("| # | Point |") for o in outs)
    assert drift_text("- one\n- two", DriftType.FORMAT_CHANGE, rng) == "one. two."
    table = "| a | b |\n|---|---|\n| 1 | 2 |"
    assert drift_text(table, DriftType.FORMAT_CHANGE, rng) == "a; b. 1; 2."


def test_drift_verbosity_shift_goes_both_ways() -> None:
    outs = [drift_text(QUESTION, DriftType.VERBOSITY_SHIFT, random.Random(s)) for s in range(10)]
    assert any(count_tokens(o) < count_tokens(QUESTION) // 2 for o in outs)
    assert any(count_tokens(o) > 3 * count_tokens(QUESTION) for o in outs)
    short = drift_text("Yes.", DriftType.VERBOSITY_SHIFT, random.Random(0))
    assert len(short) > 50  # a short text can only get longer


def test_drift_refusal_rephrase() -> None:
    refusal = "I'm sorry, but I can't help with that request."
    for seed in range(5):
        out = drift_text(refusal, DriftType.REFUSAL_REPHRASE, random.Random(seed))
        assert out != refusal and is_refusal(out)
        soft = drift_text("The sky is blue.", DriftType.REFUSAL_REPHRASE, random.Random(seed))
        assert is_refusal(soft)


def test_drift_tone_shift_keeps_content() -> None:
    text = "It is 5 degrees. I am sure you do not need a coat."
    outs = {drift_text(text, DriftType.TONE_SHIFT, random.Random(s)) for s in range(10)}
    casual = next(o for o in outs if o.startswith("Hey!"))
    formal = next(o for o in outs if o.startswith("Good day."))
    assert "it's 5 degrees" in casual and "don't" in casual
    assert "It is 5 degrees" in formal and "do not need" in formal


# --------------------------------------------------------------------------- building blocks


def test_field_names() -> None:
    assert snake_to_camel("total_unit_price") == "totalUnitPrice"
    assert camel_to_snake("totalUnitPrice") == "total_unit_price"
    assert [rename_key(k) for k in ("price", "PRICE", "last_price", "asOf", "nested", "X")] == [
        "cost",
        "COST",
        "lastPrice",
        "as_of",
        "Nested",
        "x",
    ]
    assert SYNONYMS["price"] == "cost" and SYNONYMS["cost"] == "price"
    assert rename_keys([{"id": 1, "items": [{"url": "u"}]}, "price"]) == [
        {"identifier": 1, "entries": [{"link": "u"}]},
        "price",
    ]


def test_find_json() -> None:
    assert find_json(' \n{"a": 1}\n') == JsonInText({"a": 1}, " \n", "\n", False)
    found = find_json("Here:\n```json\n[\n  1\n]\n```")
    assert found == JsonInText([1], "Here:\n```json\n", "\n```", True)
    assert find_json("no JSON here") is None and find_json('"a string"') is None


def test_sentences_and_phrases() -> None:
    assert sentences("  One. Two!  Three?\n") == ["One.", "Two!", "Three?"]
    assert sentences("   ") == []
    text = "It is fine. I am sure it is."
    assert swap_phrases(text, CONTRACTIONS) == "It's fine. I'm sure it's."
    assert swap_phrases("Don't.", [(new, old) for old, new in CONTRACTIONS]) == "Do not."


def test_refusal_texts_are_refusals() -> None:
    assert all(is_refusal(text) for text in (*REFUSALS, *SOFT_REFUSALS))
