"""What a contract run will do, counted before it runs (``flakestorm validate``), by the rules
:mod:`flakestorm.engine.phases.matrix` runs it with; light to import (no engine), so ``validate``
starts fast."""

from __future__ import annotations

from dataclasses import dataclass

from flakestorm.config import AgentType, Config, InvariantType, turns_of
from flakestorm.engine.matrix_plan import MatrixPlan


@dataclass(frozen=True)
class MatrixCount:
    """What running a matrix will do, counted before it runs."""

    invariants: int
    scenarios: int
    cells: int
    skipped: int
    prompt_runs: int
    """Invocations for the cells, before repeat."""
    repeat: int
    baselines: int
    detection: int
    """The stateful check's invocations."""
    probe: int = 0
    """The forwarding probe's invocation."""
    learns: bool = False
    """Whether the run learns what attribution the agent forwards before the matrix
    (:func:`learns_attribution`)."""

    @property
    def invocations(self) -> int:
        return self.prompt_runs * self.repeat + self.baselines + self.detection + self.probe


def stateful_check(first: bool, isolated: bool) -> bool:
    """Whether a matrix sends the first prompt twice without chaos to detect a stateful agent
    (SPEC §5): as the run's first phase, its cells not isolated (no reset, no session)."""
    return first and not isolated


def learns_attribution(chaos: bool, exact_attribution: bool, reset: bool) -> bool:
    """Whether a matrix must learn what attribution the agent forwards: some scenario's faults
    travel with its calls, or an invariant counts them (``chaos``), and the channel cannot
    attribute a call to its cell by itself (the proxy, not the wrappers), nor does a reset
    before each cell (cells then run one at a time, each call attributed to the cell declared
    active)."""
    return chaos and not exact_attribution and not reset


def scenarios_fly(exact_attribution: bool, forwards: bool | None, reset: bool) -> bool | None:
    """Whether a matrix's scenarios are in flight together (SPEC §9): never with a reset
    before each cell (each call is put down to the cell declared active); always when the
    channel attributes each call itself (the wrappers); else when the agent forwards
    attribution (``forwards``; None before the run's forwarding probe has learned it)."""
    if reset:
        return False
    return True if exact_attribution else forwards


def forwarding_probe(learns: bool, isolated: bool, baselines: bool) -> bool:
    """Whether a matrix sends one chaos-free call to learn what attribution the agent forwards
    (``learns``: :func:`learns_attribution`): when no call before the matrix shows it already
    (the stateful check's, when cells are not isolated; the baselines')."""
    return learns and isolated and not baselines


def count_invocations(
    plan: MatrixPlan,
    config: Config,
    first: bool = True,
    sessions: bool | None = None,
    exact_attribution: bool | None = None,
) -> MatrixCount:
    """The invocations :func:`run_matrix` makes for ``plan`` (``first``: as the run's first
    phase), by its rules (:func:`stateful_check`, :func:`forwarding_probe`). ``sessions``:
    whether the agent keeps a session per cell (:func:`flakestorm.agents.source.sessions_of`;
    by default ``agent.session``); ``exact_attribution``: whether the run's channel attributes
    every call itself (by default: a python agent's wrappers do)."""
    keeps = config.agent.session is not None if sessions is None else sessions
    isolated = keeps or bool(config.agent.reset_endpoint or config.agent.reset_function)
    if exact_attribution is None:
        exact_attribution = config.agent.type is not AgentType.HTTP
    applicable = [c for c in plan.cells if c.applicable]
    baselines = plan.baseline_invocations
    chaos = any(plan.recorded(s) for s in plan.scenarios)
    reset = not keeps and bool(config.agent.reset_endpoint or config.agent.reset_function)
    learns = learns_attribution(chaos, exact_attribution, reset)
    probe = forwarding_probe(learns, isolated, bool(baselines))
    return MatrixCount(
        invariants=len(plan.contract.invariants),
        scenarios=len(plan.scenarios),
        cells=len(plan.cells),
        skipped=len(plan.cells) - len(applicable),
        prompt_runs=sum(len(c.prompts) for c in applicable),
        repeat=config.advanced.repeat,
        baselines=baselines,
        detection=2 if stateful_check(first, isolated) else 0,
        probe=int(probe),
        learns=learns,
    )


def mutation_sends(config: Config, sessions: bool) -> tuple[int, int]:
    """What one run of the mutation phase sends the agent: the requests of every mutation once
    (one each, after the turns of its conversation; an attack's real turns each one; a burst of
    identical requests each one) and the chaos-free baselines (for ``behavior_unchanged``
    ``auto``: each distinct golden prompt once, a conversation turn by turn)."""
    from flakestorm.mutations.generation import sends

    if config.mutations is None:
        return 0, 0
    needs = any(
        i.type is InvariantType.BEHAVIOR_UNCHANGED and (i.baseline or "auto") == "auto"
        for i in config.invariants
    )
    # a conversation's baseline is the conversation sent clean: one send per turn
    distinct = {tuple(turns_of(p)) for p in config.golden_prompts} if needs else set()
    return sends(config, sessions), sum(len(turns) for turns in distinct)
