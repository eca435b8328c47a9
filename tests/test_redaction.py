"""The one redaction rule every message, log line and report goes through."""

from __future__ import annotations

from flakestorm.redaction import MIN_SECRET_CHARS, Redactor, redact


def test_secrets_are_hidden_as_written_and_as_repr_escapes_them() -> None:
    secrets = {"s3cret\nline", "abc"}  # "abc" is too short to be worth hiding
    assert redact("x s3cret\nline y 's3cret\\nline' abc", secrets) == "x *** y '***' abc"
    assert MIN_SECRET_CHARS == 4


def test_a_secret_containing_another_is_hidden_whole() -> None:
    assert redact("token=abcd-efgh", {"abcd", "abcd-efgh"}) == "token=***"


def test_no_secret_worth_hiding_is_a_false_redactor_that_changes_nothing() -> None:
    redactor = Redactor({"", "ab"})
    assert not redactor and redactor("ab cd") == "ab cd"
