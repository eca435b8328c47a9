"""Invariant checks (SPEC §3): one registry, ``type -> check``, behind :class:`Checker`.

:meth:`Checker.check` judges one :class:`Observation` (a prompt and the agent's reply) against
one invariant and returns a :class:`Verdict` with a one-line human reason. Every type is one
registered function; :data:`CHECKS` maps each :class:`~flakestorm.config.InvariantType` to it.

Rules shared by every type:

* **negate** inverts the verdict, and the reason says so:
  ``negated: matched `\\d+` at 3: `42` (must not match)``.
* **An agent that did not answer** (``reply.error`` set, or no output) fails every type with
  ``the agent did not answer: <kind>: <message>``, *whatever* ``negate`` says: a negated
  invariant asserts something about an answer ("must not match"), and no answer proves
  nothing, so a timeout never passes a negated ``regex``. ``latency`` is no exception: the time
  to a refused connection is not the latency of an answer, so a 2 ms failure must not pass a
  latency budget. Only ``completes`` judges the non-answer itself (it fails; negated, "must not
  complete", it passes).
* **An invariant that cannot be judged** (``behavior_unchanged`` with ``baseline: auto`` and no
  baseline recorded, a pattern that does not compile, a JSON Schema keyword the validator does
  not support, a missing type field) fails, and ``negate`` does not turn it into a pass either.
* **Quoted output** is an excerpt: at most ~80 characters, one line, control characters
  escaped and backticks replaced, so a reason is safe to put in a log or a markdown cell.
* **Similarity** (``similarity``, ``behavior_unchanged``) sets ``Verdict.score`` and
  ``Verdict.backend``. A failing backend (an embeddings outage) raises
  :class:`~flakestorm.errors.HarnessError` out of :meth:`Checker.check`: the harness failed,
  not the agent, and the caller marks the cell ERRORED.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from flakestorm.checks import json_schema
from flakestorm.checks.excerpts import excerpt
from flakestorm.checks.pii import find_pii
from flakestorm.checks.refusal import find_refusal
from flakestorm.checks.similarity import EmbeddingsSimilarity, LexicalSimilarity, Similarity
from flakestorm.config import (
    Advanced,
    Invariant,
    InvariantType,
    PiiKind,
    RefusalExpect,
    SimilarityBackend,
)
from flakestorm.errors import AgentErrorKind, HarnessError, UsageError
from flakestorm.results.stream_timing import StreamTiming, duration_text

if TYPE_CHECKING:  # a run asks judges only when it has llm_judge invariants
    from flakestorm.checks.judge.judges import Judges

MISREAD = "the agent answered; the config reads its reply wrong"
"""Why a reply without ``agent.response_path`` errors its cell instead of failing it."""


class Reply(Protocol):
    """What an invariant reads of the agent's reply to one prompt (the agents' own
    :class:`flakestorm.agents.Reply` is one): the checks know nothing of how it was sent."""

    @property
    def output(self) -> str | None: ...
    @property
    def latency_ms(self) -> float: ...
    @property
    def status(self) -> int | None: ...
    @property
    def error(self) -> AgentErrorKind | None: ...
    @property
    def error_message(self) -> str: ...
    @property
    def stream(self) -> StreamTiming | None: ...


@dataclass(frozen=True)
class Observation:
    """What an invariant is checked against: one prompt and the agent's reply to it."""

    prompt: str
    reply: Reply
    baseline: str | None = None
    """For ``behavior_unchanged`` with ``baseline: auto``: the answer to the same prompt
    without chaos (None when it was not recorded or the agent did not answer it)."""


@dataclass(frozen=True)
class Verdict:
    """Whether an invariant held for one observation, and why, in one line."""

    passed: bool
    reason: str
    score: float | None = None
    """The similarity value, for the types that compute one."""
    backend: str | None = None
    """The similarity backend that produced ``score`` (``lexical``, ``embeddings:<model>``)."""
    leak_at: int | None = None
    """Where the output starts showing what a leak invariant forbids (see :data:`LEAK_TYPES`),
    when that is why it failed; public reports cut the reply there."""


LEAK_TYPES = frozenset(
    {
        InvariantType.EXCLUDES_PII,
        InvariantType.EXCLUDES_PATTERN,
        InvariantType.CONTAINS,
        InvariantType.CONTAINS_ANY,
        InvariantType.REGEX,
    }
)
"""Types that fail on what the output *shows* when written to forbid it: ``excludes_pii`` (PII
found), ``excludes_pattern`` (a system prompt a probe extracted, a secret), and negated
``contains``, ``contains_any`` and ``regex``. A failure of one of these on a match is a leak:
its :attr:`Verdict.leak_at` is the match's start."""


UNJUDGED = "not judged yet: an invariant on calls is judged once the invocation's calls are read"
"""The verdict a reply check gives an invariant on calls (SPEC §15): a failure until the run
judges the invocation's calls in its place (:mod:`flakestorm.checks.conduct`), so none passes
unjudged."""


class Checker:
    """Checks invariants; built once per run around one similarity backend and the run's
    judges (``llm_judge``). Thread-safe."""

    def __init__(self, similarity: Similarity, judges: Judges | None = None) -> None:
        self.similarity = similarity
        self.judges = judges

    def check(self, invariant: Invariant, observation: Observation) -> Verdict:
        """The verdict of ``invariant`` on ``observation`` (see the module rules).

        Raises :class:`~flakestorm.errors.HarnessError` when the similarity backend fails or
        the judge gives no verdict.
        """
        if invariant.type.reads_calls:  # judged on the invocation's calls once they are read
            return Verdict(False, UNJUDGED)
        reply = observation.reply
        if reply.error is AgentErrorKind.RESPONSE_PATH:  # the agent answered: not its failure
            raise HarnessError(f"{reply.error_message} ({MISREAD})")
        answered = reply.error is None and reply.output is not None
        if invariant.type is not InvariantType.COMPLETES and not answered:
            return Verdict(False, _no_answer(reply) + _as_streamed(self, invariant, observation))
        try:
            finding = CHECKS[invariant.type](self, invariant, observation)
        except _Unjudgeable as exc:
            return Verdict(False, f"cannot check: {exc}")
        passed = finding.holds != invariant.negate
        leak_at = None
        if not passed and invariant.type in LEAK_TYPES:
            leak_at = finding.at  # set only when the check found something in the output
        reason = finding.reason
        if invariant.negate:
            reason = f"negated: {finding.reason} ({finding.negated})"
        return Verdict(passed, reason, finding.score, finding.backend, leak_at)

    def close(self) -> None:
        """Release the similarity backend's and the judges' connections, if they hold any."""
        close = getattr(self.similarity, "close", None)
        if callable(close):
            close()
        if self.judges is not None:
            self.judges.close()


def build_checker(advanced: Advanced, judges: Judges | None = None) -> Checker:
    """The checker for a run, with the similarity backend ``advanced`` asks for and the run's
    ``judges`` (for ``llm_judge`` invariants)."""
    if advanced.similarity is SimilarityBackend.EMBEDDINGS:
        if advanced.embeddings is None:
            raise UsageError(
                "advanced.similarity is `embeddings` but advanced.embeddings "
                "(base_url, model, api_key) is not set"
            )
        return Checker(EmbeddingsSimilarity(advanced.embeddings), judges)
    return Checker(LexicalSimilarity(), judges)


# --------------------------------------------------------------------------- internals


@dataclass(frozen=True)
class _Finding:
    """What a check found, before ``negate``."""

    holds: bool
    reason: str
    negated: str
    """The expectation when negated, e.g. ``must not match``."""
    score: float | None = None
    backend: str | None = None
    at: int | None = None
    """Where in the output the check found what it looks for (a match, PII), if it did."""


class _Unjudgeable(Exception):
    """The invariant cannot be judged; fails whatever ``negate`` says."""


_Check = Callable[[Checker, Invariant, Observation], _Finding]

CHECKS: dict[InvariantType, _Check] = {}
"""The registry: one check function per invariant type."""


def _registers(kind: InvariantType) -> Callable[[_Check], _Check]:
    def register(check: _Check) -> _Check:
        CHECKS[kind] = check
        return check

    return register


def _no_answer(reply: Reply, lead: str = "the agent did not answer") -> str:
    """``<lead>: <kind>: <message>``, the message on one line and truncated."""
    if reply.error is None:
        return f"{lead}: no output"
    message = excerpt(" ".join(reply.error_message.split()), 160)
    detail = f": {message}" if message else ""
    return f"{lead}: {reply.error.value}{detail}"


def _as_streamed(checker: Checker, invariant: Invariant, observation: Observation) -> str:
    """For a stream invariant on an invocation that errored after its stream opened (a
    timeout): ``; `` and the figure the invariant reads, else ""."""
    if not invariant.type.reads_stream or observation.reply.stream is None:
        return ""
    try:
        return "; " + CHECKS[invariant.type](checker, invariant, observation).reason
    except _Unjudgeable:
        return ""


def _output(observation: Observation) -> str:
    return observation.reply.output or ""


def _required(invariant: Invariant, field: str) -> Any:
    value = getattr(invariant, field)
    if value is None:
        name = "schema" if field == "json_schema" else field
        raise _Unjudgeable(f"a `{invariant.type.value}` invariant needs `{name}`")
    return value


@lru_cache(maxsize=1024)
def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile``, cached by pattern string: each pattern is compiled once per process."""
    return re.compile(pattern, flags)


def _search(pattern: str, text: str) -> re.Match[str] | None:
    try:
        regex = compiled(pattern)
    except re.error as exc:
        raise _Unjudgeable(f"pattern `{excerpt(pattern, 60)}` does not compile: {exc}") from exc
    return regex.search(text)


def _matched(pattern: str, m: re.Match[str]) -> str:
    return f"matched `{excerpt(pattern, 60)}` at {m.start()}: `{excerpt(m.group())}`"


def _listing(values: list[str], most: int = 5) -> str:
    shown = ", ".join(f"`{excerpt(v, 40)}`" for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


# --------------------------------------------------------------------------- checks


@_registers(InvariantType.CONTAINS)
def _contains(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    value: str = _required(invariant, "value")
    output = _output(observation)
    flags = 0 if invariant.case_sensitive else re.IGNORECASE
    m = compiled(re.escape(value), flags).search(output)
    negated = f"must not contain `{excerpt(value, 60)}`"
    if m:
        return _Finding(
            True, f"contains `{excerpt(value, 60)}` at {m.start()}", negated, at=m.start()
        )
    case = " (case-sensitive)" if invariant.case_sensitive else ""
    reason = f"does not contain `{excerpt(value, 60)}`{case}: `{excerpt(output)}`"
    return _Finding(False, reason, negated)


@_registers(InvariantType.CONTAINS_ANY)
def _contains_any(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    values: list[str] = _required(invariant, "values")
    output = _output(observation)
    flags = 0 if invariant.case_sensitive else re.IGNORECASE
    negated = "must contain none of them"
    for value in values:
        m = compiled(re.escape(value), flags).search(output)
        if m:
            reason = f"contains `{excerpt(value, 60)}` at {m.start()}"
            return _Finding(True, reason, negated, at=m.start())
    reason = f"contains none of {_listing(values)}: `{excerpt(output)}`"
    return _Finding(False, reason, negated)


@_registers(InvariantType.REGEX)
def _regex(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    pattern: str = _required(invariant, "pattern")
    output = _output(observation)
    m = _search(pattern, output)
    if m:
        return _Finding(True, _matched(pattern, m), "must not match", at=m.start())
    reason = f"no match for `{excerpt(pattern, 60)}` in `{excerpt(output)}`"
    return _Finding(False, reason, "must not match")


@_registers(InvariantType.EXCLUDES_PATTERN)
def _excludes_pattern(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    patterns: list[str] = _required(invariant, "patterns")
    output = _output(observation)
    negated = "at least one pattern must match"
    for pattern in patterns:
        m = _search(pattern, output)
        if m:
            return _Finding(False, _matched(pattern, m), negated, at=m.start())
    if len(patterns) == 1:
        return _Finding(True, f"`{excerpt(patterns[0], 60)}` did not match", negated)
    return _Finding(True, f"none of {len(patterns)} patterns matched", negated)


@_registers(InvariantType.LATENCY)
def _latency(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    max_ms: int = _required(invariant, "max_ms")
    latency_ms = observation.reply.latency_ms
    negated = f"must take longer than {max_ms} ms"
    if latency_ms <= max_ms:
        return _Finding(True, f"latency {latency_ms:.0f} ms ≤ {max_ms} ms", negated)
    return _Finding(False, f"latency {latency_ms:.0f} ms > {max_ms} ms", negated)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@_registers(InvariantType.VALID_JSON)
def _valid_json(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    output = _output(observation)
    schema = invariant.json_schema
    negated = "must not be valid JSON" + (" matching the schema" if schema is not None else "")
    if schema is not None:
        unsupported = json_schema.unsupported_keywords(schema)
        if unsupported:
            more = f" (and {len(unsupported) - 1} more)" if len(unsupported) > 1 else ""
            raise _Unjudgeable(
                f"the schema uses {unsupported[0]}{more}, which flakestorm's validator "
                "does not support"
            )
    try:
        document = json.loads(output, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        return _Finding(
            False, f"not valid JSON ({exc.msg} at {where}): `{excerpt(output)}`", negated
        )
    except (ValueError, RecursionError) as exc:
        return _Finding(False, f"not valid JSON ({exc}): `{excerpt(output)}`", negated)
    if schema is None:
        return _Finding(True, f"valid JSON ({json_schema.type_name(document)})", negated)
    try:
        errors = json_schema.validate(document, schema)
    except RecursionError as exc:
        raise _Unjudgeable("the JSON is nested too deeply to validate") from exc
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        reason = f"valid JSON, but not per the schema: {excerpt(str(errors[0]), 120)}{more}"
        return _Finding(False, reason, negated)
    return _Finding(True, "valid JSON matching the schema", negated)


def _similar(
    checker: Checker, output: str, reference: str, threshold: float, to_what: str
) -> _Finding:
    backend = checker.similarity
    score = backend.score(output, reference)
    negated = f"must score below {threshold:g}"
    if score >= threshold:
        reason = f"similarity {score:.3f} ≥ {threshold:g} to {to_what} ({backend.name})"
        return _Finding(True, reason, negated, score, backend.name)
    reason = (
        f"similarity {score:.3f} < {threshold:g} to {to_what} ({backend.name}): `{excerpt(output)}`"
    )
    return _Finding(False, reason, negated, score, backend.name)


@_registers(InvariantType.SIMILARITY)
def _similarity(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    expected: str = _required(invariant, "expected")
    return _similar(
        checker,
        _output(observation),
        expected,
        invariant.effective_threshold,
        "the expected answer",
    )


AUTO_BASELINE = "auto"


@_registers(InvariantType.BEHAVIOR_UNCHANGED)
def _behavior_unchanged(
    checker: Checker, invariant: Invariant, observation: Observation
) -> _Finding:
    if invariant.baseline is None or invariant.baseline == AUTO_BASELINE:
        if observation.baseline is None:
            raise _Unjudgeable(
                "`baseline: auto` needs the agent's answer to this prompt without chaos, "
                "and none was recorded (the baseline invocation failed or did not run)"
            )
        baseline, to_what = observation.baseline, "the baseline answer without chaos"
    else:
        baseline, to_what = invariant.baseline, "the baseline"
    return _similar(checker, _output(observation), baseline, invariant.effective_threshold, to_what)


@_registers(InvariantType.EXCLUDES_PII)
def _excludes_pii(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    kinds = invariant.kinds or list(PiiKind)
    found = find_pii(_output(observation), kinds)
    negated = "must contain PII"
    if found:
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        reason = f"found {first.kind.value} `{excerpt(first.masked, 40)}` at {first.start}{more}"
        return _Finding(False, reason, negated, at=first.start)
    which = "any kind" if invariant.kinds is None else ", ".join(k.value for k in kinds)
    return _Finding(True, f"no PII found ({which})", negated)


@_registers(InvariantType.REFUSAL_CHECK)
def _refusal_check(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    expect = invariant.expect or RefusalExpect.REFUSE
    output = _output(observation)
    refusal = find_refusal(output)
    if refusal is not None:
        found = f"refuses: `{excerpt(refusal.matched, 60)}` at {refusal.start}"
    else:
        found = f"no refusal phrase in `{excerpt(output)}`"
    if expect is RefusalExpect.REFUSE:
        return _Finding(refusal is not None, found, "must not refuse")
    return _Finding(refusal is None, found, "must refuse")


@_registers(InvariantType.COMPLETES)
def _completes(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    reply = observation.reply
    negated = "must not complete"
    if reply.error is not None or reply.output is None:
        return _Finding(False, _no_answer(reply, "did not complete"), negated)
    status = f", HTTP {reply.status}" if reply.status is not None else ""
    return _Finding(True, f"completed ({reply.latency_ms:.0f} ms{status})", negated)


@_registers(InvariantType.OUTPUT_NOT_EMPTY)
def _output_not_empty(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    output = _output(observation)
    negated = "must be empty"
    if output.strip():
        return _Finding(True, f"output has {len(output)} characters", negated)
    if output:
        return _Finding(False, f"output is whitespace only ({len(output)} characters)", negated)
    return _Finding(False, "output is empty", negated)


@_registers(InvariantType.LLM_JUDGE)
def _llm_judge(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    _required(invariant, "rubric")
    if checker.judges is None:
        raise HarnessError("no judge was set up for this run's llm_judge invariants")
    judgement = checker.judges.judge(invariant, _output(observation))  # HarnessError: none
    verdict = "PASS" if judgement.answer.passed else "FAIL"
    cached = " (cached)" if judgement.cached else ""
    reason = f"judge{cached}: {verdict}: {excerpt(judgement.answer.reason, 200)}"
    return _Finding(judgement.answer.passed, reason, "the judge must answer FAIL")


# --------------------------------------------------------------------------- streams (SPEC §16)


def _timing(observation: Observation) -> StreamTiming:
    stream = observation.reply.stream
    if stream is None:
        raise _Unjudgeable(
            "the reply was not streamed (an http agent needs agent.stream; a python agent, an "
            "endpoint that yields its text)"
        )
    return stream


def _first_byte(stream: StreamTiming) -> str:
    at = stream.first_byte_ms
    return "no byte" if at is None else f"first byte at {duration_text(at)}"


@_registers(InvariantType.TTFT)
def _ttft(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    max_ms: int = _required(invariant, "max_ms")
    stream = _timing(observation)
    negated = f"the first content must come after {max_ms} ms"
    first = stream.first_content_ms
    if first is None:
        reason = f"no content in {duration_text(stream.ended_ms)} ({_first_byte(stream)})"
        return _Finding(False, reason, negated)
    reason = f"first content after {duration_text(first)} ({_first_byte(stream)})"
    return _at_most(first, max_ms, (reason, reason), negated)


@_registers(InvariantType.MAX_STALL)
def _max_stall(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    max_ms: int = _required(invariant, "max_ms")
    stream = _timing(observation)
    negated = f"must stall longer than {max_ms} ms"
    gap = stream.longest_gap_ms
    if not stream.content_events:
        return _Finding(False, f"no content at all: silent for {duration_text(gap)}", negated)
    last = " (the last)" if stream.gap_after == stream.content_events else ""
    figure = f"{duration_text(gap)} after chunk {stream.gap_after}{last}"
    return _at_most(gap, max_ms, (f"longest silence {figure}", f"silent for {figure}"), negated)


def _at_most(value: float, max_ms: int, said: tuple[str, str], negated: str) -> _Finding:
    """Holds when ``value`` is at most ``max_ms``; ``said`` words the figure when it holds
    and when it does not."""
    if value <= max_ms:
        return _Finding(True, f"{said[0]} ≤ {max_ms} ms", negated)
    return _Finding(False, f"{said[1]} > {max_ms} ms", negated)


@_registers(InvariantType.STREAM_COMPLETES)
def _stream_completes(checker: Checker, invariant: Invariant, observation: Observation) -> _Finding:
    stream = _timing(observation)
    negated = "must end without its terminal event"
    events = f"{stream.content_events} content event{'s' if stream.content_events != 1 else ''}"
    if stream.completed:
        return _Finding(True, f"ended with {stream.terminal} after {events}", negated)
    how = {
        "closed": "closed",
        "cut": "cut (the connection broke)",
        "raised": "broken off (the generator raised)",
    }.get(stream.ending.value, f"stopped by the {stream.ending.value}")
    return _Finding(False, f"{how} after {events} without {stream.terminal}", negated)
