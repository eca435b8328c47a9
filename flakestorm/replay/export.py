"""Every failure of a run as a session file (SPEC §7): ``flakestorm replay export``.

For each failed or errored cell of a matrix phase (contract, chaos) in a ``results.json``,
and each failed or errored prompt-level mutation (``DIR/mutation-<id>.yaml``, its mutated
prompt as the input, verified against the top-level invariants: ``verify: invariants``), one
session is written (``DIR/<phase>-<invariant>-<scenario>.yaml``) from its first failing
invocation:

- ``input``: what the agent really got (``sent``: the poisoned memory, the mutated prompt);
- ``tool_responses``: the tool calls that invocation made, in order, with the status, body and
  latency the agent saw — injected faults included (a dropped connection is recorded as a 504)
  — and what it sent as ``arguments``;
- ``llm_responses``: its LLM replies (their text, or an error status), when every one was
  kept whole; a streamed reply is not kept, and then the session's LLM calls are live;
- ``expected_failure``: the invariant that failed and why; ``contract``: the contract's name
  (``verify: invariants`` instead for the chaos phase's cells and mutations, which the
  top-level invariants judged).

Bodies come from the interactions ``results.json`` keeps (bounded, see ``docs/results.md``);
the run already redacted its secrets, and the values of the optional ``secrets`` (a config's
environment values) are redacted again, in every string, before anything is written.
A replayed session that failed is not exported again: its session file already exists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from flakestorm.chaos import mcp
from flakestorm.chaos.delivery.interactions import BODY_CHARS, RUN_BODY_CHARS, was_cut
from flakestorm.chaos.faults.recording import ordinal
from flakestorm.config import LlmReply, PhaseName, Session, SessionTurn, ToolResponse, Verify
from flakestorm.errors import UsageError
from flakestorm.loader.sessions import session_text
from flakestorm.redaction import Redactor, redact_data
from flakestorm.results.model import (
    CallRecord,
    CellResult,
    MutationResult,
    PhaseOutcome,
    PromptResult,
    RunResult,
    Status,
)

DROPPED_STATUS = 504
"""The status a call whose connection was dropped (a timeout fault) is exported with."""
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
SKIPPED_PHASES = frozenset({"replay"})
"""Phases whose failures are already sessions."""
_FAILED = (Status.FAILED, Status.ERRORED)
"""The verdicts a session is exported for."""


def export_sessions(
    result: RunResult, out_dir: Path, secrets: Iterable[str] = ()
) -> tuple[list[Path], list[str]]:
    """Write a session file per failed or errored cell; the paths and notes on what could not
    be kept (streamed LLM replies, calls without attribution)."""
    notes: list[str] = []
    sessions = []
    for outcome in result.phases.values():
        if outcome.phase in SKIPPED_PHASES:
            continue
        failed = [(c.id, cell_session(outcome, c)) for c in outcome.cells if c.status in _FAILED]
        failed += [
            (f"mutation {m.id}", mutation_session(outcome, m))
            for m in outcome.mutations
            if m.status in _FAILED
        ]
        for name, (session, why) in failed:
            notes += [f"{name}: {n}" for n in why]
            if session is not None:
                sessions.append(session)
    kept: list[Path] = []
    written = write_sessions(sessions, out_dir, secrets, kept)
    notes += [f"{p} already exists: kept (delete it to export this failure again)" for p in kept]
    return written, notes


def write_sessions(
    sessions: Sequence[Session],
    out_dir: Path,
    secrets: Iterable[str] = (),
    kept: list[Path] | None = None,
) -> list[Path]:
    """Write each session to ``DIR/<id>.yaml``, every string redacted of ``secrets``; an id
    that reads like an earlier one as a file name gets a number (``-2``), in the file too. A
    file already there with other text (a committed session, maybe completed by hand) is
    kept, and added to ``kept``."""
    redactor = Redactor(secrets)
    written: list[Path] = []
    if not sessions:
        return written
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out_dir} ({exc.strerror})") from None
    taken: set[str] = set()
    for session in sessions:
        name = _slug(session.id)
        # ids that read the same as file names ("tool down", "tool-down") get a number
        n = 1
        while (unique := name if n == 1 else f"{name}-{n}") in taken:
            n += 1
        taken.add(unique)
        if n > 1:
            session = session.model_copy(update={"id": f"{session.id}-{n}"})
        path = out_dir / f"{unique}.yaml"
        if redactor:  # in the values (a `***` written into YAML text would read as an alias)
            session = Session.model_validate(redact_data(session.model_dump(mode="json"), redactor))
        text = redactor(session_text(session)) if redactor else session_text(session)
        if _other_text(path, text):
            if kept is not None:
                kept.append(path)
            continue
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path} ({exc.strerror})") from None
        written.append(path)
    return written


def _other_text(path: Path, text: str) -> bool:
    """Whether ``path`` exists with another text than ``text``."""
    try:
        return path.read_text(encoding="utf-8") != text
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        return True


def cell_session(outcome: PhaseOutcome, cell: CellResult) -> tuple[Session | None, list[str]]:
    """The session that reproduces ``cell``'s first failing invocation, and notes."""
    failing = next((p for p in cell.prompts if not p.passed), None)
    if failing is None:
        return None, ["no invocation of the agent to export (the cell errored before one)"]
    notes: list[str] = []
    scenario = next((s for s in outcome.scenarios if s.name == cell.scenario), None)
    if not cell.calls and scenario is not None and not scenario.declared:
        notes.append(
            "the run kept no calls for this cell: it made none, or its scenario (without faults "
            "to deliver) ran with calls that could not be attributed to their cell (forward "
            "the X-Flakestorm-Cell header, or configure a reset); its tool calls would be replay "
            "misses (add the responses, or set replays.on_miss: live)"
        )
    notes += _needs_expected_output(outcome, (cell.invariant_id,))
    if failing.turn is not None:  # a conversation: every turn, each with its own responses
        turns = _turns(cell, failing, notes)
        shape: dict[str, Any] = {"turns": turns}
    else:  # one invocation: the calls of ``RUN.PROMPT``
        tools, llm = _responses(_calls_of(cell, failing, notes), notes)
        shape = {"input": failing.sent, "tool_responses": tools, "llm_responses": llm}
    session = Session(
        id=_slug(f"{outcome.phase}-{cell.invariant_id}-{cell.scenario}"),
        name=f"{cell.id} ({outcome.label})",
        **shape,
        expected_failure=f"{cell.invariant_id}: {cell.reason}",
        contract=outcome.name if outcome.phase == PhaseName.CONTRACT else None,
        # the chaos phase checks the top-level invariants, as the mutation phase does
        verify=Verify.INVARIANTS if outcome.phase == PhaseName.CHAOS else Verify.CONTRACT,
    )
    return session, notes


def mutation_session(
    outcome: PhaseOutcome, mutation: MutationResult
) -> tuple[Session | None, list[str]]:
    """The session that replays a failed mutation's shown run (the first that failed): the
    mutated prompt as its input, the tool and LLM responses that run's calls got, verified
    against the config's top-level invariants (``verify: invariants``), as the mutation was.
    A request-level mutation changes the request itself, which a session cannot hold: it is
    not exported."""
    if mutation.request is not None:
        return None, [
            "a request-level mutation changes the HTTP request, which a session cannot replay: "
            "not exported"
        ]
    notes: list[str] = []
    calls = [c for c in mutation.calls if c.invocation == f"{mutation.run}.0"]
    if not mutation.calls:
        notes.append(
            "the run kept no calls for this mutation: it made none, or they did not go through "
            "flakestorm (an http agent's calls go through the chaos proxy of a `proxy` "
            "section, a python agent's through the wrappers of agent.tools and agent.llm), or "
            "could not be attributed to it (forward the X-Flakestorm-Cell header, or configure "
            "a reset); its tool calls would be replay misses (add the responses, or set "
            "replays.on_miss: live)"
        )
    if mutation.turns:  # sent as real turns: the conversation, each turn with its responses
        messages = (*mutation.turns, mutation.sent)
        turns = []
        for number, message in enumerate(messages, 1):
            own = [c for c in mutation.calls if c.invocation == f"{mutation.run}.0.{number}"]
            tools, llm = _responses(own, notes)
            turns.append(SessionTurn(input=message, tool_responses=tools, llm_responses=llm))
        shape: dict[str, Any] = {"turns": turns}
    else:
        tools, llm = _responses(calls, notes)
        shape = {"input": mutation.sent, "tool_responses": tools, "llm_responses": llm}
    notes += _needs_expected_output(outcome, mutation.failed_invariants)
    # its reason names the invariants that failed ("no-leak: matched ..."), else the error
    failure = (
        mutation.reason
        if mutation.failed_invariants
        else f"{mutation.status.value}: {mutation.reason}"
    )
    session = Session(
        id=_slug(f"mutation-{mutation.id}"),
        name=f"{mutation.id} ({mutation.type}: {mutation.transform})",
        **shape,
        expected_failure=failure,
        verify=Verify.INVARIANTS,
    )
    return session, notes


def _responses(
    calls: Sequence[CallRecord], notes: list[str]
) -> tuple[list[ToolResponse], list[LlmReply]]:
    """The tool responses and LLM replies ``calls`` got, for a session; a note when a body
    was cut or dropped by the bounds, or an LLM reply was not kept whole."""
    tool_calls = [c for c in calls if c.target == "tool" and not _mcp_listing(c)]
    tools = [_tool_response(c) for c in tool_calls]
    notes += _bounded(tool_calls)
    llm_calls = [c for c in calls if c.target == "llm"]
    replies = [_llm_reply(c) for c in llm_calls]
    if llm_calls and any(r is None for r in replies):
        notes.append("an LLM reply was not kept whole: the session's LLM calls are live")
        return tools, []
    return tools, [r for r in replies if r is not None]


def _needs_expected_output(outcome: PhaseOutcome, failed: Iterable[str]) -> list[str]:
    """A note per failed ``behavior_unchanged`` invariant: a session checks it against its
    ``expected_output``, which the export cannot fill in."""
    kinds = {i.id: i.type for i in outcome.invariants}
    return [
        f"{ident} is a behavior_unchanged invariant, which a session checks against its "
        "expected_output: add the answer the agent should give (results.json does not keep "
        "the baseline answer), or the replay skips it"
        for ident in failed
        if kinds.get(ident) == "behavior_unchanged"
    ]


def _turns(cell: CellResult, failing: PromptResult, notes: list[str]) -> list[SessionTurn]:
    """Every turn of the conversation ``failing`` is a turn of (in its run), each with the
    responses its calls (``RUN.PROMPT.TURN``) got."""
    of_run = [p for p in cell.prompts if p.run == failing.run]
    turns = []
    for index, prompt in enumerate(of_run):
        if prompt.conversation != failing.conversation or prompt.turn is None:
            continue
        invocation = f"{failing.run}.{index}.{prompt.turn}"
        tools, llm = _responses([c for c in cell.calls if c.invocation == invocation], notes)
        turns.append(SessionTurn(input=prompt.sent, tool_responses=tools, llm_responses=llm))
    return turns


def _calls_of(cell: CellResult, failing: PromptResult, notes: list[str]) -> list[CallRecord]:
    """The calls of the failing invocation (``RUN.PROMPT``)."""
    of_run = [p for p in cell.prompts if p.run == failing.run]
    invocation = f"{failing.run}.{of_run.index(failing)}"
    own = [c for c in cell.calls if c.invocation == invocation]
    if own or not cell.calls:
        return own
    unattributed = [c for c in cell.calls if not c.invocation]
    if unattributed and len(cell.prompts) == 1:
        return unattributed
    notes.append("its calls could not be told apart by invocation: none exported")
    return []


def _bounded(calls: Iterable[CallRecord]) -> list[str]:
    """A note per tool response the bounds of ``results.json`` cut or dropped: the session
    would serve the agent a body it never got."""
    notes = []
    seen: dict[str, int] = {}
    for call in calls:
        name = call.tool or call.url
        seen[name] = n = seen.get(name, 0) + 1
        what = f"the response of the {ordinal(n)} call to {name}"
        if call.response is not None and was_cut(call.response):
            notes.append(
                f"{what} was cut to {BODY_CHARS:,} characters in results.json "
                "(docs/results.md): complete it in the session by hand"
            )
        elif call.response is None and call.status is not None:
            notes.append(
                f"{what} was not kept (a run holds {RUN_BODY_CHARS // 2**20} MiB of bodies at "
                "once, docs/results.md): add it to the session by hand"
            )
    return notes


def _mcp_listing(call: CallRecord) -> bool:
    """A ``tools/list`` of an MCP server a ``tool_removed`` fault edited: proof, not a call."""
    return (call.tool or "").endswith(f".{mcp.TOOLS_LIST}")


def _tool_response(call: CallRecord) -> ToolResponse:
    recorded = mcp.recorded_call(call.request, call.response)
    if recorded is not None:  # an MCP tool: its result, as the replayed server serves it
        status, value, arguments = recorded
        return ToolResponse(
            tool=call.tool or call.url,
            status=status,
            response=value,
            latency_ms=round(call.latency_ms),
            arguments=arguments,
            fault=_faulted(call, "tool_faults["),
        )
    status = call.status if call.status is not None else DROPPED_STATUS
    return ToolResponse(
        tool=call.tool or call.url,
        status=status,
        response=_value(call.response),
        latency_ms=round(call.latency_ms),
        arguments=_value(call.request),
        fault=_faulted(call, "tool_faults["),
    )


def _faulted(call: CallRecord, prefix: str) -> bool:
    """Whether a tool (``tool_faults[``) or LLM (``llm_faults[``) fault answered ``call``."""
    return any(label.startswith(prefix) for label in call.fired)


def _llm_reply(call: CallRecord) -> LlmReply | None:
    status = call.status if call.status is not None else DROPPED_STATUS
    fault = _faulted(call, "llm_faults[")
    if not 200 <= status < 300:
        return LlmReply(
            status=status,
            content=call.response or "",
            latency_ms=round(call.latency_ms),
            fault=fault,
        )
    if call.response is None:
        return None
    text = reply_text(call.response)
    if text is None:
        return None
    return LlmReply(content=text, latency_ms=round(call.latency_ms), fault=fault)


def _value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def reply_text(body: str) -> str | None:
    """The text of an LLM reply body: OpenAI chat completions, completions or Responses, an
    Anthropic message — whole, or streamed as server-sent events — or a python agent.llm's
    text; None when it is none of them."""
    if body.startswith(("data:", "event:")):
        return _streamed_text(body)
    value = _value(body)
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        first = choices[0]
        message = first.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return str(message["content"])
        if isinstance(first.get("text"), str):
            return str(first["text"])
    blocks = value.get("content")
    if isinstance(blocks, list):
        return _texts(blocks)
    output = value.get("output")
    if isinstance(output, list):
        parts = [i.get("content") for i in output if isinstance(i, dict)]
        return _texts([b for p in parts if isinstance(p, list) for b in p])
    return None


def _streamed_text(body: str) -> str | None:
    """The text of an SSE reply: OpenAI chat and completion chunks, Responses text deltas,
    Anthropic content block deltas."""
    parts: list[str] = []
    for line in body.splitlines():
        if not line.startswith("data:"):
            continue
        event = _value(line[5:].strip())
        if not isinstance(event, dict):
            continue
        choices = event.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            delta = choices[0].get("delta")
            text = delta.get("content") if isinstance(delta, dict) else choices[0].get("text")
        elif event.get("type") == "content_block_delta":
            delta = event.get("delta")
            text = delta.get("text") if isinstance(delta, dict) else None
        elif event.get("type") == "response.output_text.delta":
            text = event.get("delta")
        else:
            text = None
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts) if parts else None


def _texts(blocks: Sequence[Any]) -> str | None:
    texts = [
        str(b["text"]) for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
    ]
    return "".join(texts) if texts else None


def _slug(text: str) -> str:
    return _SLUG.sub("-", text).strip("-")[:120] or "session"
