"""LLM faults on the streams of the OpenAI and Anthropic SDKs (SPEC §10): a ``stream=True``
call's ``Stream`` / ``AsyncStream``, and the raw stream inside the SDKs' stream helpers
(``client.chat.completions.stream(...)``, ``client.messages.stream(...)``); and on the raw
responses of their ``with_raw_response`` methods, whose ``parse()`` gives the reply (whole or
a stream) the fault then acts on.

The fault acts where the proxy's does, on the SSE bytes
(:class:`~flakestorm.chaos.llm.stream_faults.StreamFaulter`, the same editor): the SDK's stream is
rebuilt around a response of the SDK's own HTTP library whose body is upstream's bytes with the
fault applied, so the agent gets a genuine ``openai.Stream`` (``isinstance`` checks hold), parsed
by the SDK's own decoder: truncation ends it with ``finish_reason: "length"`` / ``stop_reason:
"max_tokens"``, ``empty`` sends no text, ``garbage`` and ``response_drift`` rewrite the text.

The fault is applied lazily, as the agent reads. When the stream ends or is closed, ``done``
is told whether the fault was applied (None) or why it was not (the stream was not one of the
protocols', or the agent closed it before its first event): a fault that matched a call but
could not be applied is not delivered (:mod:`flakestorm.chaos.delivery.proof`).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, NamedTuple, Protocol

from flakestorm.chaos.llm.protocol import provider_of
from flakestorm.chaos.llm.stream_faults import StreamFaulter
from flakestorm.chaos.llm.usage import UsageMeter
from flakestorm.config import LlmFault
from flakestorm.results.usage import Usage

__all__ = [
    "Done",
    "Waits",
    "fault_raw_response",
    "fault_stream",
    "fault_stream_manager",
    "is_raw_response",
    "is_sdk_stream",
    "stream_meter",
    "watch_stream",
]

Done = Callable[[str | None], None]
"""``done(reason)``: the stream ended; ``reason`` why the fault was not applied, or None."""

_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def is_sdk_stream(value: object) -> bool:
    """Whether ``value`` is an SDK's ``Stream`` / ``AsyncStream`` (what it is built on)."""
    return all(hasattr(value, a) for a in ("response", "_cast_to", "_client")) and hasattr(
        getattr(value, "response", None), "iter_bytes"
    )


def is_raw_response(value: object) -> bool:
    """Whether ``value`` is what an SDK's ``with_raw_response`` method returns (LangChain's
    ``ChatOpenAI`` calls ``create`` so): the HTTP response, whose ``parse()`` gives the reply."""
    return callable(getattr(value, "parse", None)) and hasattr(value, "http_response")


def fault_raw_response(raw: Any, fault: Callable[[Any], Any]) -> None:
    """Make ``raw.parse()`` (sync or async) give ``fault(reply)`` for the reply it parses."""
    parse = raw.parse
    if inspect.iscoroutinefunction(parse):

        async def parse_async(*args: Any, **kwargs: Any) -> Any:
            return fault(await parse(*args, **kwargs))

        raw.parse = parse_async
    else:

        def parse_sync(*args: Any, **kwargs: Any) -> Any:
            return fault(parse(*args, **kwargs))

        raw.parse = parse_sync


class _Editor(Protocol):
    done: bool

    @property
    def unapplied(self) -> str | None: ...
    @property
    def hold_ms(self) -> int | None: ...
    def feed(self, chunk: bytes) -> list[bytes]: ...
    def end(self) -> list[bytes]: ...
    def wait_ms(self, frame: bytes) -> int: ...


class _Passing:
    """A stream's bytes as upstream sent them (a stream only metered, not faulted)."""

    done = False
    unapplied = None
    hold_ms = None

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def end(self) -> list[bytes]:
        return []

    def wait_ms(self, frame: bytes) -> int:
        return 0


class Waits(NamedTuple):
    """How a faulted stream waits (``slow_stream``, a ``timeout`` mid-stream): the wrapping's
    own sleeps, so that a sync wait ends when the run is left."""

    sleep: Callable[[float], object] = time.sleep
    async_sleep: Callable[[float], Awaitable[object]] = asyncio.sleep


WAITS = Waits()
"""Plain sleeps (a stream faulted outside a wrapping, as in tests)."""

DROPPED = "peer closed connection without sending complete message body (incomplete chunked read)"
"""What the SDKs' HTTP library says of a stream whose server dropped the connection mid-body:
what a ``timeout`` mid-stream raises to the agent once it has held the stream."""


Billed = Callable[[Usage], None]
"""``billed(usage)``: what the stream's upstream bytes billed, told when it ends (before
``done``)."""


class _Body:
    """The rebuilt body: upstream's bytes (read by ``meter``, if any) through the editor;
    tells ``billed`` and ``done`` once."""

    def __init__(
        self,
        upstream: Any,
        faulter: _Editor,
        done: Done,
        meter: tuple[UsageMeter, Billed] | None = None,
        waits: Waits = WAITS,
    ) -> None:
        self._upstream = upstream
        self._faulter = faulter
        self._done: Done | None = done
        self._meter = meter
        self._waits = waits

    def _dropped(self) -> BaseException:
        """The error of the SDK's HTTP library for a connection dropped mid-body."""
        http = sys.modules[type(self._upstream).__module__.partition(".")[0]]
        return http.RemoteProtocolError(DROPPED, request=self._upstream.request)  # type: ignore[no-any-return]

    def _read(self, chunk: bytes) -> list[bytes]:
        if self._meter is not None:
            self._meter[0].feed(chunk)
        return self._faulter.feed(chunk)

    def _finish(self) -> None:
        done, self._done = self._done, None
        if done is None:
            return
        if self._meter is not None:
            meter, billed = self._meter
            # the SDK stops reading at the stream's last event: complete (reported, or
            # estimated) when its terminal event came, else unknown
            billed(meter.usage(finished=True))
        done(self._faulter.unapplied)


class _SyncBody(_Body):
    def __iter__(self) -> Iterator[bytes]:
        faulter, sleep = self._faulter, self._waits.sleep
        try:
            for frame in self._frames():
                wait_ms = faulter.wait_ms(frame)
                if wait_ms:
                    sleep(wait_ms / 1000)
                yield frame
            hold_ms = faulter.hold_ms
            if hold_ms is not None:  # held with nothing sent, then dropped
                sleep(hold_ms / 1000)
                raise self._dropped()
        finally:
            self._finish()

    def _frames(self) -> Iterator[bytes]:
        for chunk in self._upstream.iter_bytes():
            yield from self._read(chunk)
            if self._faulter.done:
                return
        yield from self._faulter.end()

    def close(self) -> None:
        self._upstream.close()
        self._finish()


class _AsyncBody(_Body):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        faulter, sleep = self._faulter, self._waits.async_sleep
        try:
            async for frame in self._frames():
                wait_ms = faulter.wait_ms(frame)
                if wait_ms:
                    await sleep(wait_ms / 1000)
                yield frame
            hold_ms = faulter.hold_ms
            if hold_ms is not None:  # held with nothing sent, then dropped
                await sleep(hold_ms / 1000)
                raise self._dropped()
        finally:
            self._finish()

    async def _frames(self) -> AsyncIterator[bytes]:
        async for chunk in self._upstream.aiter_bytes():
            for frame in self._read(chunk):
                yield frame
            if self._faulter.done:
                return
        for frame in self._faulter.end():
            yield frame

    async def aclose(self) -> None:
        await self._upstream.aclose()
        self._finish()


def stream_meter(stream: Any) -> UsageMeter | None:
    """A meter of what an SDK ``stream`` bills, from the request it answers (None when that
    request cannot be read)."""
    request = getattr(getattr(stream, "response", None), "request", None)
    if request is None:
        return None
    try:
        body = request.content
    except Exception:  # a streamed request body, not read
        return None
    if not isinstance(body, bytes):
        return None
    return UsageMeter(provider_of(str(request.url)), body, True)


def watch_stream(stream: Any, meter: UsageMeter, billed: Billed, done: Done) -> Any:
    """A stream of ``stream``'s type with ``stream``'s events unchanged, read by ``meter``."""
    return _rebuilt(stream, _Passing(), done, (meter, billed))


def fault_stream(
    stream: Any,
    fault: LlmFault,
    rng: random.Random,
    done: Done,
    meter: tuple[UsageMeter, Billed] | None = None,
    waits: Waits = WAITS,
) -> Any:
    """A stream of ``stream``'s type whose events are ``stream``'s with ``fault`` applied
    (upstream's bytes read by ``meter`` before the fault; its waits made with ``waits``)."""
    return _rebuilt(stream, StreamFaulter(fault, rng), done, meter, waits)


def _rebuilt(
    stream: Any,
    editor: _Editor,
    done: Done,
    meter: tuple[UsageMeter, Billed] | None,
    waits: Waits = WAITS,
) -> Any:
    response = stream.response
    http = sys.modules[type(response).__module__.partition(".")[0]]
    asynchronous = hasattr(stream, "__aiter__")
    body: type[_Body] = type(
        "FaultedSseBody",
        (_AsyncBody, http.AsyncByteStream) if asynchronous else (_SyncBody, http.SyncByteStream),
        {},
    )
    headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROPPED_HEADERS]
    faulted = http.Response(
        response.status_code,
        headers=headers,
        stream=body(response, editor, done, meter, waits),
        request=response.request,
    )
    return type(stream)(
        cast_to=stream._cast_to,
        response=faulted,
        client=stream._client,
        options=getattr(stream, "_options", None),
    )


def fault_stream_manager(
    manager: Any, fault: LlmFault, rng: random.Random, done: Done, waits: Waits = WAITS
) -> bool:
    """Fault the raw stream an SDK stream helper's manager opens when entered (its private
    ``__api_request``: a function to call, or, in an async manager, the request's awaitable);
    False when ``manager`` has none (not a stream helper flakestorm knows)."""
    names = [n for n in vars(manager) if n.endswith("__api_request")]
    if len(names) != 1:
        return False
    request = vars(manager)[names[0]]
    if hasattr(request, "__await__"):  # awaited once by the async manager
        vars(manager)[names[0]] = _faulted_later(request, fault, rng, done, waits)
        return True
    if not callable(request):
        return False

    def faulted_request() -> Any:
        opened = request()
        if hasattr(opened, "__await__"):
            return _faulted_later(opened, fault, rng, done, waits)
        return _fault_or_report(opened, fault, rng, done, waits)

    vars(manager)[names[0]] = faulted_request
    return True


def is_async_stream_helper(method: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """Whether ``method`` is an async SDK client's stream helper (``AsyncMessages.stream``):
    a plain method that hands back a manager whose request is awaited when it is entered."""
    return (
        getattr(method, "__name__", "") == "stream"
        and bool(args)
        and type(args[0]).__name__.startswith("Async")
        and getattr(getattr(args[0], "_client", None), "_make_status_error", None) is not None
    )


def fail_stream_manager(
    manager: Any,
    error: BaseException,
    delay_s: float,
    sleep: Callable[[float], Awaitable[object]],
) -> bool:
    """Make entering an async stream helper's ``manager`` wait ``delay_s`` and raise ``error``,
    where the SDK would raise it, instead of sending the request; False when ``manager`` is not
    one flakestorm knows (nothing changed)."""
    names = [n for n in vars(manager) if n.endswith("__api_request")]
    if len(names) != 1 or not hasattr(vars(manager)[names[0]], "__await__"):
        return False
    request = vars(manager)[names[0]]
    close = getattr(request, "close", None)
    if close is not None:
        close()  # the request never goes out

    async def failing() -> Any:
        if delay_s:
            await sleep(delay_s)
        raise error

    vars(manager)[names[0]] = failing()
    return True


def _fault_or_report(
    opened: Any, fault: LlmFault, rng: random.Random, done: Done, waits: Waits
) -> Any:
    if is_sdk_stream(opened):
        return fault_stream(opened, fault, rng, done, waits=waits)
    done(f"the stream helper opened a {type(opened).__name__}, not an SDK stream")
    return opened


async def _faulted_later(
    opened: Any, fault: LlmFault, rng: random.Random, done: Done, waits: Waits
) -> Any:
    return _fault_or_report(await opened, fault, rng, done, waits)
