"""``agent.llm`` on OpenAI and Anthropic SDK methods (SPEC §10): the SDKs' own exceptions on
real HTTP responses, and faults on their streams, stream helpers and raw responses; and an
``injection_via_context`` whose every call such an exception answered is not delivered."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from support.framework_rig import ANTHROPIC, OPENAI, llm_fault, wrapped
from support.injection_matrix import OBEY, injection_under_llm_faults
from support.server import LoopbackServer, Request, Response
from support.tool_provider import ANSWER, tool_provider

from flakestorm.chaos.llm import truncate_text
from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config
from flakestorm.results.model import Status

ASK = [{"role": "user", "content": "Weather in Paris?"}]
CUT = "llm_faults[0] truncated_response(3 tokens)"


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(tool_provider) as s:
        yield s


@pytest.fixture
def openai_client(server: LoopbackServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url_for("/v1"), api_key="k", max_retries=0) as client:
        yield client


@pytest.fixture
def anthropic_client(server: LoopbackServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as client:
        yield client


def test_openai_rate_limit_is_openai_rate_limit_error_on_a_real_429(
    openai_client: openai.OpenAI, server: LoopbackServer
) -> None:
    with wrapped(llm=OPENAI) as rig:
        rig.activate(llm_fault("rate_limit", delay_ms=2500))
        with pytest.raises(openai.RateLimitError) as raised:
            openai_client.chat.completions.create(model="m", messages=ASK)
    error = raised.value
    assert error.status_code == 429 and error.code == "rate_limit_exceeded"
    assert error.response.headers["retry-after"] == "3"
    assert error.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert str(error.request.url) == server.url_for("/v1/chat/completions")
    assert rig.fired() == ["llm_faults[0] rate_limit"]


def test_anthropic_rate_limit_and_timeout_are_anthropic_errors(
    anthropic_client: anthropic.Anthropic,
) -> None:
    with wrapped(llm=ANTHROPIC) as rig:
        rig.activate(llm_fault("rate_limit"))
        with pytest.raises(anthropic.RateLimitError) as raised:
            anthropic_client.messages.create(model="m", max_tokens=9, messages=ASK)
        assert raised.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert raised.value.type == "rate_limit_error"  # read by the SDK from the error JSON
        rig.activate(llm_fault("timeout", delay_ms=5))
        with pytest.raises(anthropic.APITimeoutError):
            anthropic_client.messages.create(model="m", max_tokens=9, messages=ASK)
    assert rig.waits_s == [0.005]


def test_a_stream_helper_is_faulted(
    openai_client: openai.OpenAI, anthropic_client: anthropic.Anthropic
) -> None:
    with wrapped(llm=OPENAI) as rig:
        rig.activate(llm_fault("truncated_response", max_tokens=3))
        # the SDK's helper raises its own error for a reply cut by the length limit
        with (
            pytest.raises(openai.LengthFinishReasonError) as cut,
            openai_client.chat.completions.stream(model="m", messages=ASK) as stream,
        ):
            stream.get_final_completion()
        assert cut.value.completion.choices[0].message.content == truncate_text(ANSWER, 3)
        assert cut.value.completion.choices[0].finish_reason == "length"
        assert rig.fired() == [CUT]
    with wrapped(llm="anthropic.resources.messages:Messages.stream") as rig:
        rig.activate(llm_fault("truncated_response", max_tokens=3))
        with anthropic_client.messages.stream(model="m", max_tokens=9, messages=ASK) as events:
            message = events.get_final_message()
        assert message.content[0].text == truncate_text(ANSWER, 3)
        assert message.stop_reason == "max_tokens"
        assert rig.fired() == [CUT]


def test_a_raw_response_is_faulted_through_parse(openai_client: openai.OpenAI) -> None:
    with wrapped(llm=OPENAI) as rig:
        rig.activate(llm_fault("empty"))
        raw = openai_client.chat.completions.with_raw_response.create(model="m", messages=ASK)
        assert raw.http_response.status_code == 200
        assert raw.parse().choices[0].message.content == ""
        assert rig.fired() == ["llm_faults[0] empty"]


def test_with_no_fault_replies_and_streams_are_untouched(openai_client: openai.OpenAI) -> None:
    def both() -> tuple[Any, str]:
        whole = openai_client.chat.completions.create(model="m", messages=ASK)
        chunks = openai_client.chat.completions.create(model="m", messages=ASK, stream=True)
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return whole.model_dump(), streamed

    unwrapped = both()
    with wrapped(llm=OPENAI) as rig:
        rig.activate(llm_fault("rate_limit", after_calls=5))
        assert both() == unwrapped
        assert [i.fired for i in rig.interactions()] == [(), ()]


def _not_sse(request: Request) -> Response:
    return Response(200, headers={"Content-Type": "text/event-stream"}, chunks=[b"data: hi\n\n"])


def test_a_stream_of_no_provider_protocol_is_not_applied_with_the_reason() -> None:
    with LoopbackServer(_not_sse) as odd, wrapped(llm=OPENAI) as rig:
        client = openai.OpenAI(base_url=odd.url_for("/v1"), api_key="k", max_retries=0)
        rig.activate(llm_fault("garbage"))
        stream = client.chat.completions.create(model="m", messages=ASK, stream=True)
        with pytest.raises(ValueError):  # the SDK cannot parse "hi" either
            list(stream)
        client.close()
        [call] = rig.interactions()
    assert call.fired == () and call.unapplied == (
        (
            "llm_faults[0] garbage",
            "the stream was not an OpenAI or Anthropic server-sent event stream",
        ),
    )


# --------------------------------------------------------------------------- through a run

CONTEXT = "context_attacks[0] injection_via_context"
LIMITED = "llm_faults[0] rate_limit"
AGENT = """
import openai



def answer(prompt):
    messages = [
        {{"role": "system", "content": "You are a weather bot."}},
        {{"role": "user", "content": prompt}},
    ]
    with openai.OpenAI(base_url={url!r}, api_key="k", max_retries=0) as client:
        try:
            reply = client.chat.completions.create(model="m", messages=messages)
        except openai.RateLimitError as exc:
            return f"the model is busy ({{exc.status_code}})"
    return reply.choices[0].message.content
"""


def test_an_injection_whose_every_llm_call_a_rate_limit_answered_errors_its_scenario(
    tmp_path: Path, server: LoopbackServer
) -> None:
    module = f"sdk_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(AGENT.format(url=server.url_for("/v1")))
    doc = injection_under_llm_faults(tmp_path / "reports")
    doc["agent"] = {"type": "python", "endpoint": f"{module}:answer", "llm": OPENAI}
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    before = len(server.requests)
    result = run_phases(load_config(path), ["contract"])
    outcome = result.phases["contract"]
    cells = {c.scenario: c for c in outcome.cells}
    info = {s.name: s for s in outcome.scenarios}
    limited = cells["limited"]
    assert limited.status is Status.ERRORED
    assert limited.reason == (
        f"fault not delivered: {CONTEXT}: it matched 2 LLM calls but {LIMITED} answered each "
        "one instead of the LLM: no request carrying it reached the LLM"
    )
    assert limited.checked is Status.PASSED  # "the model is busy (429)" is not empty
    assert limited.faults_fired == (LIMITED,)
    assert info["limited"].replaced == {CONTEXT: {LIMITED: 2}}
    # truncation cuts the real reply: the injected request reached the LLM, delivered
    assert info["cut"].undelivered == () and cells["cut"].status is Status.PASSED
    assert set(cells["cut"].faults_fired) == {CONTEXT, "llm_faults[0] truncated_response(3 tokens)"}
    injected = [r for r in server.requests[before:] if OBEY in r.text]
    assert len(injected) == 2  # "cut"'s two calls; "limited"'s never reached the LLM
    assert result.exit_code == 3


RESPONSES_AGENT = """
import openai


def answer(prompt):
    with openai.OpenAI(base_url={url!r}, api_key="k", max_retries=0) as client:
        return client.responses.create(model="m", input=prompt).output_text
"""


def test_an_llm_fault_on_the_wrong_sdk_method_names_the_one_the_agent_called(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """A framework that calls ``responses.create`` (Pydantic AI's ``openai:`` models) while
    ``agent.llm`` names ``chat.completions.create``: not delivered, and the hint names the
    method the agent did call instead of blaming the wiring."""
    module = f"sdk_agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(RESPONSES_AGENT.format(url=server.url_for("/v1")))
    doc = {
        "agent": {"type": "python", "endpoint": f"{module}:answer", "llm": OPENAI},
        "golden_prompts": ["Weather in Paris?"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "answers", "type": "contains", "value": "a"}],
            "chaos_matrix": [{"name": "limited", "llm_faults": [{"mode": "rate_limit"}]}],
        },
        "output": {"dir": str(tmp_path / "reports")},
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    result = run_phases(load_config(path), ["contract"])
    (info,) = result.phases["contract"].scenarios
    assert info.undelivered == (LIMITED,)
    # one count, the scenario's: its one prompt's call (not the stateful check's two before it)
    assert info.why(LIMITED) == (
        "flakestorm saw no call in this scenario — the agent made no call to the wrapped "
        "agent.llm method, but made 1 call to `openai.resources.responses:Responses.create` of "
        "the same SDK in this scenario (counted, never faulted): its framework uses that method "
        "— name it in agent.llm"
    )
    # the watch is gone with the run: the SDK's method is its own again
    assert openai.resources.responses.Responses.create.__qualname__ == "Responses.create"
    assert result.exit_code == 3
