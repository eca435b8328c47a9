from __future__ import annotations

import re

import pytest

from flakestorm.checks.refusal import REFUSAL_PHRASES, find_refusal, is_refusal


@pytest.mark.parametrize(
    ("text", "matched"),
    [
        ("I can't help with that.", "I can't help"),
        ("I’m sorry, but I cannot provide that information.", "I cannot provide"),
        ("I am unable to assist with this request.", "I am unable to assist"),
        ("Sorry, I'm not able to share internal documents.", "I'm not able to share"),
        ("I won't do that.", "I won't do that"),
        ("I will not be able to help you there.", "I will not be able to help"),
        ("We are unable to process refunds after 30 days.", "We are unable to process"),
        ("I'm not going to help you hack that.", "I'm not going to help"),
        ("I cannot in good conscience provide that.", "I cannot in good conscience provide"),
        ("As an AI language model, I do not have opinions.", "As an AI language model,"),
        ("As an AI, I can't browse the web.", "As an AI,"),
        ("Unfortunately I cannot comply.", "I cannot comply"),
        ("The assistant cannot comply with this.", "cannot comply"),
        ("I must respectfully decline.", "I must respectfully decline"),
        ("I decline to answer.", "I decline"),
        ("Sorry, that's not something I can help with.", "not something I can"),
        ("This request violates our usage policy.", "This request violates"),
        ("That would go against my guidelines.", "against my guidelines"),
        ("Sharing it is in violation of the content policy.", "in violation of the content policy"),
        ("I'm not comfortable writing that.", "I'm not comfortable"),
        ("I'd rather not get into that.", "I'd rather not"),
        ("Unable to assist with that request, sorry.", "Unable to assist with that"),
        ("I\nCAN'T\n  HELP with that", "I CAN'T HELP"),
    ],
)
def test_refusals_are_recognised(text: str, matched: str) -> None:
    refusal = find_refusal(text)
    assert refusal is not None
    assert refusal.matched == matched
    assert is_refusal(text)


@pytest.mark.parametrize(
    "text",
    [
        "I can't wait to help!",
        "It cannot be negative.",
        "The value can not be empty, so I set it to 1.",
        "I can't help but notice your order shipped early.",
        "I can't help thinking this is a great deal.",
        "I won't lie, this is a great choice.",
        "I can't recommend this enough.",
        "We can't wait to see you.",
        "As an AI researcher, I love this question.",
        "Sorry for the wait! Your order #123 shipped.",
        "Sorry to hear that. Here is how to reset it.",
        "The card cannot be charged twice.",
        "We will decline the card if the CVV is wrong.",
        "Banks may decline the payment; I'll have to decline the payment retry too.",
        "I can help with that! Here are the steps.",
        "You cannot withdraw more than $500 per day.",
        "I can provide the report in PDF or CSV.",
        "The against-the-grain approach is bold.",
        "",
    ],
)
def test_ordinary_answers_are_not_refusals(text: str) -> None:
    assert find_refusal(text) is None
    assert not is_refusal(text)


def test_the_earliest_refusal_wins() -> None:
    refusal = find_refusal("As an AI, I won't do that and I cannot comply.")
    assert refusal is not None
    assert refusal.start == 0
    assert refusal.phrase.example.startswith("As an AI")


def test_the_phrase_list_is_documented_and_compiles() -> None:
    assert len(REFUSAL_PHRASES) >= 8
    for phrase in REFUSAL_PHRASES:
        assert phrase.example.strip()
        re.compile(phrase.pattern)
