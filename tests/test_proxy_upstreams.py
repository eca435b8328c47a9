"""The upstream seam (:mod:`flakestorm.chaos.proxy.upstreams`): ``llm_upstream`` chooses the
upstream once, and a new local upstream is a class plus one registration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from support.proxy_rig import last
from support.server import LoopbackServer

from flakestorm.chaos.faults.decisions import Target
from flakestorm.chaos.proxy.relays import RelayUpstream
from flakestorm.chaos.proxy.reply import HttpResponse
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.upstreams import registry
from flakestorm.chaos.proxy.upstreams.base import Upstream, UpstreamRequest
from flakestorm.chaos.proxy.upstreams.cassette import CassetteError, CassetteReplay
from flakestorm.chaos.proxy.upstreams.mock_llm import MockLlm
from flakestorm.chaos.proxy.upstreams.network import NetworkUpstream
from flakestorm.errors import UsageError


class Echo:
    """A local upstream that answers LLM calls with their path and counts its rewinds."""

    rewinds = 0

    def __init__(self, prefix: str, network: Upstream) -> None:
        self.prefix = prefix
        self.network = network

    @classmethod
    def load(cls, argument: str) -> Callable[[Upstream], Echo]:
        return lambda network: cls(argument, network)

    def send(self, request: UpstreamRequest) -> HttpResponse:
        call = request.call
        if not call.local:
            return self.network.send(request)
        call.upstream_status = 200
        body = f"{self.prefix}{call.rel_path}".encode()
        return HttpResponse(200, [("Content-Type", "text/plain")], body)

    def rewind(self) -> None:
        Echo.rewinds += 1


def network(proxy: ChaosProxy) -> bool:
    """Whether the proxy sends calls to the network (its stdio relays' calls to the relays)."""
    upstream = proxy.upstream.inner  # type: ignore[attr-defined]
    return isinstance(upstream, RelayUpstream) and isinstance(upstream.inner, NetworkUpstream)


def test_llm_upstream_chooses_the_upstream_once(tmp_path: Path) -> None:
    with ChaosProxy() as proxy:
        assert proxy.llm_source is None and network(proxy)
    with ChaosProxy(llm_upstream="https://llm.example") as proxy:
        assert proxy.llm_source is None and network(proxy)
    with ChaosProxy(llm_upstream="mock") as proxy:
        assert proxy.llm_source == "mock" and isinstance(proxy.upstream.inner, MockLlm)
    cassette = tmp_path / "c.jsonl"
    cassette.write_text('{"flakestorm_cassette": 1}\n')
    with ChaosProxy(llm_upstream=f"cassette:{cassette}") as proxy:
        assert proxy.llm_source == "cassette" and isinstance(proxy.upstream.inner, CassetteReplay)
    for setting in ("api.openai.com", "mock:x", "cassette"):
        with pytest.raises(UsageError, match=r"proxy\.llm_upstream"):
            ChaosProxy(llm_upstream=setting)


def test_a_bad_cassette_fails_before_the_recording_is_started(tmp_path: Path) -> None:
    record = tmp_path / "out.jsonl"
    with pytest.raises(CassetteError, match="cannot read"):
        ChaosProxy(llm_upstream=f"cassette:{tmp_path / 'missing.jsonl'}", record=record)
    assert not record.exists()


def test_a_registered_local_upstream_serves_the_llm_calls(
    upstream: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.LOCAL_UPSTREAMS, "echo:", Echo.load)
    with ChaosProxy(llm_upstream="echo:>", tools={"weather": upstream.url}) as proxy:
        reply = requests.post(f"{proxy.url}/llm/openai/v1/chat/completions", timeout=5)
        assert reply.text == ">/v1/chat/completions"
        item = last(proxy)
        assert item.target is Target.LLM and item.url == "echo:/v1/chat/completions"
        forwarded = requests.post(
            "http://llm.example/v1/messages", proxies={"http": proxy.url}, timeout=5
        )
        assert forwarded.text == ">/v1/messages"
        assert last(proxy).url == "echo:/v1/messages"
        tool = requests.get(f"{proxy.url}/tools/weather/today", timeout=5)
        assert tool.json()["path"] == "/today"  # not an LLM call: the network
        rewinds = Echo.rewinds
        assert requests.post(f"{proxy.url}/_flakestorm/reset", timeout=5).status_code == 200
        assert Echo.rewinds == rewinds + 1
