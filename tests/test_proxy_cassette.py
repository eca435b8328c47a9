"""Cassettes: the proxy records real upstream exchanges and serves them back offline."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.fake_provider import ASK, MESSAGES, TEXT, fake_provider
from support.proxy_rig import session
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.faults.decisions import ActiveScenario, Target
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.upstreams.cassette import Cassette, CassetteError, RequestKey
from flakestorm.config import LlmFault


def exchanges(proxy_url: str) -> list[tuple[int, Any]]:
    """A fixed set of calls: LLM (both providers, whole and streamed) and a tool."""
    out: list[tuple[int, Any]] = []
    calls = [
        ("/llm/openai/v1/chat/completions", {"model": "g", "messages": MESSAGES}),
        ("/llm/openai/v1/chat/completions", {"model": "g", "messages": MESSAGES, "stream": True}),
        ("/llm/anthropic/v1/messages", {"model": "c", "max_tokens": 9, "messages": ASK}),
        (
            "/llm/anthropic/v1/messages",
            {"model": "c", "max_tokens": 9, "messages": ASK, "stream": True},
        ),
    ]
    for path, body in calls:
        response = requests.post(proxy_url + path, json=body, timeout=5)
        out.append((response.status_code, response.text))
    tool = requests.get(f"{proxy_url}/tools/weather/today?b=2&a=1", timeout=5)
    out.append((tool.status_code, tool.json()))
    return out


def counting_tool() -> LoopbackServer:
    counter = itertools.count()
    return LoopbackServer(lambda r: Response.json({"n": next(counter), "path": r.path}))


def test_record_then_replay_offline(tmp_path: Path) -> None:
    cassette = tmp_path / "run.cassette.jsonl"
    with LoopbackServer(fake_provider) as provider, counting_tool() as tool:
        with ChaosProxy(
            llm_upstream=provider.url, tools={"weather": tool.url}, record=cassette
        ) as proxy:
            recorded = exchanges(proxy.url)
        dead_tool = tool.url
    assert [status for status, _ in recorded] == [200] * 5
    lines = cassette.read_text().splitlines()
    assert json.loads(lines[0]) == {"flakestorm_cassette": 1} and len(lines) == 6
    streamed = json.loads(lines[2])["response"]
    assert "chunks" in streamed and len(streamed["chunks"]) > 5

    # the provider and the tool are gone: only the cassette answers
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"weather": dead_tool}) as proxy:
        replayed = exchanges(proxy.url)
        assert all(i.upstream_status == 200 for i in proxy.log.snapshot())
    assert replayed == recorded


def test_replayed_streams_are_streamed_and_faults_still_apply(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    body = {"model": "g", "messages": MESSAGES, "stream": True}
    url = "/llm/openai/v1/chat/completions"
    with (
        LoopbackServer(fake_provider) as provider,
        ChaosProxy(llm_upstream=provider.url, record=cassette) as proxy,
    ):
        requests.post(proxy.url + url, json=body, timeout=5)
    with ChaosProxy(llm_upstream=f"cassette:{cassette}") as proxy:
        proxy.activate(
            ActiveScenario(
                "s",
                1,
                llm_faults=(
                    LlmFault.model_validate({"mode": "truncated_response", "max_tokens": 2}),
                ),
            )
        )
        response = requests.post(proxy.url + url, json=body, timeout=5, stream=True)
        assert response.headers["Transfer-Encoding"] == "chunked"
        frames = [f for f in response.text.split("\n\n") if f.startswith("data: {")]
    finishes = [json.loads(f[6:])["choices"][0]["finish_reason"] for f in frames]
    assert "length" in finishes


def test_a_miss_is_a_loud_502_showing_the_request(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with (
        LoopbackServer(fake_provider) as provider,
        ChaosProxy(llm_upstream=provider.url, record=cassette) as proxy,
    ):
        requests.post(
            f"{proxy.url}/llm/openai/v1/chat/completions",
            json={"model": "g", "messages": MESSAGES},
            timeout=5,
        )
    with ChaosProxy(llm_upstream=f"cassette:{cassette}") as proxy:
        other = {"model": "g", "messages": [{"role": "user", "content": "Something new"}]}
        response = requests.post(
            f"{proxy.url}/llm/openai/v1/chat/completions", json=other, timeout=5
        )
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["type"] == "cassette_miss"
        assert error["request"]["method"] == "POST"
        assert error["request"]["path"] == "/v1/chat/completions"
        assert "Something new" in error["request"]["body"]
        item = proxy.log.snapshot()[-1]
        assert item.upstream_error is not None and item.upstream_error.startswith("cassette_miss")
        assert item.fired == () and item.status == 502


def test_matching_ignores_volatile_fields_key_order_and_query_order() -> None:
    a = RequestKey("llm", "POST", "/v1/x", "b=2&a=1", b'{"model": "g", "user": "u1", "n": 1}')
    b = RequestKey(
        "llm", "post", "/v1/x", "a=1&b=2", b'{"n":1,"model":"g","user":"u2","metadata":{}}'
    )
    assert a.digest == b.digest
    streamed = RequestKey("llm", "POST", "/v1/x", "", b'{"model": "g", "n": 1, "stream": true}')
    assert streamed.digest != a.digest
    assert (
        RequestKey("tool:w", "GET", "/v1/x", "a=1&b=2", b"").digest
        != RequestKey("llm", "GET", "/v1/x", "a=1&b=2", b"").digest
    )


def test_identical_requests_replay_in_recorded_order(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with counting_tool() as tool:
        with ChaosProxy(tools={"weather": tool.url}, record=cassette) as proxy:
            recorded = [
                requests.get(f"{proxy.url}/tools/weather/x", timeout=5).json()["n"]
                for _ in range(2)
            ]
        tool_url = tool.url
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"weather": tool_url}) as proxy:
        replayed = [
            requests.get(f"{proxy.url}/tools/weather/x", timeout=5).json()["n"] for _ in range(3)
        ]
        proxy.reset()
        again = requests.get(f"{proxy.url}/tools/weather/x", timeout=5).json()["n"]
    assert recorded == [0, 1]
    assert replayed == [0, 1, 1]  # the last recording repeats
    assert again == 0  # reset rewinds


def test_tools_missing_from_the_cassette_stay_live(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    cassette.write_text('{"flakestorm_cassette": 1}\n')
    with (
        LoopbackServer(lambda r: Response.json({"live": True})) as tool,
        ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"weather": tool.url}) as proxy,
    ):
        assert requests.get(f"{proxy.url}/tools/weather/x", timeout=5).json() == {"live": True}


def test_mock_replies_and_injected_faults_are_not_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with ChaosProxy(llm_upstream="mock", record=cassette) as proxy:
        requests.post(
            f"{proxy.url}/llm/openai/v1/chat/completions",
            json={"model": "g", "messages": MESSAGES},
            timeout=5,
        )
    assert len(Cassette.load(cassette)) == 0


def test_binary_bodies_survive(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    blob = bytes(range(256))

    def binary(request: Request) -> Response:
        return Response(200, blob, {"Content-Type": "application/octet-stream"})

    with LoopbackServer(binary) as tool:
        with ChaosProxy(tools={"blob": tool.url}, record=cassette) as proxy:
            assert requests.get(f"{proxy.url}/tools/blob/x", timeout=5).content == blob
        tool_url = tool.url
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"blob": tool_url}) as proxy:
        assert requests.get(f"{proxy.url}/tools/blob/x", timeout=5).content == blob


def test_unreadable_cassettes(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="cannot read"):
        Cassette.load(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"flakestorm_cassette": 1}\n{"key": "x"}\n')
    with pytest.raises(CassetteError, match=r"bad\.jsonl:2: not a cassette exchange"):
        ChaosProxy(llm_upstream=f"cassette:{bad}")
    future = tmp_path / "future.jsonl"
    future.write_text('{"flakestorm_cassette": 99}\n')
    with pytest.raises(CassetteError, match="unsupported version"):
        Cassette.load(future)


def test_tool_request_bodies_that_differ_in_user_do_not_share_a_recording(
    tmp_path: Path,
) -> None:
    alice = RequestKey("tool:crm", "POST", "/lookup", "", b'{"user": "alice"}')
    bob = RequestKey("tool:crm", "POST", "/lookup", "", b'{"user": "bob"}')
    assert alice.digest != bob.digest
    llm_a = RequestKey("llm", "POST", "/v1/chat/completions", "", b'{"n": 1, "user": "a"}')
    llm_b = RequestKey("llm", "POST", "/v1/chat/completions", "", b'{"n": 1, "user": "b"}')
    assert llm_a.digest == llm_b.digest  # for the LLM, still a volatile field

    cassette = tmp_path / "crm.jsonl"
    crm = LoopbackServer(
        lambda r: Response.json({"plan": "gold" if b"alice" in r.body else "free"})
    )
    with crm, ChaosProxy(tools={"crm": crm.url}, record=cassette) as proxy:
        for user in ("alice", "bob"):
            session().post(f"{proxy.url}/tools/crm/lookup", json={"user": user}, timeout=5)
        dead = crm.url
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"crm": dead}) as proxy:
        plans = [
            session().post(f"{proxy.url}/tools/crm/lookup", json={"user": u}, timeout=5).json()
            for u in ("bob", "alice")
        ]
    assert plans == [{"plan": "free"}, {"plan": "gold"}]


# --------------------------------------------------------------------------- model listing

OPENAI_MODELS = {
    "object": "list",
    "data": [{"id": "gpt-test", "object": "model", "created": 1, "owned_by": "flakestorm"}],
}
ANTHROPIC_MODELS = {
    "data": [
        {
            "type": "model",
            "id": "claude-test",
            "display_name": "Claude Test",
            "created_at": "2025-01-01T00:00:00Z",
        }
    ],
    "has_more": False,
    "first_id": "claude-test",
    "last_id": "claude-test",
}


def llm_chaos(mode: str, **fields: Any) -> ActiveScenario:
    """A scenario with one LLM fault."""
    fault = LlmFault.model_validate({"mode": mode, **fields})
    return ActiveScenario("cassette", 5, llm_faults=(fault,))


def provider_with_models(request: Request) -> Response:
    if request.method == "GET" and request.path.startswith("/v1/models"):
        anthropic_call = "anthropic-version" in request.headers
        return Response.json(ANTHROPIC_MODELS if anthropic_call else OPENAI_MODELS)
    return fake_provider(request)


def list_models(proxy: ChaosProxy) -> tuple[list[str], list[str]]:
    import anthropic
    import openai

    oa = openai.OpenAI(base_url=f"{proxy.url}/llm/openai/v1", api_key="sk-test", max_retries=0)
    an = anthropic.Anthropic(base_url=f"{proxy.url}/llm/anthropic", api_key="k", max_retries=0)
    return [m.id for m in oa.models.list()], [m.id for m in an.models.list()]


def test_model_listing_is_recorded_and_replayed_from_a_cassette(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    cassette = tmp_path / "models.jsonl"
    garbage = llm_chaos("garbage")
    with (
        LoopbackServer(provider_with_models) as provider,
        ChaosProxy(llm_upstream=provider.url, record=cassette) as proxy,
    ):
        proxy.activate(garbage)
        recorded = list_models(proxy)
    assert recorded == (["gpt-test"], ["claude-test"])
    lines = [json.loads(line) for line in cassette.read_text().splitlines()[1:]]
    assert [(x["target"], x["request"]["path"]) for x in lines] == [("llm", "/v1/models")] * 2
    assert len(Cassette.load(cassette)) == 2

    with ChaosProxy(llm_upstream=f"cassette:{cassette}") as proxy:
        proxy.activate(garbage)  # no fault applies to a model listing
        assert list_models(proxy) == recorded
        calls = proxy.log.snapshot()
    assert [(c.target, c.status, c.fired) for c in calls] == [(Target.OTHER, 200, ())] * 2
    assert all(c.upstream_status == 200 and c.upstream_error is None for c in calls)


# --------------------------------------------------------------------------- streams a fault cut


def test_a_stream_cut_by_truncation_is_recorded_whole_without_delaying_the_agent(
    tmp_path: Path,
) -> None:
    anthropic = pytest.importorskip("anthropic")
    cassette = tmp_path / "cut.jsonl"
    release = threading.Event()
    body = {"model": "c", "max_tokens": 99, "messages": ASK, "stream": True}

    def held_back(request: Request) -> Response:
        reply = fake_provider(request)
        assert reply.chunks is not None
        chunks = list(reply.chunks)

        def stream() -> Iterator[bytes]:
            yield from chunks[:8]  # enough words for the cut
            release.wait(10)  # the rest only once the agent has its (cut) reply (timeout 5)
            yield from chunks[8:]

        return Response(200, headers=reply.headers, chunks=stream())

    with (
        LoopbackServer(held_back) as provider,
        ChaosProxy(llm_upstream=provider.url, record=cassette) as proxy,
    ):
        proxy.activate(llm_chaos("truncated_response", max_tokens=2))
        # answered whole while the upstream still holds its rest back: not delayed by it
        cut = requests.post(f"{proxy.url}/llm/anthropic/v1/messages", json=body, timeout=5)
        release.set()
    assert cut.status_code == 200 and '"stop_reason": "max_tokens"' in cut.text
    assert "message_stop" in cut.text and "breeze" not in cut.text

    with ChaosProxy(llm_upstream=f"cassette:{cassette}") as proxy:
        client = anthropic.Anthropic(base_url=f"{proxy.url}/llm/anthropic", api_key="k")
        with client.messages.stream(model="c", max_tokens=99, messages=ASK) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
    assert text == TEXT and final.stop_reason == "end_turn"


def test_a_cassette_never_stores_credentials_from_the_query_string(tmp_path: Path) -> None:
    """Cassettes are meant to be committed: an API key in a tool's query string
    (``?apikey=...``, ``?key=...``) must not be written to it, and replay still matches."""
    cassette = tmp_path / "c.jsonl"
    key = "AKIA-query-secret-0123456789"
    with LoopbackServer(lambda r: Response.json({"quote": 42})) as tool:
        with ChaosProxy(tools={"market": tool.url}, record=cassette) as proxy:
            query = f"symbol=ACME&apikey={key}&access_token={key}x"
            recorded = requests.get(f"{proxy.url}/tools/market/quote?{query}", timeout=5)
        dead = tool.url
    assert recorded.json() == {"quote": 42}
    text = cassette.read_text(encoding="utf-8")
    assert key not in text
    assert "symbol=ACME" in text
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"market": dead}) as proxy:
        replayed = requests.get(f"{proxy.url}/tools/market/quote?{query}", timeout=5)
    assert replayed.json() == {"quote": 42}
