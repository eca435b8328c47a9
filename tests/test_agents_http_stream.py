"""An http agent whose reply streams (``agent.stream``), against a real streaming server on
loopback: the assembled text, the figures measured as the events arrive, and which endings
are answers (a close or a cut without the terminal event) and which error the invocation (no
connection, a non-2xx status, the agent's timeout, the size cap)."""

from __future__ import annotations

import socket
from typing import Any

from support.server import LoopbackServer, Response
from support.stream_agent import Pace, StreamAgent

from flakestorm.agents import Call, Reply
from flakestorm.agents.http import HttpAgent
from flakestorm.agents.request import RequestShape
from flakestorm.config import AgentConfig
from flakestorm.errors import AgentErrorKind
from flakestorm.results.stream_timing import Ending

ANSWER = "The capital of France is Paris."


def invoke(pace: Pace, timeout: int = 10_000, **stream: Any) -> Reply:
    spec = stream or {"format": pace.shape}
    with StreamAgent({"": pace}) as server:
        agent = HttpAgent(AgentConfig(endpoint=server.url, timeout=timeout, stream=spec))
        try:
            return agent.invoke("What is the capital of France?")
        finally:
            agent.close()


def test_a_steady_openai_stream_is_assembled_and_ends_with_done() -> None:
    reply = invoke(Pace())
    assert reply.ok and reply.output == ANSWER and reply.status == 200
    stream = reply.stream
    assert stream is not None and stream.ending is Ending.DONE and stream.completed
    assert stream.content_events == 5
    assert stream.first_byte_ms is not None and stream.first_content_ms is not None
    assert stream.first_byte_ms <= stream.first_content_ms


def test_the_first_content_is_timed_after_the_role_only_first_chunk() -> None:
    stream = invoke(Pace(first_ms=600)).stream
    assert stream is not None and stream.first_byte_ms is not None
    assert stream.first_content_ms is not None and stream.first_content_ms >= 600
    assert stream.first_content_ms - stream.first_byte_ms >= 590  # the role chunk came at once


def test_a_stall_after_three_chunks_is_the_longest_gap_after_chunk_3() -> None:
    stream = invoke(Pace(stall_after=3, stall_ms=600)).stream
    assert stream is not None and stream.longest_gap_ms >= 600 and stream.gap_after == 3
    assert stream.completed


def test_a_stream_closed_without_done_is_an_answer_with_what_arrived() -> None:
    reply = invoke(Pace(stop_after=3, end="close"))
    assert reply.ok and reply.output == "The capital of France "
    assert reply.stream is not None and reply.stream.ending is Ending.CLOSED
    assert reply.stream.content_events == 3


def test_a_stream_cut_mid_body_is_an_answer_too() -> None:
    reply = invoke(Pace(stop_after=3, end="drop"))
    assert reply.ok and reply.output == "The capital of France "
    assert reply.stream is not None and reply.stream.ending is Ending.CUT


def test_a_stream_that_stalls_past_the_timeout_errors_and_keeps_its_figures() -> None:
    reply = invoke(Pace(stop_after=3, end="hold"), timeout=800)
    assert reply.error is AgentErrorKind.TIMEOUT and reply.output is None
    stream = reply.stream
    assert stream is not None and stream.ending is Ending.TIMEOUT
    assert stream.content_events == 3 and stream.gap_after == 3
    assert stream.ended_ms >= 800


def test_anthropic_and_generic_sse_streams() -> None:
    anthropic = invoke(Pace(shape="anthropic", stop_after=2, end="close"))
    assert anthropic.output == "The capital "
    assert anthropic.stream is not None and not anthropic.stream.completed
    assert anthropic.stream.terminal == "message_stop"
    sse = invoke(Pace(shape="sse"), format="sse", path="token", done="end")
    assert sse.output == ANSWER and sse.stream is not None and sse.stream.completed


def test_a_non_2xx_status_errors_the_invocation() -> None:
    with LoopbackServer(lambda r: Response.text("overloaded", status=503)) as server:
        agent = HttpAgent(
            AgentConfig(endpoint=server.url_for("/chat"), stream={"format": "openai"})
        )
        reply = agent.invoke("hi")
    assert reply.error is AgentErrorKind.STATUS and reply.status == 503
    assert reply.stream is None and reply.raw == "overloaded"


def test_a_stream_that_never_opened_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: refused
        port = sock.getsockname()[1]
        agent = HttpAgent(
            AgentConfig(endpoint=f"http://127.0.0.1:{port}/chat", stream={"format": "openai"})
        )
        reply = agent.invoke("hi")
    assert reply.error is AgentErrorKind.CONNECTION and reply.stream is None


def test_a_stream_over_max_response_bytes_is_too_large() -> None:
    with StreamAgent({"": Pace()}) as server:
        config = AgentConfig(
            endpoint=server.url, max_response_bytes=300, stream={"format": "openai"}
        )
        reply = HttpAgent(config).invoke("hi")
    assert reply.error is AgentErrorKind.TOO_LARGE


def test_a_request_level_mutation_reads_the_whole_body_as_the_stream() -> None:
    with StreamAgent({"": Pace()}) as server:
        agent = HttpAgent(AgentConfig(endpoint=server.url, stream={"format": "openai"}))
        reply = agent.invoke("hi", Call(request=RequestShape(http_version="1.1")))
    assert reply.ok and reply.output == ANSWER
    assert reply.stream is not None and reply.stream.completed


def test_a_body_delimited_by_the_close_is_read_as_it_arrives_too() -> None:
    reply = invoke(Pace(chunked=False, stall_after=2, stall_ms=500))
    assert reply.ok and reply.output == ANSWER
    stream = reply.stream
    assert stream is not None and stream.completed
    # read live: the first two events came before the stall, not with the rest at the end
    assert stream.longest_gap_ms >= 500 and stream.gap_after == 2
    assert stream.first_content_ms is not None
    assert stream.first_content_ms + 400 <= stream.ended_ms
