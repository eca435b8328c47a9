"""One judge: asks a verdict of a model (or of the mock), never more than once per distinct
(rubric, examples, output) — in memory for the run, on disk across runs — and counts what
happened for the reports (:class:`JudgeHealth`).

Each answer is asked at temperature 0 with the run's seed. An answer that is no verdict (a
refusal, prose, an empty answer), a non-2xx reply, a reply over :data:`MAX_REPLY_BYTES` (read no
further), an unreachable endpoint or a timeout is asked again, :data:`ATTEMPTS` answers in all
(the retries with the next seeds); then the judgement is unusable and :meth:`Judge.judge` raises
:class:`~flakestorm.errors.HarnessError`: the cell is ERRORED, never passed nor failed.
Concurrent cells asking about the same output wait for one answer. The client calls the endpoint
directly (``trust_env`` off: no ``HTTP_PROXY``), so a judge call never meets the chaos of the
cell it judges and is never one of the agent's calls.

This module is where the judge's HTTP client lives, so ``requests`` is imported here
(``tests/test_architecture.py`` lists it among the places allowed to).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from flakestorm.checks.judge import cache, mock
from flakestorm.checks.judge.asking import Answer, NotAVerdict, messages, read_answer
from flakestorm.config import MOCK_JUDGE, Judge, JudgeEndpoint, JudgeExample
from flakestorm.errors import HarnessError
from flakestorm.redaction import masked_url

ATTEMPTS = 3
"""Answers asked for one judgement before it is unusable: the first and two retries."""
MAX_REPLY_BYTES = 1024 * 1024
"""The most of a judge's reply that is read: a verdict is one short JSON object, and a reply
over this is no verdict (the rest is never read)."""


@dataclass
class JudgeHealth:
    """What one judge did in a run."""

    verdicts: int = 0
    """Judgements that ended in a verdict (cached ones included), calibration left out."""
    cached: int = 0
    """Of those, the ones that cost no judge call (read from disk, or judged earlier in the
    run)."""
    retried: int = 0
    """Judgements that needed more than one answer."""
    unusable: int = 0
    """Judgements that ended without a verdict (their cells are errored)."""
    calls: int = 0
    """Answers asked of the judge."""
    examples: int = 0
    agreed: int = 0
    """Calibration: examples judged, and how many got their verdict."""


@dataclass(frozen=True)
class Judgement:
    """A verdict, and whether it came from an earlier run's cache (a verdict judged earlier in
    this run is not marked: which of a run's concurrent cells asked first is chance, and the
    reasons must not depend on it)."""

    answer: Answer
    cached: bool


class JudgeClient:
    """One judge (an endpoint or the mock); thread-safe. See the module doc."""

    def __init__(self, judge: Judge, seed: int, cache_root: Path) -> None:
        self.endpoint: JudgeEndpoint | None = None if judge == MOCK_JUDGE else judge
        self.model = self.endpoint.model if self.endpoint is not None else mock.MODEL
        self._url = chat_url(str(self.endpoint.base_url)) if self.endpoint is not None else ""
        self.url = masked_url(self._url) if self.endpoint is not None else "built in"
        """Where the judge is asked, as it may be shown (no credentials, no query string)."""
        self._seed = seed
        self._root = cache_root
        self._lock = threading.Lock()
        self._memo: dict[tuple[str, str], Judgement | HarnessError] = {}
        self._asking: dict[tuple[str, str], threading.Event] = {}
        self._session: requests.Session | None = None
        if self.endpoint is not None:
            self._session = requests.Session()
            self._session.trust_env = False
        self.health = JudgeHealth()

    @property
    def label(self) -> str:
        """``llm judge gpt-4o-mini at https://…/chat/completions`` or ``llm judge mock``."""
        if self.endpoint is None:
            return "llm judge mock (built in, deterministic)"
        return f"llm judge {self.model} at {self.url}"

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    def group(self, rubric: str, examples: Sequence[JudgeExample]) -> Path:
        return cache.group_dir(self._root, self.model, rubric, examples)

    def judge(
        self, rubric: str, examples: Sequence[JudgeExample], output: str, counted: bool = True
    ) -> Judgement:
        """The verdict on ``output``; HarnessError when the judge gave none in
        :data:`ATTEMPTS` answers. ``counted``: a judgement of the run (not calibration)."""
        group = self.group(rubric, examples)
        key = (str(group), output)
        while True:
            with self._lock:
                known = self._memo.get(key)
                if known is not None:
                    return self._recall(known, counted)
                waiting = self._asking.get(key)
                if waiting is None:
                    self._asking[key] = threading.Event()
                    break
            waiting.wait()
        try:
            outcome = self._fresh(rubric, examples, output, group, counted)
        finally:
            with self._lock:
                self._asking.pop(key).set()
        if isinstance(outcome, HarnessError):
            raise outcome
        return outcome

    def forget(self, rubric: str, examples: Sequence[JudgeExample], output: str) -> None:
        """The verdict on ``output`` kept neither for the run nor on disk (it failed
        calibration): the next ask asks the judge. OSError: its file cannot be removed."""
        group = self.group(rubric, examples)
        with self._lock:
            self._memo.pop((str(group), output), None)
        if self.endpoint is not None:
            cache.remove(cache.verdict_path(group, output))

    def _recall(self, known: Judgement | HarnessError, counted: bool) -> Judgement:
        if isinstance(known, HarnessError):
            self.health.unusable += counted
            raise known
        self.health.verdicts += counted
        self.health.cached += counted
        return known

    def _fresh(
        self,
        rubric: str,
        examples: Sequence[JudgeExample],
        output: str,
        group: Path,
        counted: bool,
    ) -> Judgement | HarnessError:
        key = (str(group), output)
        if self.endpoint is None:
            answer = mock.judge(rubric, output)
            if answer is None:
                why = "the mock judge finds no quoted phrase in the rubric"
                return self._unusable(key, why, counted)
            return self._verdict(key, answer, counted, cached=False)
        path = cache.verdict_path(group, output)
        stored = cache.read(path)
        if stored is not None:
            return self._verdict(key, stored, counted, cached=True)
        why = ""
        for attempt in range(ATTEMPTS):
            got = self._ask(rubric, examples, output, attempt)
            if isinstance(got, Answer):
                cache.write(path, self.model, got)
                with self._lock:
                    self.health.retried += counted and attempt > 0
                return self._verdict(key, got, counted, cached=False)
            why = got.why
        why = f"{self.label} gave no verdict in {ATTEMPTS} answers, the last because {why}"
        return self._unusable(key, why, counted)

    def _verdict(
        self, key: tuple[str, str], answer: Answer, counted: bool, cached: bool
    ) -> Judgement:
        judgement = Judgement(answer, cached)
        with self._lock:
            self._memo[key] = judgement
            self.health.verdicts += counted
            self.health.cached += counted and cached
        return judgement

    def _unusable(self, key: tuple[str, str], why: str, counted: bool) -> HarnessError:
        error = HarnessError(why)
        with self._lock:
            self._memo[key] = error
            self.health.unusable += counted
        return error

    def _ask(
        self, rubric: str, examples: Sequence[JudgeExample], output: str, attempt: int
    ) -> Answer | NotAVerdict:
        endpoint = self.endpoint
        assert endpoint is not None and self._session is not None
        body: dict[str, Any] = {
            "model": endpoint.model,
            "messages": messages(rubric, examples, output),
            "temperature": 0,
            "seed": (self._seed + attempt) % 2**31,
        }
        headers = {"Content-Type": "application/json"}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        with self._lock:
            self.health.calls += 1
        try:
            with self._session.post(
                self._url, json=body, headers=headers, timeout=endpoint.timeout_s, stream=True
            ) as response:
                if not 200 <= response.status_code < 300:
                    return NotAVerdict(f"it answered HTTP {response.status_code}")
                data = _capped(response)
        except requests.Timeout:
            return NotAVerdict(f"it timed out after {endpoint.timeout_s:g} s")
        except requests.RequestException as exc:
            return NotAVerdict(f"the request failed ({type(exc).__name__})")
        if data is None:
            return NotAVerdict(f"the reply is over {MAX_REPLY_BYTES // 2**20} MiB")
        try:
            content = json.loads(data)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            return NotAVerdict("the reply is not a chat completion with a message")
        if not isinstance(content, str):
            return NotAVerdict("the message has no text")
        return read_answer(content)


def chat_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, the path added before any query string
    (``https://host/v1?api-version=1`` → ``https://host/v1/chat/completions?api-version=1``)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))


def _capped(response: requests.Response) -> bytes | None:
    """The reply's body, or None once it is over :data:`MAX_REPLY_BYTES`."""
    parts, size = [], 0
    for part in response.iter_content(64 * 1024):
        size += len(part)
        if size > MAX_REPLY_BYTES:
            return None
        parts.append(part)
    return b"".join(parts)
