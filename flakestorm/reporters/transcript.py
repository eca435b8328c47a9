"""A failed cell's conversations turn by turn (SPEC §12), as every report shows them: for each
conversation with a failing turn, each turn's message, the reply, the calls the agent made
and the faults that fired on that turn, and which turn failed the invariant.

Pure and unescaped: :func:`transcript` gives the turns as data (from a cell's ``prompts``, whose
``conversation`` and ``turn`` say where each stands, and its ``calls``, whose ``invocation``
``RUN.PROMPT.TURN`` names the turn that made them); :func:`turn_line` words one turn as plain
text for the formats that print lines. Each renderer escapes what it shows for its format.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from flakestorm.results.model import CallRecord, CellResult, PromptResult
from flakestorm.results.scenarios import declaration_order

MAX_CONVERSATIONS = 2
"""The most conversations of one cell a report shows turn by turn."""


@dataclass(frozen=True)
class TurnShown:
    """One turn of a conversation as a report shows it."""

    conversation: int
    run: int
    number: int
    of: int
    prompt: PromptResult
    calls: tuple[CallRecord, ...]

    @property
    def failed(self) -> bool:
        """Its verdict failed the cell (a turn ``when`` spared was not judged)."""
        return not self.prompt.passed and self.prompt.checked

    @property
    def fired(self) -> tuple[str, ...]:
        """The faults that fired on this turn, in the order the scenario declares them."""
        return declaration_order(label for call in self.calls for label in call.fired)

    @property
    def reply(self) -> str:
        """The reply, or why there was none."""
        p = self.prompt
        if p.output is not None:
            return p.output
        return f"no reply: {p.error or 'error'}: {p.error_message}"

    @property
    def verdict(self) -> str:
        """``FAILED: reason``, ``held``, or ``not checked``."""
        if self.failed:
            return f"FAILED: {self.prompt.reason}"
        if not self.prompt.checked:
            return "not checked"
        return "held"


@dataclass(frozen=True)
class Conversation:
    """One conversation of a cell's run, turn by turn."""

    index: int
    run: int
    turns: tuple[TurnShown, ...]

    @property
    def title(self) -> str:
        failed = [t.number for t in self.turns if t.failed]
        where = ", ".join(map(str, failed))
        s = "s" if len(failed) > 1 else ""
        return (
            f"conversation (golden prompt {self.index + 1}, run {self.run + 1}), "
            f"{len(self.turns)} turns: "
            f"turn{s} {where} failed"
        )


def transcript(cell: CellResult, limit: int = MAX_CONVERSATIONS) -> tuple[Conversation, ...]:
    """The conversations of ``cell`` with a failing turn, each turn by turn (at most
    ``limit``); none for a cell without conversations."""
    if not any(p.turn is not None for p in cell.prompts):
        return ()
    calls: dict[str, list[CallRecord]] = {}
    for call in cell.calls:
        calls.setdefault(call.invocation, []).append(call)
    # each prompt of a run is the invocation ``RUN.PROMPT`` in the order it was sent, a
    # one-message prompt included; a turn judged by several invariants (a replayed
    # conversation's session) is one turn, shown by its first failed verdict
    position: dict[int, int] = {}
    turns_of: dict[tuple[int, int, int], TurnShown] = {}
    for prompt in cell.prompts:
        if prompt.turn is None or prompt.conversation is None:
            position[prompt.run] = position.get(prompt.run, 0) + 1
            continue
        key = (prompt.run, prompt.conversation, prompt.turn)
        if key in turns_of:
            if not turns_of[key].failed:
                turns_of[key] = dataclasses.replace(turns_of[key], prompt=prompt)
            continue
        index = position.get(prompt.run, 0)
        position[prompt.run] = index + 1
        made = calls.get(f"{prompt.run}.{index}.{prompt.turn}", [])
        turns_of[key] = TurnShown(
            prompt.conversation, prompt.run, prompt.turn, 0, prompt, tuple(made)
        )
    grouped: dict[tuple[int, int], list[TurnShown]] = {}
    for (run, conversation, _), shown in turns_of.items():
        grouped.setdefault((run, conversation), []).append(shown)
    out = []
    for (run, conversation), turns in grouped.items():
        if not any(t.failed for t in turns):
            continue
        of = len(turns)
        whole = tuple(
            TurnShown(t.conversation, t.run, t.number, of, t.prompt, t.calls) for t in turns
        )
        out.append(Conversation(conversation, run, whole))
        if len(out) == limit:
            break
    return tuple(out)


def call_text(call: CallRecord) -> str:
    """``tool quotes 503`` (``llm`` for the LLM; ``dropped`` without a status)."""
    target = call.tool or call.target
    status = "dropped" if call.status is None else str(call.status)
    return f"{call.target} {target} {status}" if call.tool else f"{target} {status}"


def turn_line(turn: TurnShown, chars: int = 200) -> str:
    """One turn as one plain line: ``turn 2/3 FAILED: reason | sent: … | reply: … | calls:
    tool quotes 503 | fired: …`` (unescaped: the caller escapes it)."""
    parts = [
        f"turn {turn.number}/{turn.of} {turn.verdict}",
        f"sent: {_cut(turn.prompt.sent, chars)}",
        f"reply: {_cut(turn.reply, chars)}",
        "calls: " + (", ".join(call_text(c) for c in turn.calls) or "none"),
    ]
    if turn.fired:
        parts.append("fired: " + ", ".join(turn.fired))
    return " | ".join(parts)


def compact(conversation: Conversation) -> str:
    """``turns: 1 ✓ · 2 ✗ (tool_faults[0] error(503) on quotes) · 3 ✓``: one line."""
    marks = []
    for turn in conversation.turns:
        mark = "✗" if turn.failed else "✓" if turn.prompt.checked else "·"
        fired = f" ({', '.join(turn.fired)})" if turn.fired else ""
        marks.append(f"{turn.number} {mark}{fired}")
    return "turns: " + " · ".join(marks)


@dataclass(frozen=True)
class TurnRow:
    """A turn as a table row, each cell escaped for its format."""

    conversation: str
    turn: str
    failed: bool
    verdict: str
    sent: str
    reply: str
    calls: str
    fired: str


def rows(cell: CellResult, escape: Callable[[str, int], str]) -> tuple[TurnRow, ...]:
    """The turns of :func:`transcript` as table rows, each text through ``escape(text,
    limit)`` (the format's own)."""
    return tuple(
        TurnRow(
            conversation=escape(conversation.title, 200),
            turn=f"{turn.number}/{turn.of}",
            failed=turn.failed,
            verdict=escape(turn.verdict, 300),
            sent=escape(turn.prompt.sent, 300),
            reply=escape(turn.reply, 300),
            calls=escape(", ".join(call_text(c) for c in turn.calls) or "none", 300),
            fired=escape(", ".join(turn.fired) or "none", 300),
        )
        for conversation in transcript(cell)
        for turn in conversation.turns
    )


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1] + "…"
