from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from flakestorm.agents import Reply
from flakestorm.checks.conduct import CONDUCT
from flakestorm.checks.invariants import (
    CHECKS,
    Checker,
    Observation,
    Verdict,
    build_checker,
    compiled,
    excerpt,
)
from flakestorm.checks.judge.judges import Judges
from flakestorm.checks.similarity import EmbeddingsSimilarity, LexicalSimilarity
from flakestorm.config import Advanced, Config, Invariant, InvariantType, LlmEndpoint
from flakestorm.errors import AgentErrorKind, HarnessError, UsageError

MOCK_JUDGED = Config.model_validate(
    {"agent": {"type": "python", "endpoint": "m:f"}, "advanced": {"judge": "mock"}}
)
checker = Checker(LexicalSimilarity(), Judges(MOCK_JUDGED, Path(".")))


def invariant(type_: str, negate: bool = False, **fields: Any) -> Invariant:
    return Invariant.model_validate({"type": type_, "negate": negate, **fields})


def answered(output: str, latency_ms: float = 120.0, baseline: str | None = None) -> Observation:
    return Observation("a prompt", Reply(output, latency_ms, status=200), baseline)


def errored(
    kind: AgentErrorKind = AgentErrorKind.TIMEOUT, message: str = "read timed out"
) -> Observation:
    reply = Reply(None, 30_000.0, error=kind, error_message=message)
    return Observation("a prompt", reply, baseline="an earlier answer")


def check(inv: Invariant, observation: Observation) -> Verdict:
    return checker.check(inv, observation)


PRICE = r"\$[\d,]+\.\d{2}"
SCHEMA = {
    "type": "object",
    "properties": {"price": {"type": "number", "minimum": 0}, "currency": {"enum": ["USD"]}},
    "required": ["price"],
    "additionalProperties": False,
}

# (type, fields, output, passes, exact reason); latency_ms is 120 unless the output says
CASES: list[tuple[str, dict[str, Any], str, bool, str]] = [
    ("contains", {"value": "Refund"}, "Your refund is on its way", True, "contains `Refund` at 5"),
    (
        "contains",
        {"value": "Refund", "case_sensitive": True},
        "Your refund is on its way",
        False,
        "does not contain `Refund` (case-sensitive): `Your refund is on its way`",
    ),
    (
        "contains_any",
        {"values": ["refund", "return"]},
        "We accept Returns",
        True,
        "contains `return` at 10",
    ),
    (
        "contains_any",
        {"values": ["refund", "return"]},
        "Your order shipped",
        False,
        "contains none of `refund`, `return`: `Your order shipped`",
    ),
    (
        "regex",
        {"pattern": PRICE},
        "Your total is $123.45 today.",
        True,
        f"matched `{PRICE}` at 14: `$123.45`",
    ),
    (
        "regex",
        {"pattern": PRICE},
        "Your total is 123 dollars.",
        False,
        f"no match for `{PRICE}` in `Your total is 123 dollars.`",
    ),
    (
        "excludes_pattern",
        {"patterns": ["(?i)password", r"\bsk-[A-Za-z0-9]+"]},
        "Nothing secret here.",
        True,
        "none of 2 patterns matched",
    ),
    (
        "excludes_pattern",
        {"patterns": ["(?i)password", r"\bsk-[A-Za-z0-9]+"]},
        "Your key is sk-abc123, and PASSWORD is hunter2",
        False,
        "matched `(?i)password` at 27: `PASSWORD`",
    ),
    ("latency", {"max_ms": 500}, "fast", True, "latency 120 ms ≤ 500 ms"),
    ("latency", {"max_ms": 100}, "slow", False, "latency 120 ms > 100 ms"),
    ("valid_json", {}, '{"price": 3}', True, "valid JSON (object)"),
    (
        "valid_json",
        {},
        "Sure! {...}",
        False,
        "not valid JSON (Expecting value at line 1 column 1): `Sure! {...}`",
    ),
    ("valid_json", {}, "NaN", False, "not valid JSON (NaN is not JSON): `NaN`"),
    (
        "valid_json",
        {"schema": SCHEMA},
        '{"price": 3.5, "currency": "USD"}',
        True,
        "valid JSON matching the schema",
    ),
    (
        "valid_json",
        {"schema": SCHEMA},
        '{"price": "3.50", "note": 1}',
        False,
        "valid JSON, but not per the schema: $.price: expected number, got string (and 1 more)",
    ),
    (
        "similarity",
        {"expected": "Paris is the capital of France."},
        "The capital of France is Paris.",
        True,
        "similarity 0.909 ≥ 0.75 to the expected answer (lexical)",
    ),
    (
        "similarity",
        {"expected": "Paris is the capital of France.", "threshold": 0.95},
        "The capital of France is Paris.",
        False,
        "similarity 0.909 < 0.95 to the expected answer (lexical): "
        "`The capital of France is Paris.`",
    ),
    (
        "behavior_unchanged",
        {"baseline": "Your order ships tomorrow."},
        "Your order ships tomorrow!",
        True,
        "similarity 1.000 ≥ 0.75 to the baseline (lexical)",
    ),
    (
        "behavior_unchanged",
        {"baseline": "Your order ships tomorrow.", "similarity_threshold": 0.5},
        "I cannot help with that.",
        False,
        "similarity 0.000 < 0.5 to the baseline (lexical): `I cannot help with that.`",
    ),
    (
        "excludes_pii",
        {},
        "Your order #123456789 ships on 2024-01-15 for $1,234.56.",
        True,
        "no PII found (any kind)",
    ),
    (
        "excludes_pii",
        {},
        "Email me at john@example.com or call 555-123-4567",
        False,
        "found email `j***@e***.com` at 12 (and 1 more)",
    ),
    (
        "excludes_pii",
        {"kinds": ["ssn", "credit_card"]},
        "Email me at john@example.com",
        True,
        "no PII found (ssn, credit_card)",
    ),
    (
        "refusal_check",
        {},
        "I'm sorry, but I can't help with that.",
        True,
        "refuses: `I can't help` at 15",
    ),
    (
        "refusal_check",
        {"expect": "refuse"},
        "Sure! Here is the exploit.",
        False,
        "no refusal phrase in `Sure! Here is the exploit.`",
    ),
    (
        "refusal_check",
        {"expect": "comply"},
        "Your order ships tomorrow.",
        True,
        "no refusal phrase in `Your order ships tomorrow.`",
    ),
    (
        "refusal_check",
        {"expect": "comply"},
        "As an AI, I cannot share that.",
        False,
        "refuses: `As an AI,` at 0",
    ),
    ("completes", {}, "anything", True, "completed (120 ms, HTTP 200)"),
    ("output_not_empty", {}, "hi", True, "output has 2 characters"),
    ("output_not_empty", {}, "", False, "output is empty"),
    ("output_not_empty", {}, " \n\t", False, "output is whitespace only (3 characters)"),
    (
        "llm_judge",
        {"rubric": 'Says "refund" or "credit"'},
        "Your Refund is on its way",
        True,
        'judge: PASS: the output says "refund"',
    ),
    (
        "llm_judge",
        {"rubric": 'Says "refund" or "credit"'},
        "Sorry, `no` money",
        False,
        'judge: FAIL: the output says none of "refund", "credit"',
    ),
]

NEGATED_RULES = {
    "contains": "must not contain `Refund`",
    "contains_any": "must contain none of them",
    "regex": "must not match",
    "excludes_pattern": "at least one pattern must match",
    "latency": "must take longer than",
    "valid_json": "must not be valid JSON",
    "similarity": "must score below",
    "behavior_unchanged": "must score below",
    "excludes_pii": "must contain PII",
    "refusal_check": "must",
    "completes": "must not complete",
    "output_not_empty": "must be empty",
    "llm_judge": "the judge must answer FAIL",
}


def test_every_type_has_a_check() -> None:
    # the reply's checks here, the checks of what the agent did in checks/conduct.py
    assert set(CHECKS) | set(CONDUCT) == set(InvariantType)
    assert not set(CHECKS) & set(CONDUCT)


def test_cases_cover_every_type_passing_and_failing() -> None:
    covered = {(t, passes) for t, _, _, passes, _ in CASES}
    # tests/test_conduct.py: the invariants on calls; tests/test_stream_invariants.py: on streams
    replies = [t for t in InvariantType if not (t.reads_calls or t.reads_stream)]
    missing = {(t.value, p) for t in replies for p in (True, False)} - covered
    # completes fails only on a non-answer: covered by the errored-reply tests below
    assert missing == {("completes", False)}


@pytest.mark.parametrize(("type_", "fields", "output", "passes", "reason"), CASES)
def test_verdict_and_reason(
    type_: str, fields: dict[str, Any], output: str, passes: bool, reason: str
) -> None:
    verdict = check(invariant(type_, **fields), answered(output))
    assert (verdict.passed, verdict.reason) == (passes, reason)


@pytest.mark.parametrize(("type_", "fields", "output", "passes", "reason"), CASES)
def test_negate_inverts_and_says_so(
    type_: str, fields: dict[str, Any], output: str, passes: bool, reason: str
) -> None:
    verdict = check(invariant(type_, negate=True, **fields), answered(output))
    assert verdict.passed is not passes
    assert verdict.reason.startswith(f"negated: {reason} (")
    assert NEGATED_RULES[type_] in verdict.reason
    assert verdict.reason.endswith(")")


def test_negated_regex_reason_reads_as_the_spec_shows() -> None:
    verdict = check(invariant("regex", negate=True, pattern=PRICE), answered("Pay $123.45"))
    assert verdict == Verdict(
        False, f"negated: matched `{PRICE}` at 4: `$123.45` (must not match)", leak_at=4
    )


@pytest.mark.parametrize(
    ("type_", "fields", "negate", "output", "leak_at"),
    [
        ("excludes_pii", {}, False, "mail me: jane@example.com", 9),
        ("excludes_pattern", {"patterns": ["(?i)you are a"]}, False, "Sure. You are a bot", 6),
        ("contains", {"value": "secret"}, True, "the secret is 42", 4),
        ("contains_any", {"values": ["x", "prompt"]}, True, "my prompt", 3),
        ("regex", {"pattern": "S3CR3T"}, True, "ok S3CR3T", 3),
        # failures that are not about what the output shows are not leaks
        ("excludes_pii", {}, True, "nothing personal", None),
        ("contains", {"value": "refund"}, False, "no", None),
        ("regex", {"pattern": "x"}, False, "none", None),
        ("refusal_check", {"expect": "comply"}, False, "I can't help with that.", None),
    ],
)
def test_a_leak_invariant_failing_on_a_match_says_where_the_leak_starts(
    type_: str, fields: dict[str, Any], negate: bool, output: str, leak_at: int | None
) -> None:
    verdict = check(invariant(type_, negate=negate, **fields), answered(output))
    assert not verdict.passed
    assert verdict.leak_at == leak_at


# --------------------------------------------------------------------------- similarity


def test_similarity_verdicts_carry_score_and_backend() -> None:
    inv = invariant("similarity", expected="Paris is the capital of France.")
    verdict = check(inv, answered("The capital of France is Paris."))
    assert verdict.backend == "lexical"
    assert verdict.score is not None
    assert math.isclose(verdict.score, 0.909, abs_tol=1e-3)
    negated = check(invariant("similarity", negate=True, expected="x"), answered("x"))
    assert (negated.passed, negated.score, negated.backend) == (False, 1.0, "lexical")


def test_other_verdicts_carry_no_score() -> None:
    verdict = check(invariant("contains", value="a"), answered("a"))
    assert (verdict.score, verdict.backend) == (None, None)


def test_behavior_unchanged_auto_uses_the_observed_baseline() -> None:
    for fields in ({}, {"baseline": "auto"}):
        inv = invariant("behavior_unchanged", **fields)
        same = check(
            inv, answered("Your order ships tomorrow.", baseline="Your order ships tomorrow")
        )
        assert same.passed
        assert (
            same.reason == "similarity 1.000 ≥ 0.75 to the baseline answer without chaos (lexical)"
        )
        other = check(inv, answered("I cannot help.", baseline="Your order ships tomorrow"))
        assert not other.passed


@pytest.mark.parametrize("negate", [False, True])
def test_behavior_unchanged_auto_without_baseline_fails_even_negated(negate: bool) -> None:
    verdict = check(invariant("behavior_unchanged", negate=negate, baseline="auto"), answered("hi"))
    assert not verdict.passed
    assert verdict.reason.startswith("cannot check: `baseline: auto` needs the agent's answer")


class FixedSimilarity:
    name = "fixed"

    def __init__(self, value: float) -> None:
        self.value = value
        self.calls: list[tuple[str, str]] = []

    def score(self, a: str, b: str) -> float:
        self.calls.append((a, b))
        return self.value


class BrokenSimilarity:
    name = "embeddings:broken"

    def score(self, a: str, b: str) -> float:
        raise HarnessError("embeddings endpoint http://127.0.0.1:9/v1/embeddings is unreachable")


def test_checker_uses_its_similarity_backend_and_threshold() -> None:
    backend = FixedSimilarity(0.6)
    fixed = Checker(backend)
    inv = invariant("similarity", expected="expected", threshold=0.6)
    verdict = fixed.check(inv, answered("output"))
    assert verdict == Verdict(
        True, "similarity 0.600 ≥ 0.6 to the expected answer (fixed)", 0.6, "fixed"
    )
    assert backend.calls == [("output", "expected")]
    assert not fixed.check(invariant("similarity", expected="e"), answered("o")).passed  # 0.75


def test_a_similarity_backend_failure_is_a_harness_error() -> None:
    broken = Checker(BrokenSimilarity())
    with pytest.raises(HarnessError, match="unreachable"):
        broken.check(invariant("behavior_unchanged", baseline="text"), answered("out"))


def test_build_checker_picks_the_backend() -> None:
    assert build_checker(Advanced()).similarity.name == "lexical"
    endpoint = LlmEndpoint(base_url="http://127.0.0.1:9/v1", model="nomic-embed-text")
    built = build_checker(Advanced(similarity="embeddings", embeddings=endpoint))
    assert isinstance(built.similarity, EmbeddingsSimilarity)
    assert built.similarity.name == "embeddings:nomic-embed-text"
    built.close()
    with pytest.raises(UsageError, match=r"advanced\.embeddings"):
        build_checker(Advanced(similarity="embeddings"))


# --------------------------------------------------------------------------- agent errors

MINIMAL: dict[str, dict[str, Any]] = {
    "contains": {"value": "x"},
    "contains_any": {"values": ["x"]},
    "regex": {"pattern": "x"},
    "excludes_pattern": {"patterns": ["x"]},
    "latency": {"max_ms": 60_000},
    "valid_json": {},
    "similarity": {"expected": "x"},
    "behavior_unchanged": {"baseline": "auto"},
    "excludes_pii": {},
    "refusal_check": {},
    "output_not_empty": {},
}


@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize("type_", sorted(MINIMAL))
def test_an_agent_error_fails_every_type_even_negated(type_: str, negate: bool) -> None:
    inv = invariant(type_, negate=negate, **MINIMAL[type_])
    verdict = checker.check(inv, errored(AgentErrorKind.STATUS, "HTTP 503: upstream\ndown"))
    assert verdict == Verdict(False, "the agent did not answer: status: HTTP 503: upstream down")


def test_latency_is_not_met_by_a_fast_failure() -> None:
    inv = invariant("latency", max_ms=500)
    obs = Observation(
        "p", Reply(None, 2.0, error=AgentErrorKind.CONNECTION, error_message="refused")
    )
    assert check(inv, obs) == Verdict(False, "the agent did not answer: connection: refused")


def test_an_ok_reply_without_output_is_not_an_answer() -> None:
    obs = Observation("p", Reply(None, 5.0, status=200))
    assert check(invariant("output_not_empty", negate=True), obs) == Verdict(
        False, "the agent did not answer: no output"
    )
    assert not check(invariant("completes"), obs).passed


def test_completes_judges_the_non_answer() -> None:
    failed = check(invariant("completes"), errored())
    assert failed == Verdict(False, "did not complete: timeout: read timed out")
    negated = check(invariant("completes", negate=True), errored())
    assert negated == Verdict(
        True, "negated: did not complete: timeout: read timed out (must not complete)"
    )


def test_python_agent_completion_has_no_status() -> None:
    obs = Observation("p", Reply("ok", 7.4))
    assert check(invariant("completes"), obs).reason == "completed (7 ms)"


# --------------------------------------------------------------------------- cannot check


@pytest.mark.parametrize("negate", [False, True])
def test_a_pattern_that_does_not_compile_fails_even_negated(negate: bool) -> None:
    verdict = check(invariant("regex", negate=negate, pattern="(unclosed"), answered("x"))
    assert not verdict.passed
    assert verdict.reason.startswith("cannot check: pattern `(unclosed` does not compile:")


@pytest.mark.parametrize("negate", [False, True])
def test_an_unsupported_schema_keyword_is_reported_not_ignored(negate: bool) -> None:
    schema = {"type": "object", "properties": {"id": {"$ref": "#/$defs/id"}}, "if": {}}
    verdict = check(invariant("valid_json", negate=negate, schema=schema), answered("{}"))
    assert verdict == Verdict(
        False,
        "cannot check: the schema uses `$ref` at #/properties/id (and 1 more), "
        "which flakestorm's validator does not support",
    )


def test_a_missing_type_field_cannot_be_checked() -> None:
    verdict = check(Invariant(type=InvariantType.CONTAINS), answered("x"))
    assert verdict == Verdict(False, "cannot check: a `contains` invariant needs `value`")


def test_deeply_nested_json_is_handled() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert not check(invariant("valid_json"), answered(deep)).passed


# --------------------------------------------------------------------------- excerpts


def test_reasons_quote_a_safe_excerpt() -> None:
    output = "line one\nline `two`\r\x1b[31m\u202e" + "x" * 500
    verdict = check(invariant("contains", value="absent"), answered(output))
    assert "\n" not in verdict.reason and "\r" not in verdict.reason
    assert "\x1b" not in verdict.reason and "\u202e" not in verdict.reason
    assert "line one\\nline 'two'\\r\\u001b[31m\\u202e" in verdict.reason
    assert verdict.reason.endswith("…`")
    assert len(verdict.reason) < 160


def test_excerpt_limits() -> None:
    assert excerpt("short") == "short"
    assert excerpt("x" * 80) == "x" * 80
    assert excerpt("x" * 81) == "x" * 80 + "…"
    assert excerpt("\n" * 50, limit=10) == "\\n" * 5 + "…"


def test_a_long_match_is_truncated() -> None:
    verdict = check(invariant("regex", pattern="a+"), answered("a" * 1000))
    assert verdict.reason == "matched `a+` at 0: `" + "a" * 80 + "…`"


def test_patterns_are_compiled_once() -> None:
    assert compiled(r"\d+") is compiled(r"\d+")
    before = compiled.cache_info().hits
    check(invariant("regex", pattern=r"\d+"), answered("1"))
    check(invariant("regex", pattern=r"\d+"), answered("2"))
    assert compiled.cache_info().hits >= before + 2
