"""A python agent that streams (SPEC §16): a generator endpoint, sync or async, read item by
item with each item's time; how its stream ends (returned, raised, timed out) and what it may
yield."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flakestorm.agents.python import PythonAgent
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import AgentErrorKind
from flakestorm.results.stream_timing import Ending

Write = Callable[[str], str]
"""The ``write_module`` fixture (conftest.py)."""


def python_agent(tmp_path: Path, endpoint: str, **fields: Any) -> PythonAgent:
    return PythonAgent(AgentConfig(type=AgentType.PYTHON, endpoint=endpoint, **fields), tmp_path)


def test_an_async_generator_is_read_as_a_stream_its_empty_item_not_content(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        import asyncio
        async def agent(prompt):
            yield ""
            await asyncio.sleep(0.05)
            yield "Par"
            yield "is"
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent").invoke("hi")
    assert reply.ok and reply.output == "Paris" and reply.raw == "Paris"
    stream = reply.stream
    assert stream is not None and stream.ending is Ending.DONE and stream.completed
    assert stream.content_events == 2 and stream.terminal == "the generator's end"
    assert stream.first_byte_ms is not None and stream.first_content_ms is not None
    assert stream.first_content_ms - stream.first_byte_ms >= 50  # the empty item came first
    assert [e.text for e in stream.timeline if e.kind == "content"] == ["Par", "is"]


def test_a_sync_generator_and_bytes_items(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        def agent(prompt):
            yield "ça "
            yield "va".encode()
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent").invoke("hi")
    assert reply.output == "ça va" and reply.stream is not None
    assert reply.stream.content_events == 2 and reply.stream.completed


def test_a_generator_that_raises_mid_answer_has_broken_off_and_still_answers(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        async def agent(prompt):
            yield "The capital "
            yield "is "
            raise ConnectionError("the LLM went away")
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent").invoke("hi")
    assert reply.ok and reply.output == "The capital is "
    assert reply.stream is not None and reply.stream.ending is Ending.RAISED
    assert not reply.stream.completed and reply.stream.content_events == 2
    assert "ConnectionError: the LLM went away" in reply.extra["traceback"]


def test_a_generator_that_raises_before_yielding_is_the_agents_exception(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        def agent(prompt):
            raise ValueError("no key")
            yield "never"
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent").invoke("hi")
    assert reply.error is AgentErrorKind.EXCEPTION and reply.stream is None
    assert reply.error_message == f"ValueError: no key (at {name}.py:3)"


def test_an_item_that_is_not_text_is_unparseable(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        def agent(prompt):
            yield "a"
            yield {"delta": "b"}
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent").invoke("hi")
    assert reply.error is AgentErrorKind.UNPARSEABLE
    assert reply.error_message == (
        f"{name}:agent yielded a dict; a streaming endpoint yields its text (str)"
    )


def test_a_stream_past_the_timeout_errors_with_the_figures_of_what_came(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        import asyncio
        async def agent(prompt):
            yield "One"
            yield " two"
            await asyncio.Event().wait()
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent", timeout=300).invoke("hi")
    assert reply.error is AgentErrorKind.TIMEOUT and reply.output is None
    assert reply.stream is not None and reply.stream.ending is Ending.TIMEOUT
    assert reply.stream.content_events == 2 and reply.stream.longest_gap_ms >= 250


def test_a_stream_past_max_response_bytes_is_too_large_and_not_read_on(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        def agent(prompt):
            while True:  # a generator that never ends
                yield "x" * 100
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent", max_response_bytes=1000).invoke("hi")
    assert reply.error is AgentErrorKind.TOO_LARGE
    assert reply.error_message == (
        "the streamed reply is larger than agent.max_response_bytes (1000 bytes); reading "
        "stopped there"
    )


def test_a_sync_generator_left_at_the_timeout_is_not_read_on(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        import threading
        import time
        LEFT = threading.Event()
        def agent(prompt):
            try:
                while True:
                    time.sleep(0.01)
                    yield "x"
            finally:
                LEFT.set()
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent", timeout=200).invoke("hi")
    assert reply.error is AgentErrorKind.TIMEOUT
    module = sys.modules[name]
    assert module.LEFT.wait(5)  # the next item after the timeout stopped it
