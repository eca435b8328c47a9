"""An agent that is a python callable (``agent.type: python``).

``agent.endpoint`` is ``module:attr``, imported with the config's directory first on
``sys.path``. The attribute may be

- a function ``f(prompt) -> str | dict`` (sync or async), or a generator (sync or async)
  yielding its answer's text as it comes: a streamed reply
  (:mod:`flakestorm.agents.python_stream`); one that takes a ``session_id``
  keyword argument (a parameter of that name, or ``**kwargs``) is given each conversation's
  id (SPEC §12: a cell's run, a conversation);
- an object with an ``invoke(prompt)`` method (sync or async);
- a class: instantiated once, without arguments, then used as above.

A ``str`` reply is the answer; a ``dict`` (or list) is searched with ``agent.response_path`` or
automatic extraction, like an HTTP agent's JSON. Each invocation runs on a daemon worker thread
(coroutines on one shared event loop thread) with ``agent.timeout``: a hung agent fails its
prompt with TIMEOUT and the run goes on. :data:`current_call` is set around every invocation so
tool wrappers can attribute the calls they see to a cell. With an
:class:`~flakestorm.agents.console.AgentConsole`, what an invocation prints and logs is kept
apart from the run's output, in the log, and its last lines go with the reply
(``Reply.console``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import time
import traceback
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from flakestorm.agents import NO_CALL, Call, Reply
from flakestorm.agents.closing import Closing
from flakestorm.agents.console import AgentConsole, Capture, bind
from flakestorm.agents.extraction import as_text, extract_auto, extract_path
from flakestorm.agents.importer import Locate, default_locate, describe_exception, load_reference
from flakestorm.agents.python_stream import Collector, collect, collect_async, utf8
from flakestorm.agents.workers import DaemonPool, LoopThread
from flakestorm.config import AgentConfig
from flakestorm.errors import AgentError, AgentErrorKind, ConfigError
from flakestorm.results.stream_timing import Ending

current_call: ContextVar[Call] = ContextVar("flakestorm_current_call")
"""The invocation in progress in this context (unset outside one): ``current_call.get(None)``."""

RAW_CAP = 65_536
TIMEOUT = AgentErrorKind.TIMEOUT


def resolve_callable(target: Any, reference: str, field: str, locate: Locate) -> Callable[..., Any]:
    """The callable to invoke for an imported ``target``: a function, ``obj.invoke``, or
    ``Class().invoke`` / ``Class()``; a class that cannot be instantiated is a config error."""
    if inspect.isclass(target):
        try:
            target = target()
        except Exception as exc:
            raise ConfigError(
                [locate(field, f'creating "{reference}()" failed: {describe_exception(exc)}')]
            ) from None
    invoke: Callable[..., Any] | None = getattr(target, "invoke", None)
    if callable(invoke):
        return invoke
    if callable(target):
        return target  # type: ignore[no-any-return]
    raise ConfigError(
        [
            locate(
                field,
                f'"{reference}" is a {type(target).__name__}: expected a function, '
                "an object with an invoke(prompt) method, or a class",
            )
        ]
    )


class PythonAgent(Closing):
    """Invokes a python callable in-process, each call on a worker thread with a timeout."""

    def __init__(
        self,
        config: AgentConfig,
        base_dir: Path,
        *,
        locate: Locate = default_locate,
        pool: DaemonPool | None = None,
        console: AgentConsole | None = None,
    ) -> None:
        self.config = config
        self._console = console
        importing = f"import of {config.endpoint}"
        with console.capturing(importing) if console else contextlib.nullcontext():
            target = load_reference(config.endpoint, base_dir, "agent.endpoint", locate)
            fn = resolve_callable(target, config.endpoint, "agent.endpoint", locate)
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
        self.takes_session = _takes_session(self._fn)
        """Whether the callable takes ``session_id`` (SPEC §12): each conversation's id is
        then passed to it, as ``agent.session`` sends it to an http agent."""
        self._pool = pool or DaemonPool()
        self._loop = LoopThread()
        self._timeout_s = config.timeout / 1000

    def invoke(self, prompt: str, call: Call = NO_CALL) -> Reply:
        reply = self._invoke(prompt, call, capture := Capture(call.cell_id or "(no cell)"))
        if self._console is None:
            return reply
        note = "timed out: what it wrote later is not kept" if reply.error is TIMEOUT else ""
        return dataclasses.replace(reply, console=self._console.keep(capture, note))

    def _invoke(self, prompt: str, call: Call, capture: Capture) -> Reply:
        started = time.perf_counter()
        stream = Collector(started, self.config.endpoint, self.config.max_response_bytes)
        future: Future[Any]
        if self._is_async:
            future = self._loop.submit(self._run_async(prompt, call, capture, stream))
        else:
            future = self._pool.submit(lambda: self._run_sync(prompt, call, capture, stream))
        try:
            result = future.result(timeout=self._timeout_s)
        except FutureTimeout:
            future.cancel()
            failed = self._failed(
                started,
                TIMEOUT,
                f"{self.config.endpoint} did not return within {self.config.timeout} ms "
                "(agent.timeout)",
            )
            if not stream.streamed:
                return failed
            return dataclasses.replace(failed, stream=stream.finish(Ending.TIMEOUT))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            trace = {"traceback": "".join(traceback.format_exception(exc))[-RAW_CAP:]}
            if isinstance(exc, AgentError):  # it yielded what is not text, or too much
                return self._failed(started, exc.kind, str(exc))
            if stream.items:  # broken off mid-answer: still an answer
                text, timing = stream.text, stream.finish(Ending.RAISED)
                latency_ms = _ms_since(started)
                return Reply(text, latency_ms, raw=text[:RAW_CAP], extra=trace, stream=timing)
            return self._failed(started, AgentErrorKind.EXCEPTION, describe_exception(exc), trace)
        latency_ms = _ms_since(started)
        if stream.streamed:
            timing = stream.finish(Ending.DONE)
            return Reply(stream.text, latency_ms, raw=stream.text[:RAW_CAP], stream=timing)
        try:
            output = self._answer(result)
        except AgentError as exc:
            return Reply(None, latency_ms, raw=_raw(result), error=exc.kind, error_message=str(exc))
        return Reply(output, latency_ms, raw=_raw(result))

    def close(self) -> None:
        self._loop.close()

    # -- running

    def _args(self, call: Call) -> dict[str, str]:
        return {"session_id": call.session} if self.takes_session and call.session else {}

    def _run_sync(self, prompt: str, call: Call, capture: Capture, stream: Collector) -> Any:
        current_call.set(call)  # in the worker's private copy of the caller's context
        if self._console is not None:
            bind(capture)
        result = self._fn(prompt, **self._args(call))
        if inspect.isgenerator(result):  # its reply, streamed
            return collect(result, stream)
        if inspect.isasyncgen(result):
            return self._loop.submit(collect_async(result, stream)).result()
        if inspect.isawaitable(result):  # a sync callable handing back a coroutine
            return self._loop.submit(_awaited(result)).result()
        return result

    async def _run_async(self, prompt: str, call: Call, capture: Capture, stream: Collector) -> Any:
        current_call.set(call)  # the task runs in its own copy of the context
        if self._console is not None:
            bind(capture)
        result = self._fn(prompt, **self._args(call))
        if inspect.isasyncgen(result):  # its reply, streamed
            return await collect_async(result, stream)
        return await result

    # -- answering

    def _answer(self, result: Any) -> str:
        if isinstance(result, str):
            return result
        if isinstance(result, bytes):
            return utf8(result, "the agent returned")
        if isinstance(result, (dict, list)):
            path = self.config.response_path
            if path is not None:
                return extract_path(result, path)
            found = extract_auto(result)
            return found if found is not None else as_text(result)
        if isinstance(result, (int, float, bool)):
            return as_text(result)
        shown = "None" if result is None else f"a {type(result).__name__}"
        raise AgentError(
            AgentErrorKind.UNPARSEABLE,
            f"{self.config.endpoint} returned {shown}; expected a str or a dict",
        )

    def _failed(
        self,
        started: float,
        kind: AgentErrorKind,
        message: str,
        extra: dict[str, str] | None = None,
    ) -> Reply:
        return Reply(None, _ms_since(started), error=kind, error_message=message, extra=extra or {})


def _takes_session(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    found = parameters.get("session_id")
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True  # **kwargs accepts it
    return found is not None and found.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _raw(result: Any) -> str:
    if isinstance(result, str):
        return result[:RAW_CAP]
    try:
        text = json.dumps(result, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(result)
    return text[:RAW_CAP]


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
