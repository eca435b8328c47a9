from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.server import LoopbackServer, Request, Response

from flakestorm.checks.similarity import EmbeddingsSimilarity, LexicalSimilarity, Similarity
from flakestorm.config import LlmEndpoint
from flakestorm.errors import HarnessError

lexical = LexicalSimilarity()
texts = st.text(max_size=200)


# --------------------------------------------------------------------------- lexical


@given(texts, texts)
def test_lexical_is_symmetric(a: str, b: str) -> None:
    assert lexical.score(a, b) == lexical.score(b, a)


@given(texts, texts)
def test_lexical_is_within_range(a: str, b: str) -> None:
    assert 0.0 <= lexical.score(a, b) <= 1.0


@given(texts)
def test_lexical_identity_is_one(a: str) -> None:
    assert lexical.score(a, a) == 1.0


@given(st.text(min_size=1).filter(lambda t: any(c.isalnum() for c in t)))
def test_lexical_empty_against_text_is_zero(a: str) -> None:
    assert lexical.score("", a) == 0.0


def test_lexical_empty_texts_are_identical() -> None:
    assert lexical.score("", "") == 1.0
    assert lexical.score("", "  \n") == 1.0


def test_lexical_ignores_case_and_punctuation() -> None:
    assert lexical.score("Hello, World!", "hello world") == 1.0


def test_lexical_ranks_paraphrase_above_unrelated() -> None:
    answer = "Your order total is $42.10 and it ships tomorrow."
    paraphrase = "The total for your order is $42.10; it ships tomorrow."
    reordered = "It ships tomorrow, and your order total is $42.10."
    unrelated = "I cannot help with that request."
    assert lexical.score(answer, paraphrase) >= 0.75
    assert lexical.score(answer, reordered) >= 0.75
    assert lexical.score(answer, unrelated) < 0.2


def test_lexical_numbers_matter() -> None:
    same = lexical.score("The total is $42.10", "The total is $42.10.")
    other = lexical.score("The total is $42.10", "The total is $97.35")
    assert same == 1.0
    assert other < 0.8


def test_lexical_gives_partial_credit_for_inflections() -> None:
    assert lexical.score("refund", "refunded") > 0.3
    assert lexical.score("refund", "banana") == 0.0


def test_lexical_symbols_only_texts_are_compared_by_symbol() -> None:
    assert lexical.score("!!!", "???") == 0.0
    assert lexical.score("!!!", "!!") > 0.5


def test_backends_satisfy_the_protocol() -> None:
    backends: list[Similarity] = [
        lexical,
        EmbeddingsSimilarity(LlmEndpoint(base_url="http://127.0.0.1:9/v1", model="m")),
    ]
    assert [b.name for b in backends] == ["lexical", "embeddings:m"]


# --------------------------------------------------------------------------- embeddings

VECTORS = {
    "cat": [1.0, 0.0, 0.0],
    "kitten": [0.8, 0.6, 0.0],
    "car": [0.0, 0.0, 1.0],
    "anti-cat": [-1.0, 0.0, 0.0],
}


def embeddings(request: Request) -> Response:
    body = request.json()
    data = [
        {"object": "embedding", "index": i, "embedding": VECTORS[text]}
        for i, text in enumerate(body["input"])
    ]
    # answered out of order on purpose: the client must sort by `index`
    return Response.json({"object": "list", "data": data[::-1], "model": body["model"]})


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(embeddings) as s:
        yield s


def backend(server: LoopbackServer, api_key: str | None = None) -> EmbeddingsSimilarity:
    endpoint = LlmEndpoint(base_url=server.url_for("/v1/"), model="embed-1", api_key=api_key)
    return EmbeddingsSimilarity(endpoint, timeout_s=5)


def test_embeddings_cosine_and_request_format(server: LoopbackServer) -> None:
    similarity = backend(server, api_key="sk-test")
    assert similarity.name == "embeddings:embed-1"
    assert math.isclose(similarity.score("cat", "kitten"), 0.8)
    assert similarity.score("cat", "car") == 0.0
    request = server.requests[0]
    assert request.method == "POST"
    assert request.path == "/v1/embeddings"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert request.json() == {"model": "embed-1", "input": ["cat", "kitten"]}


def test_embeddings_are_cached_per_text(server: LoopbackServer) -> None:
    similarity = backend(server)
    similarity.score("cat", "kitten")
    similarity.score("kitten", "cat")
    similarity.score("cat", "car")
    assert [r.json()["input"] for r in server.requests] == [["cat", "kitten"], ["car"]]
    assert "Authorization" not in server.requests[0].headers


def test_embeddings_negative_cosine_is_clipped_to_zero(server: LoopbackServer) -> None:
    assert backend(server).score("cat", "anti-cat") == 0.0


def test_embeddings_identical_and_empty_texts_need_no_request(server: LoopbackServer) -> None:
    similarity = backend(server)
    assert similarity.score("cat", "cat") == 1.0
    assert similarity.score("", "cat") == 0.0
    assert similarity.score(" ", "") == 1.0
    assert server.requests == []


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (Response.text("upstream exploded", status=500), "answered HTTP 500: upstream exploded"),
        (Response.text("<html>not json</html>"), "not JSON"),
        (Response.json({"data": []}), "without a `data` list of 2 embeddings"),
        (Response.json([1, 2]), "without a `data` list"),
        (
            Response.json({"data": [{"embedding": "x"}, {"embedding": [1.0]}]}),
            "data[0].embedding is not a list of numbers",
        ),
        (
            Response.json({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]}),
            "different lengths",
        ),
    ],
)
def test_embeddings_bad_answers_are_harness_errors(response: Response, message: str) -> None:
    with (
        LoopbackServer(lambda request: response) as server,
        pytest.raises(HarnessError, match="embeddings endpoint") as caught,
    ):
        backend(server).score("cat", "kitten")
    assert message in str(caught.value)


def test_embeddings_down_port_is_a_harness_error() -> None:
    server = LoopbackServer().start()
    server.stop()  # the port is now closed: connection refused
    with pytest.raises(HarnessError, match="unreachable"):
        backend(server).score("cat", "kitten")


def test_embeddings_timeout_is_a_harness_error() -> None:
    with LoopbackServer() as server:
        server.handler = server.hang
        endpoint = LlmEndpoint(base_url=server.url_for("/v1"), model="m")
        with pytest.raises(HarnessError, match=r"timed out after 0\.2 s"):
            EmbeddingsSimilarity(endpoint, timeout_s=0.2).score("cat", "kitten")
