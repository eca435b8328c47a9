"""Sessions from LangSmith traces (SPEC §7): ``flakestorm replay import langsmith``.

The only module that imports ``langsmith`` (the official client; ``pip install
'flakestorm[langsmith]'``). Credentials come from the environment only — ``LANGSMITH_API_KEY``
and, for a self-hosted instance, ``LANGSMITH_ENDPOINT`` — and never reach a file.

A root run becomes a session:

- ``input``: the root's input under ``input_key``; without one, the only input there is, else
  ``input``; a key that is not there is an error naming the keys that are;
- ``tool_responses``: the trace's runs of type ``tool``, in ``dotted_order`` (call order): the
  tool's name, its output (``output``'s value, else the outputs), a 500 with
  ``{"error": ...}`` when the run errored, the run's duration as ``latency_ms`` and its inputs
  (``input``'s value, else the inputs) as ``arguments``;
- ``llm_responses`` (``with_llm``): the trace's ``llm`` runs, in order: the reply text (chat
  generations, OpenAI and Anthropic shapes), or a 500 when the run errored;
- ``id``: ``langsmith-<root id>``; ``name``: the root run's name; ``contract`` as given.

A thread (``thread``: the root runs of a project whose metadata ``session_id``,
``conversation_id`` or ``thread_id`` is the thread's id, as LangSmith groups threads) becomes
one conversation session (SPEC §12): each root run, in start order, a turn with its input and
the tool (and LLM) responses of its own trace; ``id``: ``langsmith-thread-<thread id>``.

The client's failures are translated here: a bad key or a missing project or run is a usage
error (exit 2), anything else an infrastructure error (exit 3).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from flakestorm.config import LlmReply, Session, SessionTurn, ToolResponse
from flakestorm.errors import InfrastructureError, UsageError

API_KEY = "LANGSMITH_API_KEY"
ENDPOINT = "LANGSMITH_ENDPOINT"
DEFAULT_INPUT_KEY = "input"
FAILED_STATUS = 500


def import_sessions(
    env: Mapping[str, str],
    *,
    project: str | None = None,
    run_id: str | None = None,
    filter: str | None = None,
    limit: int | None = None,
    input_key: str | None = None,
    with_llm: bool = False,
    contract: str | None = None,
    thread: str | None = None,
) -> list[Session]:
    """The sessions of a project's root runs (``filter``/``limit``), or of one run; with
    ``thread``, the one conversation of that thread of the project."""
    if (project is None) == (run_id is None):
        raise UsageError("give --project NAME or --run ID (one of them)")
    if thread is not None and project is None:
        raise UsageError("--thread imports a thread of a project: give --project NAME too")
    try:
        import langsmith
        from langsmith.utils import LangSmithAuthError, LangSmithError, LangSmithNotFoundError
    except ImportError:
        raise UsageError(
            "importing from LangSmith needs the langsmith client: "
            "pip install 'flakestorm[langsmith]'"
        ) from None
    key = env.get(API_KEY)
    if not key:
        raise UsageError(f"set {API_KEY} (and {ENDPOINT} for a self-hosted LangSmith)")
    client = langsmith.Client(
        api_url=env.get(ENDPOINT) or None, api_key=key, auto_batch_tracing=False
    )
    try:
        with warnings.catch_warnings():
            # list_runs/read_run are deprecated for an async API that needs a newer server;
            # they are the calls every LangSmith version answers
            warnings.simplefilter("ignore", DeprecationWarning)
            if thread is not None:
                assert project is not None
                return [_thread(client, project, thread, filter, input_key, with_llm, contract)]
            return _sessions(client, project, run_id, filter, limit, input_key, with_llm, contract)
    except LangSmithAuthError as exc:
        raise UsageError(f"LangSmith refused the key in {API_KEY}: {exc}") from None
    except LangSmithNotFoundError as exc:
        what = f"project {project!r}" if project is not None else f"run {run_id!r}"
        raise UsageError(f"LangSmith has no {what}: {exc}") from None
    except LangSmithError as exc:
        raise InfrastructureError(f"LangSmith: {exc}") from None
    finally:
        client.close(timeout=0)


def _sessions(
    client: Any,
    project: str | None,
    run_id: str | None,
    filter: str | None,
    limit: int | None,
    input_key: str | None,
    with_llm: bool,
    contract: str | None,
) -> list[Session]:
    if run_id is not None:
        roots: Iterator[Any] = iter([client.read_run(run_id)])
    else:
        roots = client.list_runs(project_name=project, is_root=True, filter=filter, limit=limit)
    sessions = []
    for root in roots:
        runs = list(client.list_runs(trace_id=root.trace_id))
        sessions.append(session_of(root, runs, input_key, with_llm, contract))
    return sessions


THREAD_KEYS = ("session_id", "conversation_id", "thread_id")
"""The metadata keys LangSmith groups a thread's root runs by."""


def thread_filter(thread: str, extra: str | None = None) -> str:
    """The FQL filter of a thread's root runs (and ``extra``, the user's filter)."""
    keys = ", ".join(json.dumps(k) for k in THREAD_KEYS)
    own = f"and(in(metadata_key, [{keys}]), eq(metadata_value, {json.dumps(thread)}))"
    return own if extra is None else f"and({extra}, {own})"


def _thread(
    client: Any,
    project: str,
    thread: str,
    filter: str | None,
    input_key: str | None,
    with_llm: bool,
    contract: str | None,
) -> Session:
    roots = list(
        client.list_runs(project_name=project, is_root=True, filter=thread_filter(thread, filter))
    )
    if not roots:
        raise UsageError(f"LangSmith has no run of thread {thread!r} in project {project!r}")
    traces = [(root, list(client.list_runs(trace_id=root.trace_id))) for root in roots]
    return conversation_of(thread, traces, input_key, with_llm, contract)


def conversation_of(
    thread: str,
    traces: Sequence[tuple[Any, Sequence[Any]]],
    input_key: str | None = None,
    with_llm: bool = False,
    contract: str | None = None,
) -> Session:
    """The conversation session of a thread: each (root run, its trace's runs), in the roots'
    start order, one turn."""
    turns = []
    for root, runs in sorted(traces, key=lambda trace: (trace[0].start_time, str(trace[0].id))):
        one = session_of(root, runs, input_key, with_llm)
        turns.append(
            SessionTurn(
                input=one.input, tool_responses=one.tool_responses, llm_responses=one.llm_responses
            )
        )
    return Session(
        id=f"langsmith-thread-{thread}",
        name=f"LangSmith thread {thread}",
        turns=turns,
        contract=contract,
    )


def session_of(
    root: Any,
    runs: Sequence[Any],
    input_key: str | None = None,
    with_llm: bool = False,
    contract: str | None = None,
) -> Session:
    """The session of one trace: its root run and the trace's runs (any order)."""
    ordered = sorted((r for r in runs if r.id != root.id), key=lambda r: r.dotted_order or "")
    tools = [_tool_response(r) for r in ordered if r.run_type == "tool"]
    llm = [_llm_reply(r) for r in ordered if r.run_type == "llm"] if with_llm else []
    return Session(
        id=f"langsmith-{root.id}",
        name=root.name,
        input=_input(root, input_key),
        tool_responses=tools,
        llm_responses=llm,
        contract=contract,
    )


def _input(root: Any, key: str | None) -> str:
    inputs: dict[str, Any] = dict(root.inputs or {})
    if key is None:
        key = next(iter(inputs)) if len(inputs) == 1 else DEFAULT_INPUT_KEY
    if key not in inputs:
        present = ", ".join(sorted(inputs)) or "none"
        raise UsageError(
            f"run {root.id} ({root.name}) has no input {key!r} (its input keys: {present}); "
            "choose one with --input-key"
        )
    value = inputs[key]
    return value if isinstance(value, str) else _text(value)


def _latency_ms(run: Any) -> int:
    if run.end_time is None or run.start_time is None:
        return 0
    seconds: float = (run.end_time - run.start_time).total_seconds()
    return max(0, round(seconds * 1000))


_WRAPPERS = frozenset({"input", "output"})
"""The key LangChain wraps a run's one input or output in."""


def _unwrapped(values: Mapping[str, Any] | None) -> Any:
    if not values:
        return None
    if len(values) == 1 and next(iter(values)) in _WRAPPERS:
        return next(iter(values.values()))
    return dict(values)


def _tool_response(run: Any) -> ToolResponse:
    if run.error:
        return ToolResponse(
            tool=run.name,
            status=FAILED_STATUS,
            response={"error": run.error},
            latency_ms=_latency_ms(run),
            arguments=_unwrapped(run.inputs),
        )
    return ToolResponse(
        tool=run.name,
        response=_unwrapped(run.outputs),
        latency_ms=_latency_ms(run),
        arguments=_unwrapped(run.inputs),
    )


def _llm_reply(run: Any) -> LlmReply:
    if run.error:
        return LlmReply(status=FAILED_STATUS, content=str(run.error), latency_ms=_latency_ms(run))
    return LlmReply(content=_reply_text(run.outputs or {}), latency_ms=_latency_ms(run))


def _reply_text(outputs: Mapping[str, Any]) -> str:
    """The text of an LLM run's outputs: LangChain generations, an OpenAI or Anthropic
    reply, or a one-value output."""
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) else generations[0]
        if isinstance(first, dict):
            message = first.get("message")
            if isinstance(message, dict):
                content = message.get("kwargs", message).get("content")
                if isinstance(content, str):
                    return content
            if isinstance(first.get("text"), str):
                return str(first["text"])
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or {}
        if isinstance(message.get("content"), str):
            return str(message["content"])
    content = outputs.get("content")
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    value = _unwrapped(outputs)
    return value if isinstance(value, str) else _text(value)


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
