"""The control API from both ends: the proxy's routes and the runner's client
(:mod:`flakestorm.chaos.proxy.control`)."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import pytest
import requests
from support.proxy_rig import fault, last, scenario
from support.server import LoopbackServer, Response

from flakestorm.chaos.channels.channel import ProxyChannel
from flakestorm.chaos.delivery import interactions
from flakestorm.chaos.faults.decisions import ActiveScenario
from flakestorm.chaos.proxy.control import ProxyControl, parse_scenario, scenario_document
from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.chaos.proxy.serving import health_check
from flakestorm.config import ContextAttack
from flakestorm.errors import HarnessError, InfrastructureError, ProxyUnreachable


def put(proxy: ChaosProxy, doc: Any, token: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
    return requests.put(f"{proxy.url}/_flakestorm/scenario", data=data, headers=headers, timeout=5)


def test_put_and_delete_scenario(proxy: ChaosProxy) -> None:
    doc = {
        "name": "outage",
        "seed": 3,
        "cell_id": "c",
        "tool_faults": [{"tool": "weather", "mode": "error", "error_code": 500}],
        "context_attacks": {"indirect_injection": {"payloads": ["x"]}},  # dict form
    }
    response = put(proxy, doc)
    assert response.status_code == 200
    assert response.json()["declared"] == [
        "tool_faults[0] error(500) on weather",
        "context_attacks[0] indirect_injection",
    ]
    health = requests.get(f"{proxy.url}/_flakestorm/health", timeout=5).json()
    assert health["status"] == "ok" and health["scenario"] == "outage" and health["version"]
    assert requests.get(f"{proxy.url}/tools/weather/x", timeout=5).status_code == 500
    assert last(proxy).cell_id == "c" and last(proxy).scenario == "outage"

    assert requests.delete(f"{proxy.url}/_flakestorm/scenario", timeout=5).status_code == 200
    assert requests.get(f"{proxy.url}/tools/weather/x", timeout=5).status_code == 200
    assert requests.get(f"{proxy.url}/_flakestorm/health", timeout=5).json()["scenario"] is None

    assert put(proxy, {"name": "calm"}).json()["pass_through"] is True
    assert requests.get(f"{proxy.url}/tools/weather/x", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"name": "s", "tool_faults": [{"tool": "w", "mode": "explode"}]},
            "tool_faults[0].mode: 'explode' is not valid (expected one of: timeout, error",
        ),
        (
            {"name": "s", "tool_faults": [{"tool": "w", "mode": "error", "eror_code": 1}]},
            "tool_faults[0].eror_code: unknown key 'eror_code' (did you mean 'error_code'?",
        ),
        (
            {"name": "s", "llm_faults": [{"mode": "timeout", "probability": 2}]},
            "llm_faults[0].probability: must be at most 1.0, got 2",
        ),
        ({"tool_faults": []}, "missing required field 'name'"),
        ({"name": "s", "seeed": 1}, "seeed: unknown key 'seeed' (did you mean 'seed'?"),
        (["not", "an", "object"], "expected a JSON object, got an array"),
        ("{not json", "not JSON"),
    ],
)
def test_bad_scenario_document_is_a_400_naming_the_field(
    proxy: ChaosProxy, doc: Any, message: str
) -> None:
    response = put(proxy, doc)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_scenario"
    assert message in error["message"]


def test_token_guards_control_routes_only(upstream: LoopbackServer) -> None:
    with ChaosProxy(tools={"weather": upstream.url}, token="s3cret") as proxy:
        health = f"{proxy.url}/_flakestorm/health"
        assert requests.get(health, timeout=5).status_code == 401
        wrong = requests.get(health, headers={"Authorization": "Bearer nope"}, timeout=5)
        assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "unauthorized"
        ok = requests.get(health, headers={"Authorization": "Bearer s3cret"}, timeout=5)
        assert ok.status_code == 200
        assert put(proxy, {"name": "s"}).status_code == 401
        assert put(proxy, {"name": "s"}, token="s3cret").status_code == 200
        assert requests.get(f"{proxy.url}/tools/weather/x", timeout=5).status_code == 200
        assert health_check(proxy.url) == 1
        assert health_check(proxy.url, token="s3cret") == 0


def test_a_refused_control_call_is_logged_and_changes_nothing(
    upstream: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    """What an agent steered to clear its own faults meets: 401, a line in the proxy's log,
    and the scenario still active."""
    with ChaosProxy(tools={"weather": upstream.url}, token="s3cret") as proxy:
        proxy.activate(scenario(fault("error")))
        with caplog.at_level(logging.WARNING, logger="flakestorm.proxy"):
            cleared = requests.delete(f"{proxy.url}/_flakestorm/scenario", timeout=5)
            reset = requests.post(f"{proxy.url}/_flakestorm/reset", timeout=5)
        assert (cleared.status_code, reset.status_code) == (401, 401)
        logged = [r.getMessage() for r in caplog.records]
        assert len(logged) == 2, logged
        assert logged[0].startswith("chaos proxy: refused a control call without this proxy's")
        assert "DELETE '/_flakestorm/scenario' from 127.0.0.1" in logged[0]
        assert "POST '/_flakestorm/reset'" in logged[1]
        assert requests.get(f"{proxy.url}/tools/weather/x", timeout=5).status_code == 503


def test_reset_clears_interactions_and_counters(proxy: ChaosProxy) -> None:
    proxy.activate(scenario(fault("error", after_calls=1)))
    url = f"{proxy.url}/tools/weather/x"
    assert [requests.get(url, timeout=5).status_code for _ in range(2)] == [200, 503]
    assert requests.post(f"{proxy.url}/_flakestorm/reset", timeout=5).status_code == 200
    assert proxy.log.snapshot() == []
    assert requests.get(url, timeout=5).status_code == 200  # counting starts over
    assert proxy.scenario is not None and proxy.scenario.name == "storm"


def test_interactions_filter_by_scenario_and_since(proxy: ChaosProxy) -> None:
    url = f"{proxy.url}/tools/weather/x"
    for name in ("a", "a", "b"):
        proxy.activate(scenario(name=name))
        requests.get(url, timeout=5)
    route = f"{proxy.url}/_flakestorm/interactions"
    everything = requests.get(route, timeout=5).json()
    assert [i["scenario"] for i in everything["interactions"]] == ["a", "a", "b"]
    assert everything["next"] == 3 and everything["dropped"] == 0
    only_a = requests.get(route, params={"scenario": "a"}, timeout=5).json()["interactions"]
    assert [i["seq"] for i in only_a] == [0, 1]
    since = requests.get(route, params={"since": 1}, timeout=5).json()
    assert [i["seq"] for i in since["interactions"]] == [1, 2] and since["next"] == 3
    nothing_new = requests.get(route, params={"since": 3}, timeout=5).json()
    assert nothing_new == {"interactions": [], "next": 3, "dropped": 0, "bodies_dropped": 0}
    bad = requests.get(route, params={"since": "x"}, timeout=5)
    assert bad.status_code == 400


def test_a_read_scenarios_interactions_are_forgotten(proxy: ChaosProxy) -> None:
    url = f"{proxy.url}/tools/weather/x"
    for name, cell in (("a", "stateful-check"), ("a", "c#0.0"), ("b", "c#0.0")):
        proxy.activate(scenario(name=name, cell_id=cell))
        requests.get(url, timeout=5)
    control = ProxyControl(proxy.url)
    assert control.forget("a", keep=["stateful-check"]) == 1
    assert [(i.scenario, i.cell_id) for i in proxy.log.snapshot()] == [
        ("a", "stateful-check"),
        ("b", "c#0.0"),
    ]
    assert control.forget("b") == 1 and control.forget("b") == 0
    route = f"{proxy.url}/_flakestorm/interactions"
    assert requests.delete(route, timeout=5).status_code == 400  # which scenario?
    control.close()
    # a proxy of an older version, without the route, keeps them: not an error
    older = LoopbackServer(lambda r: Response.json({"error": {"message": "GET only"}}, status=405))
    with older:
        assert ProxyControl(older.url).forget("a") == 0


def test_unknown_control_route_and_wrong_method(proxy: ChaosProxy) -> None:
    missing = requests.get(f"{proxy.url}/_flakestorm/nope", timeout=5)
    assert missing.status_code == 404 and "PUT /_flakestorm/scenario" in missing.text
    wrong = requests.post(f"{proxy.url}/_flakestorm/health", timeout=5)
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "GET"


def test_control_client_round_trip(proxy: ChaosProxy) -> None:
    control = ProxyControl(proxy.url)
    assert control.health()["status"] == "ok"
    active = scenario(
        fault("error", error_code=500, after_calls=1),
        attacks=(ContextAttack(type="overflow", inject_tokens=10),),
        cell_id="c1",
    )
    assert control.activate(active) == [
        "tool_faults[0] error(500) on weather",
        "context_attacks[0] overflow",
    ]
    assert proxy.scenario == active
    for _ in range(2):
        requests.get(f"{proxy.url}/tools/weather/x", timeout=5)
    items = control.interactions(scenario="storm")
    assert [i.status for i in items] == [200, 500]
    assert items == proxy.log.snapshot()
    assert control.interactions(since=1) == items[1:]
    control.reset()
    assert control.interactions() == []
    control.activate(None)
    assert proxy.scenario is None
    control.close()


def test_control_client_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    with pytest.raises(
        ProxyUnreachable, match=r"is the proxy running at http://127\.0\.0\.1:\d+\?"
    ):
        ProxyControl(f"http://127.0.0.1:{free}", timeout_s=2).health()
    with ChaosProxy(token="t") as proxy:
        with pytest.raises(InfrastructureError, match="refused the control token"):
            ProxyControl(proxy.url, token="wrong").health()
        assert ProxyControl(proxy.url, token="t").health()["status"] == "ok"
    not_a_proxy = LoopbackServer(lambda r: Response.text("<html>not a proxy</html>"))
    with not_a_proxy, pytest.raises(ProxyUnreachable, match="is the chaos proxy"):
        ProxyControl(not_a_proxy.url).health()
    bad = LoopbackServer(lambda r: Response.json({"error": {"message": "no"}}, status=400))
    with bad, pytest.raises(HarnessError, match="HTTP 400"):
        ProxyControl(bad.url).activate(scenario())


def test_scenario_document_round_trip() -> None:
    active = ActiveScenario(
        name="mixed",
        seed=5,
        tool_faults=(
            fault("malicious_response", payload={"a": [1, 2]}, probability=0.25),
            fault("slow", delay_ms=10, match_url="http://x/*"),
        ),
        llm_faults=(
            parse_scenario({"name": "x", "llm_faults": [{"mode": "rate_limit"}]}).llm_faults
        ),
        context_attacks=(ContextAttack(type="injection_via_context", payload="obey"),),
        cell_id="c",
    )
    doc = scenario_document(active)
    assert json.loads(json.dumps(doc)) == doc
    assert parse_scenario(doc) == active


def test_routes_are_read_and_replaced_over_the_defaults(proxy: ChaosProxy) -> None:
    url = f"{proxy.url}/_flakestorm/routes"
    default = proxy.tools["weather"]
    assert requests.get(url, timeout=5).json() == {
        "tools": {"weather": default},
        "match": {},
        "mcp": {},
        "a2a": {},
        "llm_upstream": None,
    }
    pushed = {
        "tools": {"weather": "http://127.0.0.1:9/w", "news": "http://127.0.0.1:9/n"},
        "match": {"news": "https://news.example/v2"},  # a {match, forward} route
        "mcp": {"quotes": "http://127.0.0.1:9/mcp"},
        "a2a": {"booking": "http://127.0.0.1:9/a2a"},
    }
    reply = requests.put(url, json={**pushed, "llm_upstream": "mock"}, timeout=5).json()
    assert reply == {
        "tools": pushed["tools"],
        "match": pushed["match"],
        "mcp": pushed["mcp"],
        "a2a": pushed["a2a"],
        "llm_upstream": "mock",
        "conflicts": [
            {
                "route": "proxy.tools.weather",
                "default": default,
                "config": "http://127.0.0.1:9/w",
                "origin": "FLAKESTORM_TOOLS or --tool",
            }
        ],
    }
    # the next run's push replaces this one's: the defaults come back
    again = requests.put(url, json={}, timeout=5).json()
    assert (again["tools"], again["a2a"]) == ({"weather": default}, {})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "routes: not JSON"),
        (b"[]", "routes: expected a JSON object, got an array"),
        (b'{"tools": {"a": 1}}', "routes: tools: expected {NAME: URL} strings"),
        (b'{"llm_upstream": 5}', "routes: llm_upstream: expected a string"),
        (b'{"tools": {"a": "http://a"}, "match": {"b": "http://b"}}', "'b' has no route"),
        (b'{"tools": {"a": "http://a"}, "match": {"a": "b"}}', "proxy.tools.a.match: 'b' is"),
        (b'{"llm_upstream": "nope"}', "proxy.llm_upstream: 'nope' is not an http(s) URL"),
        (b'{"a2a": {"booking": 5}}', "routes: a2a: expected {NAME: URL} strings"),
        (b'{"a2a": {"booking": "b"}}', "proxy.a2a.booking: 'b' is not an http(s) URL"),
    ],
)
def test_invalid_routes_are_refused_naming_the_field(
    proxy: ChaosProxy, body: bytes, message: str
) -> None:
    reply = requests.put(f"{proxy.url}/_flakestorm/routes", data=body, timeout=5)
    assert reply.status_code == 400 and message in reply.json()["error"]["message"]
    assert proxy.llm_upstream is None and list(proxy.tools) == ["weather"]


def test_what_the_bounded_log_did_not_keep_is_said_by_the_channel(
    proxy: ChaosProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(interactions, "RUN_BODY_CHARS", 10)  # every call's bodies are more
    monkeypatch.setattr(proxy.log, "_limit", 2)  # and the log holds two calls
    proxy.activate(scenario())
    for _ in range(3):
        requests.get(f"{proxy.url}/tools/weather/x", timeout=5)
    control = ProxyControl(proxy.url)
    channel = ProxyChannel(control)
    assert channel.lost() is None  # nothing read yet: nothing known
    assert [i.response for i in control.interactions()] == [None, None]
    note = channel.lost()
    assert note is not None
    assert "1 call(s) were not logged (the log was full)" in note
    assert "2 call(s) were logged without their request and response bodies" in note
    control.close()
