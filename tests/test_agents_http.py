"""HttpAgent against real loopback servers: every error kind and the success paths."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.server import LoopbackServer, Request, Response

from flakestorm.agents import Call
from flakestorm.agents.attribution import trace_id
from flakestorm.agents.extraction import AUTO_KEYS
from flakestorm.agents.factory import build_agent
from flakestorm.agents.http import HttpAgent, render_template
from flakestorm.config import AgentConfig
from flakestorm.errors import AgentErrorKind

MiB = 1024 * 1024


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as s:
        yield s


def agent_for(server: LoopbackServer, **fields: Any) -> HttpAgent:
    return HttpAgent(AgentConfig(endpoint=server.url_for("/invoke"), **fields))


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port that is bound but not listening: connecting is refused, and nobody can take it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


# --------------------------------------------------------------------------- errors


def test_agent_down_is_a_connection_error(refused_port: int) -> None:
    agent = HttpAgent(AgentConfig(endpoint=f"http://127.0.0.1:{refused_port}/invoke"))
    reply = agent.invoke("hi")
    assert reply.error is AgentErrorKind.CONNECTION
    assert reply.output is None and reply.status is None
    assert "connection refused" in reply.error_message
    assert f"127.0.0.1:{refused_port}" in reply.error_message


def test_a_server_that_never_answers_times_out_within_agent_timeout(
    server: LoopbackServer,
) -> None:
    server.handler = server.hang
    reply = agent_for(server, timeout=200).invoke("hi")
    assert reply.error is AgentErrorKind.TIMEOUT
    assert "200 ms" in reply.error_message
    assert 150 <= reply.latency_ms < 1000


def test_a_server_that_stalls_mid_body_times_out_too(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(200, b'{"output": "never finished"}', stall_after=5)
    reply = agent_for(server, timeout=200).invoke("hi")
    assert reply.error is AgentErrorKind.TIMEOUT
    assert reply.status == 200
    assert 150 <= reply.latency_ms < 1000


def test_a_dropped_connection_is_a_connection_error(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(drop=True)
    reply = agent_for(server).invoke("hi")
    assert reply.error is AgentErrorKind.CONNECTION
    assert "closed the connection" in reply.error_message


def test_500_is_a_status_error_with_the_body_kept(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"error": "kaboom"}, status=500)
    reply = agent_for(server).invoke("hi")
    assert reply.error is AgentErrorKind.STATUS
    assert reply.status == 500
    assert "HTTP 500" in reply.error_message
    assert "kaboom" in reply.raw


def test_a_non_2xx_reply_stays_a_status_error_whatever_its_body(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(503, b"x" * 100_000)
    reply = agent_for(server, max_response_bytes=1000).invoke("hi")
    assert (reply.error, reply.status) == (AgentErrorKind.STATUS, 503)


def test_an_html_error_page_is_a_status_error(server: LoopbackServer) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    server.handler = lambda r: Response.text(page, 502, "text/html")
    reply = agent_for(server).invoke("hi")
    assert (reply.error, reply.status) == (AgentErrorKind.STATUS, 502)
    assert reply.raw == page


def test_an_html_page_where_json_is_expected_is_unparseable(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.text("<html>login</html>", 200, "text/html")
    reply = agent_for(server, response_path="output").invoke("hi")
    assert reply.error is AgentErrorKind.UNPARSEABLE
    assert "not valid JSON" in reply.error_message and "response_path" in reply.error_message


def test_invalid_json_with_a_json_content_type_is_unparseable(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(
        200, b'{"output": "cut', {"Content-Type": "application/json"}
    )
    reply = agent_for(server).invoke("hi")
    assert reply.error is AgentErrorKind.UNPARSEABLE
    assert reply.raw == '{"output": "cut'


def test_a_missing_response_path_names_the_path_and_the_keys(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"data": {"result": "x", "meta": 1}})
    reply = agent_for(server, response_path="data.answer").invoke("hi")
    assert reply.error is AgentErrorKind.RESPONSE_PATH
    assert '"data.answer"' in reply.error_message
    assert 'no key "answer" at data' in reply.error_message
    assert '"result", "meta"' in reply.error_message


def test_a_response_path_index_out_of_range(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"choices": []})
    reply = agent_for(server, response_path="choices.0.text").invoke("hi")
    assert reply.error is AgentErrorKind.RESPONSE_PATH
    assert "index 0 is out of range at choices (a list of 0)" in reply.error_message


def test_a_response_path_through_a_string(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"data": "flat"})
    reply = agent_for(server, response_path="data.answer").invoke("hi")
    assert reply.error is AgentErrorKind.RESPONSE_PATH
    assert "data is str, not an object" in reply.error_message


def test_a_5_mib_streamed_body_is_too_large_and_not_read_into_memory(
    server: LoopbackServer,
) -> None:
    chunk = b"x" * 65_536
    server.handler = lambda r: Response(200, chunks=(chunk for _ in range(80)))  # 5 MiB
    agent = agent_for(server, max_response_bytes=256 * 1024)
    tracemalloc.start()
    try:
        reply = agent.invoke("hi")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reply.error is AgentErrorKind.TOO_LARGE
    assert "max_response_bytes" in reply.error_message
    assert peak < 2 * MiB
    assert len(reply.raw) <= 65_536


def test_a_declared_content_length_over_the_cap_stops_before_reading(
    server: LoopbackServer,
) -> None:
    body = b"x" * (5 * MiB)
    server.handler = lambda r: Response(200, body)
    reply = agent_for(server, max_response_bytes=MiB).invoke("hi")
    assert reply.error is AgentErrorKind.TOO_LARGE
    assert f"declares {5 * MiB} bytes" in reply.error_message
    assert reply.raw == ""


def test_a_json_reply_that_is_not_utf8_is_unparseable(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(
        200, b'{"output": "caf\xe9"}', {"Content-Type": "application/json"}
    )
    reply = agent_for(server).invoke("hi")
    assert reply.error is AgentErrorKind.UNPARSEABLE
    assert "not valid UTF-8" in reply.error_message
    assert "caf\ufffd" in reply.raw


def test_text_that_is_not_utf8_is_unparseable_without_a_charset(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(200, b"caf\xe9", {"Content-Type": "text/plain"})
    assert agent_for(server).invoke("hi").error is AgentErrorKind.UNPARSEABLE


def test_text_in_a_declared_charset_is_decoded(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(
        200, b"caf\xe9", {"Content-Type": "text/plain; charset=latin-1"}
    )
    assert agent_for(server).invoke("hi").output == "café"


def test_secret_header_values_never_appear_in_error_messages(refused_port: int) -> None:
    secret = "sk-very-secret-123"
    agent = HttpAgent(
        AgentConfig(
            endpoint=f"http://127.0.0.1:{refused_port}/invoke?key={secret}",
            headers={"Authorization": f"Bearer {secret}", "X-Key": secret},
        )
    )
    reply = agent.invoke("hi")
    assert reply.error is AgentErrorKind.CONNECTION
    assert secret not in reply.error_message
    assert "***" in reply.error_message


# --------------------------------------------------------------------------- success


@pytest.mark.parametrize("key", AUTO_KEYS)
def test_auto_extraction_finds_each_key(server: LoopbackServer, key: str) -> None:
    server.handler = lambda r: Response.json({"other": 1, key: f"from {key}"})
    reply = agent_for(server).invoke("hi")
    assert reply.ok, reply.error_message
    assert reply.output == f"from {key}"
    assert reply.status == 200
    assert reply.latency_ms > 0


def test_auto_extraction_prefers_the_earlier_key(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"message": "late", "output": "first"})
    assert agent_for(server).invoke("hi").output == "first"


def test_json_nested_too_deeply_is_unparseable_not_a_crash(server: LoopbackServer) -> None:
    """A hostile agent's reply nested deeper than the parser recurses (json.loads raises
    RecursionError, not ValueError) used to stop the whole run with an internal error."""
    deep = b"[" * 100_000 + b"]" * 100_000
    server.handler = lambda r: Response(200, deep, {"Content-Type": "application/json"})
    reply = agent_for(server).invoke("hi")
    assert reply.error is AgentErrorKind.UNPARSEABLE
    assert "nested too deeply" in reply.error_message
    # without a JSON content type the reply is text: the answer
    server.handler = lambda r: Response(200, deep, {"Content-Type": "text/plain"})
    assert agent_for(server).invoke("hi").output == deep.decode()


def test_auto_extraction_falls_back_to_the_whole_body(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"weird": "shape"})
    assert json.loads(agent_for(server).invoke("hi").output or "") == {"weird": "shape"}


def test_a_plain_text_reply_is_the_answer(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.text("just text")
    assert agent_for(server).invoke("hi").output == "just text"


def test_a_json_string_reply_is_the_answer(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json("quoted answer")
    assert agent_for(server).invoke("hi").output == "quoted answer"


def test_a_non_string_value_found_is_json(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"result": {"total": 3, "items": ["é"]}})
    assert agent_for(server).invoke("hi").output == '{"total": 3, "items": ["é"]}'


def test_a_dotted_path_into_lists(server: LoopbackServer) -> None:
    server.handler = lambda r: Response.json({"choices": [{"text": "a"}, {"text": "b"}]})
    assert agent_for(server, response_path="choices.1.text").invoke("hi").output == "b"


def test_the_default_template_sends_the_prompt_as_input(server: LoopbackServer) -> None:
    agent_for(server).invoke("hello")
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/invoke")
    assert request.json() == {"input": "hello"}
    assert request.headers["Content-Type"] == "application/json"


def test_a_nested_template_is_filled_everywhere(server: LoopbackServer) -> None:
    template = {
        "model": "m",
        "messages": [{"role": "user", "content": "{prompt}"}, {"role": "x", "n": 3}],
        "meta": {"note": "asked: {prompt}!", "flag": True, "none": None},
    }
    agent_for(server, request_template=template, method="PUT").invoke('say "hi"')
    request = server.requests[0]
    assert request.method == "PUT"
    assert request.json() == {
        "model": "m",
        "messages": [{"role": "user", "content": 'say "hi"'}, {"role": "x", "n": 3}],
        "meta": {"note": 'asked: say "hi"!', "flag": True, "none": None},
    }


NASTY_PROMPTS = [
    "quotes \" and ' and `",
    "back\\slash \\n not a newline \\u0041 \\",
    "new\nline\r\ttab",
    "unicode: héllo — 日本語 🤖 \u200b",
    "{prompt} and \"{prompt}\" and {{prompt}} and {'prompt'}",
    '{"json": "inside", "n": [1, 2]}',
    "</script><!-- ${VAR} %s %d",
    "nul \x00 bell \x07",
    "lone surrogate \ud800",
    "",
]


@pytest.mark.parametrize(
    "template",
    [
        {"input": "{prompt}"},
        {"q": ["prefix: {prompt}"]},
        '{"input": "{prompt}"}',
        '{"input": "prefix: {prompt} :suffix"}',
    ],
    ids=["dict", "dict-embedded", "string", "string-embedded"],
)
def test_nasty_prompts_round_trip_through_a_real_server(
    server: LoopbackServer, template: Any
) -> None:
    def echo(request: Request) -> Response:
        body = request.json()
        value = body["input"] if "input" in body else body["q"][0]
        return Response.json({"output": value})

    server.handler = echo
    agent = agent_for(server, request_template=template)
    embedded = "prefix" in json.dumps(template)
    for prompt in NASTY_PROMPTS:
        reply = agent.invoke(prompt)
        assert reply.ok, reply.error_message
        expected = prompt
        if embedded:
            expected = (
                f"prefix: {prompt} :suffix" if isinstance(template, str) else (f"prefix: {prompt}")
            )
        assert reply.output == expected


def test_render_template_string_forms() -> None:
    assert render_template('{"a": "{prompt}", "n": 1}', 'x"y') == b'{"a": "x\\"y", "n": 1}'
    assert render_template('{"a": "<{prompt}>"}', "é\n") == b'{"a": "<\\u00e9\\n>"}'
    assert render_template(["{prompt}", 2], "p") == b'["p", 2]'


def test_config_headers_are_sent(server: LoopbackServer) -> None:
    agent_for(
        server, headers={"Authorization": "Bearer t0ken", "Content-Type": "text/json"}
    ).invoke("hi")
    headers = server.requests[0].headers
    assert headers["Authorization"] == "Bearer t0ken"
    assert headers["Content-Type"] == "text/json"
    assert headers["User-Agent"].startswith("flakestorm/")


def test_cell_headers_and_call_headers_are_sent(server: LoopbackServer) -> None:
    agent = agent_for(server)
    call = Call(
        cell_id="inv@out age#0.1",
        scenario="outage",
        headers=(("baggage", "a=b, flakestorm-cell=spoofed;p=1"),),
        seed=7,
    )
    agent.invoke("hi", call)
    agent.invoke("hi")
    with_call, without = server.requests
    assert with_call.headers["X-Flakestorm-Cell"] == "inv@out age#0.1"
    assert with_call.headers["X-Flakestorm-Scenario"] == "outage"
    # the config's baggage kept, flakestorm's entry (percent-encoded) in place of any other
    assert with_call.headers["baggage"] == "a=b,flakestorm-cell=inv@out%20age#0.1"
    version, trace, span, flags = with_call.headers["traceparent"].split("-")
    assert (version, flags) == ("00", "01") and len(span) == 16
    assert trace == trace_id(7, "inv@out age#0.1") != trace_id(8, "inv@out age#0.1")
    for name in ("X-Flakestorm-Cell", "X-Flakestorm-Scenario", "baggage", "traceparent"):
        assert name not in without.headers


def test_cookies_set_by_the_agent_are_not_sent_back(server: LoopbackServer) -> None:
    server.handler = lambda r: Response(
        200, b'{"output": "x"}', {"Content-Type": "application/json", "Set-Cookie": "sid=1"}
    )
    agent = agent_for(server)
    agent.invoke("one")
    agent.invoke("two")
    assert "Cookie" not in server.requests[1].headers


def test_concurrent_invocations_reuse_pooled_connections(server: LoopbackServer) -> None:
    release = threading.Barrier(8)

    def handler(request: Request) -> Response:
        return Response.json({"output": request.json()["input"]})

    server.handler = handler
    agent = agent_for(server)

    def one(i: int) -> str | None:
        if i < 8:
            release.wait()
        return agent.invoke(str(i)).output

    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(one, range(96)))
    assert outputs == [str(i) for i in range(96)]
    assert len({r.client for r in server.requests}) <= 8


def test_keep_alive_adds_no_latency(server: LoopbackServer) -> None:
    agent = agent_for(server)
    latencies = [agent.invoke("hi").latency_ms for _ in range(40)]
    assert statistics.median(latencies[1:]) < 15  # a Nagle/delayed-ACK stall would be ~40 ms


def test_build_agent_makes_an_http_agent_and_close_works(server: LoopbackServer) -> None:
    from pathlib import Path

    agent = build_agent(AgentConfig(endpoint=server.url_for("/invoke")), Path("."))
    assert isinstance(agent, HttpAgent)
    assert agent.invoke("hi").output == "ok"
    agent.close()


def test_render_template_fills_context_beside_the_prompt() -> None:
    template = {"input": "{prompt}", "context": "{context}", "note": "ctx: {context}"}
    body = json.loads(render_template(template, "q {context}", "the {prompt} ctx"))
    assert body == {
        "input": "q {context}",
        "context": "the {prompt} ctx",
        "note": "ctx: the {prompt} ctx",
    }
    assert render_template('{"c": "{context}", "p": "{prompt}"}', "p", 'x"') == (
        b'{"c": "x\\"", "p": "p"}'
    )
    assert render_template({"input": "{prompt}"}, "p", "ignored") == b'{"input": "p"}'
