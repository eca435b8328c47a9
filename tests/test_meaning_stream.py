"""The meaning of ``agent.stream`` and of the invariants on a stream (SPEC §16): ``path`` and
``done`` only where the format needs them, required there, and a stream invariant on a reply
that is not streamed refused at validate, located, with what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.config_text import problems

from flakestorm.errors import ConfigError
from flakestorm.loader import load_config_text
from flakestorm.meaning.sweeps import expanded_matrix

HEAD = "agent:\n  endpoint: http://localhost:8000/chat\n"
CONTRACT = """\
golden_prompts: [hi]
contract:
  name: c
  invariants:
    - {id: first, type: ttft, max_ms: 500}
    - {id: ends, type: stream_completes}
  chaos_matrix: [{name: calm}]
"""


def test_a_streaming_openai_agent_with_stream_invariants_is_valid() -> None:
    loaded = load_config_text(HEAD + "  stream: {format: openai}\n" + CONTRACT, "f.yaml")
    stream = loaded.config.agent.stream
    assert stream is not None and stream.format.value == "openai"


def test_stream_invariants_without_agent_stream_are_refused_where_they_are() -> None:
    assert problems(HEAD + CONTRACT) == [
        "flakestorm.yaml:7:25: contract.invariants[0].type: ttft times the agent's streamed "
        "reply, but agent.stream is not set: set agent.stream.format (openai, anthropic, sse, "
        "ndjson or text) for an http agent that streams its reply",
        "flakestorm.yaml:8:24: contract.invariants[1].type: stream_completes times the agent's "
        "streamed reply, but agent.stream is not set: set agent.stream.format (openai, "
        "anthropic, sse, ndjson or text) for an http agent that streams its reply",
    ]


def test_path_and_done_apply_to_sse_and_ndjson_only() -> None:
    text = HEAD + "  stream: {format: anthropic, path: delta.text, done: end}\n"
    assert problems(text) == [
        "flakestorm.yaml:3:31: agent.stream.path: 'path' applies to format sse and ndjson only "
        "(format anthropic knows where its text is and what ends it)",
        "flakestorm.yaml:3:49: agent.stream.done: 'done' applies to format sse and ndjson only "
        "(format anthropic knows where its text is and what ends it)",
    ]


def test_ndjson_needs_a_path_and_a_done() -> None:
    assert problems(HEAD + "  stream: {format: ndjson}\n") == [
        "flakestorm.yaml:3:11: agent.stream: format ndjson needs 'done': the terminal event (an "
        "SSE event name, a data line such as [DONE], or PATH=VALUE on the event's JSON, e.g. "
        "type=done)",
        "flakestorm.yaml:3:11: agent.stream: format ndjson needs 'path': the dotted path to "
        "the text in each line",
    ]


def test_a_bad_path_and_done_are_located() -> None:
    text = HEAD + "  stream: {format: sse, path: 'a..b', done: ' x y=1'}\n"
    assert problems(text) == [
        "flakestorm.yaml:3:31: agent.stream.path: 'a..b' is not a dotted path (e.g. "
        "choices.0.delta.content, token)",
        "flakestorm.yaml:3:45: agent.stream.done: ' x y=1': before '=' must be a dotted path "
        "into the event's JSON (e.g. type=done, done=true)",
    ]


def test_a_python_agent_does_not_stream_and_response_path_does_not_apply() -> None:
    python = "agent:\n  type: python\n  endpoint: m:f\n  stream: {format: text}\n"
    assert problems(python) == [
        "flakestorm.yaml:4:3: agent.stream: 'stream' applies to http agents only (this agent "
        "is type: python)"
    ]
    text = HEAD + "  response_path: output\n  stream: {format: openai}\n"
    assert problems(text) == [
        "flakestorm.yaml:3:3: agent.response_path: does not apply to a streamed reply "
        "(agent.stream): its text is assembled from the events (for format sse or ndjson, "
        "agent.stream.path says where it is in each)"
    ]


def test_a_stream_invariant_on_a_python_agent_needs_an_endpoint_that_yields(
    tmp_path: Path,
) -> None:
    (tmp_path / "m.py").write_text(
        "def whole(prompt):\n    return 'Paris'\n\n\n"
        "async def streamed(prompt):\n    yield 'Par'\n    yield 'is'\n\n\n"
        "def wraps(prompt):\n    def inner():\n        yield 'x'\n    return ''.join(inner())\n"
    )

    def load(endpoint: str) -> None:
        text = f"agent:\n  type: python\n  endpoint: m:{endpoint}\n" + CONTRACT
        load_config_text(text, "flakestorm.yaml", env={}, base_dir=tmp_path)

    load("streamed")
    for whole in ("whole", "wraps"):  # a yield in a nested function is not its own
        with pytest.raises(ConfigError) as refused:
            load(whole)
        assert str(refused.value.problems[0]) == (
            "flakestorm.yaml:8:25: contract.invariants[0].type: ttft times the agent's "
            f'streamed reply, but its callable ("m:{whole}") returns its reply whole: make it '
            "a generator (sync or async) that yields the reply's text as it comes"
        )
    load("elsewhere")  # no source says: the run reads the imported callable


FAULTS = """\
golden_prompts: [hi]
contract:
  name: c
  invariants: [{id: ends, type: stream_completes}]
  chaos_matrix:
    - name: s
      llm_faults:
"""


def test_slow_stream_needs_a_wait_and_takes_no_delay_ms() -> None:
    text = HEAD + "  stream: {format: openai}\n" + FAULTS
    assert problems(text + "        - {mode: slow_stream, delay_ms: 50}\n") == [
        "flakestorm.yaml:11:11: contract.chaos_matrix[0].llm_faults[0]: a 'slow_stream' LLM "
        "fault needs 'first_token_ms' or 'chunk_delay_ms'",
        "flakestorm.yaml:11:31: contract.chaos_matrix[0].llm_faults[0].delay_ms: 'delay_ms' "
        "means nothing for a 'slow_stream' LLM fault (its fields: first_token_ms, "
        "chunk_delay_ms)",
    ]
    load_config_text(text + "        - {mode: slow_stream, chunk_delay_ms: 50}\n", "f.yaml")


def test_a_timeout_takes_after_chunks_and_a_sweep_may_vary_first_token_ms() -> None:
    text = HEAD + "  stream: {format: openai}\n" + FAULTS
    fault = "        - {mode: timeout, after_chunks: 3, delay_ms: 5000}\n"
    load_config_text(text + fault, "f.yaml")
    swept = text + "        - {mode: slow_stream, first_token_ms: 100}\n"
    swept += "      sweep: {field: 'llm_faults[0].first_token_ms', values: [100, 1000, 5000]}\n"
    contract = load_config_text(swept, "f.yaml").config.contract
    assert contract is not None
    scenarios = expanded_matrix(contract)
    assert [s.name for s in scenarios] == ["s[100]", "s[1000]", "s[5000]"]
    assert [s.llm_faults[0].first_token_ms for s in scenarios] == [100, 1000, 5000]
