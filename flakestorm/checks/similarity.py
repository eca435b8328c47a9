"""Text similarity for the ``similarity`` and ``behavior_unchanged`` invariants (SPEC §3).

One seam, :class:`Similarity`, one method wide: ``score(a, b) -> float`` in ``[0, 1]``, plus a
``name`` the reports print next to every number ("lexical", "embeddings:<model>").

Two backends:

* :class:`LexicalSimilarity` (the default): deterministic, offline, no dependency.
* :class:`EmbeddingsSimilarity`: any OpenAI-compatible ``/embeddings`` endpoint. Its failures
  are the harness failing, not the agent, so they raise :class:`~flakestorm.errors.HarnessError`.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

import requests

from flakestorm.config import LlmEndpoint
from flakestorm.errors import HarnessError


class Similarity(Protocol):
    """How alike two texts are: 0.0 (unrelated) to 1.0 (the same)."""

    name: str

    def score(self, a: str, b: str) -> float: ...


# --------------------------------------------------------------------------- lexical

_WORD = re.compile(r"\w+")
_WORD_WEIGHT = 0.5
"""Share of the word features in the lexical score; the rest goes to character trigrams."""


class LexicalSimilarity:
    """Cosine similarity over word and character n-grams, blended half and half.

    Why this shape: agents' answers to the same question differ mostly in wording around the
    same content words ("The total is $42." / "Your total comes to $42"). Word unigrams carry
    that shared content and bigrams reward keeping it in order; character trigrams (taken inside
    each word, padded with spaces) give partial credit for inflections and typos ("refund" /
    "refunded" / "refnud") that whole-word features score as 0. Numbers are words, so "$42" vs
    "$24" lowers the score as it should.

    Normalisation is light and language-neutral: Unicode NFKC, case folding, and word
    tokenisation with ``\\w+`` (punctuation and whitespace carry no signal). A text without any
    word character is represented by its non-space characters, so ``"!!!"`` vs ``"???"`` is 0.

    Properties (tested): symmetric; identical texts score 1.0; empty vs non-empty 0.0; both
    empty (or whitespace only) 1.0; always within ``[0, 1]``; deterministic.
    """

    name = "lexical"

    def score(self, a: str, b: str) -> float:
        if a == b:
            return 1.0
        words_a, chars_a = _features(a)
        words_b, chars_b = _features(b)
        if not words_a and not words_b:
            return 1.0
        if not words_a or not words_b:
            return 0.0
        value = _WORD_WEIGHT * _cosine(words_a, words_b) + (1 - _WORD_WEIGHT) * _cosine(
            chars_a, chars_b
        )
        return min(1.0, max(0.0, value))


@lru_cache(maxsize=4096)
def _features(text: str) -> tuple[Counter[str], Counter[str]]:
    """(word unigrams + bigrams, in-word character trigrams) of ``text``."""
    normal = unicodedata.normalize("NFKC", text).casefold()
    tokens = _WORD.findall(normal)
    if not tokens:
        tokens = [c for c in normal if not c.isspace()]
    words: Counter[str] = Counter(tokens)
    words.update(f"{x} {y}" for x, y in itertools.pairwise(tokens))
    chars: Counter[str] = Counter()
    for token in tokens:
        padded = f" {token} "
        chars.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return words, chars


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    # summing over sorted shared keys makes the result bit-for-bit symmetric
    dot = math.fsum(a[k] * b[k] for k in sorted(a.keys() & b.keys()))
    if dot == 0:
        return 0.0
    norm_a = math.sqrt(math.fsum(v * v for v in a.values()))
    norm_b = math.sqrt(math.fsum(v * v for v in b.values()))
    return dot / (norm_a * norm_b)


# --------------------------------------------------------------------------- embeddings


class EmbeddingsSimilarity:
    """Cosine similarity of embeddings from an OpenAI-compatible ``POST {base_url}/embeddings``.

    ``base_url`` is the API root, like ``http://localhost:11434/v1``. Embeddings are cached per
    text for the life of the object (a run), so a baseline or an expected answer is embedded
    once. The cosine is clipped to ``[0, 1]`` (opposite directions are just "unrelated").
    Identical texts score 1.0 and an empty text against a non-empty one 0.0 without a request
    (most providers reject empty input). Safe to share between threads.
    """

    def __init__(
        self,
        endpoint: LlmEndpoint,
        timeout_s: float = 30.0,
        session: requests.Session | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.name = f"embeddings:{endpoint.model}"
        self.url = endpoint.base_url.rstrip("/") + "/embeddings"
        self._session = session or requests.Session()
        self._cache: dict[str, tuple[float, ...]] = {}
        self._lock = threading.Lock()

    def score(self, a: str, b: str) -> float:
        if a == b:
            return 1.0
        if not a.strip() or not b.strip():
            return 1.0 if not a.strip() and not b.strip() else 0.0
        vectors = self.embed([a, b])
        return min(1.0, max(0.0, _vector_cosine(vectors[0], vectors[1])))

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """The embedding of each text, fetching the ones not cached in one request."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            fetched = self._fetch(missing)
            with self._lock:
                self._cache.update(zip(missing, fetched, strict=True))
        with self._lock:
            return [self._cache[t] for t in texts]

    def close(self) -> None:
        self._session.close()

    def _fetch(self, texts: list[str]) -> list[tuple[float, ...]]:
        headers = {"Content-Type": "application/json"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        body = {"model": self.endpoint.model, "input": texts}
        where = f"embeddings endpoint {self.url}"
        try:
            response = self._session.post(
                self.url, json=body, headers=headers, timeout=self.timeout_s
            )
        except requests.Timeout as exc:
            raise HarnessError(f"{where} timed out after {self.timeout_s:g} s") from exc
        except requests.RequestException as exc:
            raise HarnessError(f"{where} is unreachable: {exc}") from exc
        if not 200 <= response.status_code < 300:
            detail = " ".join(response.text[:200].split())
            raise HarnessError(f"{where} answered HTTP {response.status_code}: {detail}")
        try:
            payload = response.json()
        except (ValueError, RecursionError) as exc:
            raise HarnessError(f"{where} answered with a body that is not JSON") from exc
        return _parse_embeddings(payload, len(texts), where)


def _parse_embeddings(payload: Any, count: int, where: str) -> list[tuple[float, ...]]:
    """``data[i].embedding`` of an OpenAI embeddings reply, ordered by ``index`` when given."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise HarnessError(
            f"{where} answered JSON without a `data` list of {count} embeddings "
            '(expected the OpenAI format: {"data": [{"embedding": [...]}]})'
        )
    items = data
    if all(isinstance(item, dict) and isinstance(item.get("index"), int) for item in data):
        items = sorted(data, key=lambda item: item["index"])
    vectors: list[tuple[float, ...]] = []
    for position, item in enumerate(items):
        embedding = item.get("embedding") if isinstance(item, dict) else None
        if (
            not isinstance(embedding, list)
            or not embedding
            or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                for x in embedding
            )
        ):
            raise HarnessError(f"{where}: data[{position}].embedding is not a list of numbers")
        vectors.append(tuple(float(x) for x in embedding))
    if len({len(v) for v in vectors}) > 1:
        raise HarnessError(f"{where} answered embeddings of different lengths")
    return vectors


def _vector_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        raise HarnessError(
            f"embeddings of different lengths ({len(a)} and {len(b)}): did the model change?"
        )
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0
