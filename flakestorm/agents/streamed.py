"""An http agent's streamed reply (``agent.stream``, SPEC §16), read as it arrives.

The body's chunks go to a :class:`~flakestorm.agents.stream.StreamReader` with their arrival
times, against the invocation's wall-clock deadline and ``agent.max_response_bytes``; reading
stops at the terminal event. What errors the invocation is what errors a reply that is not
streamed: no connection, a non-2xx status, ``agent.timeout`` (the reply keeps the figures of
what arrived before it), a body over the cap or not UTF-8. A stream that closes without its
terminal event, cleanly or with a broken connection, is an answer: its text is the output.

A request-level mutation's reply is read whole by :mod:`flakestorm.agents.wire`; :func:`whole`
reads its body as the stream, every event at the time the body was read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING

import urllib3

from flakestorm.agents import Call, Reply
from flakestorm.agents.deadline import Deadline, Expired, body_chunks, deadline
from flakestorm.agents.stream import StreamReader
from flakestorm.config import AgentStream
from flakestorm.errors import AgentError, AgentErrorKind
from flakestorm.results.stream_timing import Ending, StreamTiming

if TYPE_CHECKING:
    import requests

    from flakestorm.agents.http import HttpAgent

RAW_CAP = 65_536
"""Characters of the raw body kept for reports (as for a reply that is not streamed)."""


@dataclasses.dataclass(frozen=True)
class _Read:
    text: str
    timing: StreamTiming
    raw: bytes


def invoke(agent: HttpAgent, prompt: str, call: Call) -> Reply:
    """``agent``'s reply to ``prompt``, read as a stream."""
    spec = agent.config.stream
    assert spec is not None
    timeout_s = agent.config.timeout / 1000
    started = time.perf_counter()
    status: int | None = None
    raw = b""
    try:
        with deadline(timeout_s) as limit:
            try:
                response = agent._send(prompt, call, started)
                status = response.status_code
                if not 200 <= status < 300:
                    with contextlib.suppress(AgentError):  # a STATUS error however it ends
                        raw = agent._read(response, started + timeout_s)
                    agent._answer(status, response.reason, "", raw)
                got = _read(response, spec, started, limit, agent.config.max_response_bytes)
            except AgentError as exc:
                if limit.expired and exc.kind is not AgentErrorKind.TOO_LARGE:
                    raise agent._timed_out(status) from exc
                raise
    except AgentError as exc:
        return agent._failed(exc, started, status, raw)
    raw_text = _lenient(got.raw)
    if got.timing.ending is Ending.TIMEOUT:
        failed = agent._failed(agent._timed_out(status), started, status, got.raw)
        return dataclasses.replace(failed, stream=got.timing)
    latency_ms = (time.perf_counter() - started) * 1000
    return Reply(got.text, latency_ms, status=status, raw=raw_text, stream=got.timing)


def whole(spec: AgentStream, body: bytes, status: int, latency_ms: float) -> Reply:
    """The reply of a body read whole, read as the stream it is (every event at its end)."""
    reader = StreamReader(spec)
    reader.feed(body, latency_ms)
    timing = reader.finish(Ending.CLOSED, latency_ms)
    return Reply(reader.text, latency_ms, status=status, raw=_lenient(body), stream=timing)


def _read(
    response: requests.Response, spec: AgentStream, started: float, limit: Deadline, cap: int
) -> _Read:
    reader = StreamReader(spec)
    raw: list[bytes] = []
    size = 0
    ending = Ending.CLOSED
    try:
        for chunk in body_chunks(response, time.perf_counter() + limit.remaining(), live=True):
            size += len(chunk)
            if size > cap:
                raise AgentError(
                    AgentErrorKind.TOO_LARGE,
                    f"the streamed reply is larger than agent.max_response_bytes ({cap} "
                    "bytes); reading stopped there",
                    response.status_code,
                )
            raw.append(chunk)
            if reader.feed(chunk, _ms_since(started)):
                break
    except Expired:
        ending = Ending.TIMEOUT
    except (urllib3.exceptions.HTTPError, OSError):
        ending = Ending.TIMEOUT if limit.expired else Ending.CUT
    finally:
        response.close()
    if limit.expired and not reader.done:  # a close-delimited body cut at the deadline
        ending = Ending.TIMEOUT
    timing = reader.finish(ending, _ms_since(started))
    return _Read(reader.text, timing, b"".join(raw))


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _lenient(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")[:RAW_CAP]
