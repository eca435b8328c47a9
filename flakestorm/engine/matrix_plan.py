"""Config -> cells (pure).

A contract run is a matrix: every invariant under every scenario of ``chaos_matrix``, a swept
scenario standing for one scenario per value (:mod:`flakestorm.meaning.sweeps`). Each
(invariant × scenario) pair is a :class:`Cell`, listed invariant-major in config order; that
order is the order of every report, whatever order cells finish in.

A tool fault on an MCP tool is named by its server and its tool (SPEC §11): with one
``proxy.mcp`` server, a fault written ``tool: get_quote`` that names no HTTP tool route (nor, for
a python agent, a tool it wraps) is that server's ``quotes.get_quote`` in the plan
(:func:`mcp_server_of`), so its label — ``tool_faults[0] error(503) on quotes.get_quote`` — and
every report name both. With several servers, ``SERVER.TOOL`` says which.

A golden prompt that is a conversation (SPEC §12) stands in a cell's ``prompts`` as its turns,
in order, each with its :class:`Turn` in ``turns``: every turn is one invocation the executor
sends, attributes and judges as it does a prompt, the turns of a conversation in one session.
A ``behavior_unchanged`` cell's ``auto`` baseline of a turn is that turn's reply in the same
conversation sent without chaos in a session of its own (:data:`Baseline`), not the turn's
text sent alone ("Which of the two is higher?" means nothing without the turns before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flakestorm.config import (
    AgentType,
    Chaos,
    Config,
    Contract,
    ContractInvariant,
    Conversation,
    GoldenPrompt,
    InvariantType,
    Scenario,
    ToolFault,
    checks_turn,
)
from flakestorm.errors import UsageError
from flakestorm.meaning.sweeps import expanded_matrix, sweeps_of

if TYPE_CHECKING:
    from flakestorm.results.sweeps import SweepInfo

Baseline = str | tuple[str, ...]
"""What ``auto`` baselines are the chaos-free answers to: a one-message prompt, or a
conversation's turns, sent in order in one session (each turn's reply its own baseline)."""

BaselineKey = str | tuple[tuple[str, ...], int]
"""Which baseline reply a prompt of a cell is compared with: a one-message prompt's, or turn
``N`` of its conversation's (``(turns, N)``)."""


def baseline_sends(baseline: Baseline) -> tuple[tuple[BaselineKey, str], ...]:
    """What a baseline sends, in order, each with the key its reply is kept under."""
    if isinstance(baseline, str):
        return ((baseline, baseline),)
    return tuple(((baseline, n), text) for n, text in enumerate(baseline, 1))


@dataclass(frozen=True)
class Turn:
    """Where a prompt of a cell stands in a conversation."""

    conversation: int
    """The index of the golden prompt it is a turn of."""
    number: int
    """1-based."""
    of: int
    """How many turns the conversation has."""

    @property
    def first(self) -> bool:
        return self.number == 1


@dataclass(frozen=True)
class Cell:
    """One (invariant × scenario) pair: the unit that passes or fails."""

    index: int
    invariant: ContractInvariant
    scenario: Scenario
    prompts: tuple[str, ...]
    """The invariant's probes, or else the golden prompts (a conversation's turns each)."""
    turns: tuple[Turn | None, ...] = ()
    """Per prompt, its turn in a conversation (None: a one-message prompt); empty: none is."""

    @property
    def id(self) -> str:
        return f"{self.invariant.id}[{self.scenario.name}]"

    def turn(self, index: int) -> Turn | None:
        """The turn prompt ``index`` is, or None for a one-message prompt."""
        return self.turns[index] if self.turns else None

    def checks(self, index: int) -> bool:
        """Whether the invariant checks prompt ``index`` (``turn: last | every | N``)."""
        turn = self.turn(index)
        if turn is None:
            return True
        return checks_turn(self.invariant.turn, turn.number, turn.of)

    def invocation(self, run: int, index: int) -> str:
        """The invocation id of prompt ``index`` in run ``run``: ``CELL#RUN.PROMPT``, and for
        a conversation's turn ``CELL#RUN.PROMPT.TURN`` (so faults scoped to ``turns`` are
        decided by it)."""
        turn = self.turn(index)
        head = f"{self.id}#{run}.{index}"
        return head if turn is None else f"{head}.{turn.number}"

    def session_key(self, run: int, index: int) -> str:
        """What prompt ``index``'s session id derives from: the cell's run (``CELL#RUN``), and
        for a conversation's turn, its conversation's own (``CELL#RUN/cN``)."""
        turn = self.turn(index)
        head = f"{self.id}#{run}"
        return head if turn is None else f"{head}/c{turn.conversation}"

    def baseline_of(self, index: int) -> Baseline:
        """What prompt ``index``'s baseline is an answer in: the prompt, or its conversation."""
        turn = self.turn(index)
        if turn is None:
            return self.prompts[index]
        start = index - turn.number + 1
        return self.prompts[start : start + turn.of]

    def baseline_key(self, index: int) -> BaselineKey:
        """Which baseline reply prompt ``index`` is compared with (:data:`BaselineKey`)."""
        turn = self.turn(index)
        if turn is None:
            return self.prompts[index]
        conversation = self.baseline_of(index)
        assert isinstance(conversation, tuple)
        return conversation, turn.number

    @property
    def applicable(self) -> bool:
        """Whether the invariant's ``when`` applies to this scenario (else the cell is skipped)."""
        return self.invariant.when.applies(self.scenario)

    @property
    def needs_baseline(self) -> bool:
        inv = self.invariant
        return inv.type is InvariantType.BEHAVIOR_UNCHANGED and (inv.baseline or "auto") == "auto"


@dataclass(frozen=True)
class MatrixPlan:
    """The cells of one contract, in report order."""

    contract: Contract
    cells: tuple[Cell, ...]
    scenarios: tuple[Scenario, ...]
    """Every scenario of the contract, sweeps expanded, in config order (the objects the cells
    hold)."""

    @property
    def sweeps(self) -> tuple[SweepInfo, ...]:
        return sweeps_of(self.contract)

    @property
    def baselines(self) -> tuple[Baseline, ...]:
        """Distinct prompts and conversations whose chaos-free answers a
        ``behavior_unchanged`` cell needs."""
        seen: dict[Baseline, None] = {}
        for cell in self.cells:
            if cell.applicable and cell.needs_baseline:
                seen.update(dict.fromkeys(cell.baseline_of(i) for i in range(len(cell.prompts))))
        return tuple(seen)

    @property
    def baseline_invocations(self) -> int:
        """How many invocations the baselines take (a conversation: one per turn)."""
        return sum(1 if isinstance(b, str) else len(b) for b in self.baselines)

    @property
    def watched(self) -> tuple[str, ...]:
        """The ids of the invariants judged on calls (SPEC §15): with any, every scenario's
        calls are recorded per invocation, as a chaos scenario's are."""
        return tuple(i.id for i in self.contract.invariants if i.type.reads_calls)

    def recorded(self, scenario: Scenario) -> bool:
        """Whether ``scenario``'s calls must be recorded per cell: its faults travel with them,
        or an invariant counts them."""
        return scenario.needs_delivery or bool(self.watched)

    @property
    def compared_with(self) -> str | None:
        """The scenario ``max_amplification`` compares with — the first without faults — when
        an invariant is one: it runs before the others (None otherwise)."""
        if not any(i.type is InvariantType.MAX_AMPLIFICATION for i in self.contract.invariants):
            return None
        return next((s.name for s in self.scenarios if not s.has_chaos), None)


def flatten(prompts: Sequence[GoldenPrompt]) -> tuple[tuple[str, ...], tuple[Turn | None, ...]]:
    """Golden prompts as a cell sends them: every turn of a conversation a prompt of its own,
    with its :class:`Turn` (no turns at all when none is a conversation)."""
    texts: list[str] = []
    turns: list[Turn | None] = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, Conversation):
            n = len(prompt.turns)
            texts.extend(prompt.turns)
            turns.extend(Turn(i, k, n) for k in range(1, n + 1))
        else:
            texts.append(prompt)
            turns.append(None)
    return tuple(texts), (tuple(turns) if any(t is not None for t in turns) else ())


def mcp_server_of(config: Config) -> McpServer | None:
    """The MCP server a tool fault's bare tool name belongs to when it names no other tool:
    the one ``proxy.mcp`` server, for an http agent or a python agent that wraps no tools
    (None otherwise: several servers, none, or a python agent's tools)."""
    proxy, agent = config.proxy, config.agent
    if proxy is None or len(proxy.mcp) != 1:
        return None
    if agent.type is AgentType.PYTHON and (agent.tools or agent.tool_registry):
        return None
    (name,) = proxy.mcp
    return McpServer(name, frozenset(proxy.tools))


@dataclass(frozen=True)
class McpServer:
    """The one MCP server of a run, and the HTTP tool routes beside it."""

    name: str
    http_tools: frozenset[str]

    def qualified(self, fault: ToolFault) -> ToolFault:
        """``fault`` naming its tool ``SERVER.TOOL`` when its bare name can only be this
        server's tool."""
        tool = fault.tool
        if (
            fault.match_url
            or tool == "*"
            or tool in self.http_tools
            or tool.startswith(f"{self.name}.")
        ):
            return fault
        return fault.model_copy(update={"tool": f"{self.name}.{tool}"})

    def scenario(self, scenario: Scenario) -> Scenario:
        faults = [self.qualified(f) for f in scenario.tool_faults]
        if all(a is b for a, b in zip(faults, scenario.tool_faults, strict=True)):
            return scenario
        return scenario.model_copy(update={"tool_faults": faults})


def plan_for(config: Config, contract: Contract) -> MatrixPlan:
    """The plan a run makes of ``contract`` (the config's own, or the chaos phase's): over the
    config's golden prompts, the faults on its one MCP server's tools naming the server
    (:func:`mcp_server_of`). The phases and ``validate`` plan through it, so they agree."""
    return build_plan(contract, config.golden_prompts, mcp_server_of(config))


def build_plan(
    contract: Contract,
    golden_prompts: Sequence[GoldenPrompt],
    mcp_server: McpServer | None = None,
) -> MatrixPlan:
    """Expand a contract into its cells (invariant-major, config order); with ``mcp_server``
    (:func:`mcp_server_of`), the tool faults on its tools name it."""
    cells: list[Cell] = []
    scenarios = expanded_matrix(contract)
    if mcp_server is not None:
        scenarios = [mcp_server.scenario(s) for s in scenarios]
    for invariant in contract.invariants:
        prompts, turns = flatten(invariant.probes or golden_prompts)
        if not prompts:
            raise UsageError(
                f"invariant {invariant.id!r} has no prompts to send: "
                "add golden_prompts, or probes to the invariant"
            )
        for scenario in scenarios:
            cells.append(Cell(len(cells), invariant, scenario, prompts, turns))
    return MatrixPlan(contract, tuple(cells), tuple(scenarios))


CHAOS_SCENARIO = "chaos"
"""The chaos-only phase's one scenario, holding the top-level faults."""


def chaos_contract(config: Config, profile: Chaos | None = None) -> Contract:
    """The contract the chaos-only phase runs: top-level invariants × the chaos scenario."""
    chaos = profile or config.chaos or Chaos()
    invariants = config.top_level_invariants()
    scenario = {
        "name": CHAOS_SCENARIO,
        "tool_faults": chaos.tool_faults,
        "llm_faults": chaos.llm_faults,
        "context_attacks": chaos.context_attacks,
    }
    return Contract.model_validate(
        {"name": CHAOS_SCENARIO, "invariants": invariants, "chaos_matrix": [scenario]}
    )
