"""What a run of a config would do, from the config alone (``flakestorm validate``): the
agent, the contract matrix, the invocations by the run's own rules, the configured phases.
Never a header value or a secret."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flakestorm.chaos.faults.tool_modes import TOOL_MODES
from flakestorm.config import (
    AgentType,
    Config,
    JudgeExample,
    MutationGenerator,
    PhaseName,
    ToolFault,
    ToolFaultMode,
)
from flakestorm.config.vocabulary import TOOL_RESULT_ATTACKS
from flakestorm.engine.run_plan import (
    ONE_AT_A_TIME,
    UNLESS_ATTRIBUTED,
    RunPlan,
    plan_run,
)
from flakestorm.meaning.sweeps import sweeps_of
from flakestorm.redaction import masked_url, without_userinfo


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def llm_generator_state(config: Config, base_dir: Path) -> str | None:
    """What a run of the ``llm`` generator would find: its endpoint, its fallback, and how many
    of the answers it needs are cached and usable (read from the cache, no call made)."""
    mutations = config.mutations
    if mutations is None or mutations.generator is not MutationGenerator.LLM or not mutations.llm:
        return None
    from flakestorm.mutations.cache import cache_path, read_cache
    from flakestorm.mutations.generation import slots, writes
    from flakestorm.mutations.registry import unit
    from flakestorm.mutations.usability import unusable

    llm = mutations.llm
    needed = [(kind, prompt, variant) for _, prompt, kind, variant in slots(config) if writes(kind)]
    usable = stale = 0
    for kind, prompt, variant in needed:
        path = cache_path(base_dir / mutations.cache_dir, llm.model, kind, prompt, variant)
        answer = read_cache(path)
        if answer is None:
            continue
        if unusable(unit(kind), prompt, answer) is None:
            usable += 1
        else:
            stale += 1
    fallback = f"fallback: {llm.fallback.value}" if llm.fallback else "no fallback (exit 3)"
    cached = f"{usable} of {len(needed)} answers cached and usable"
    if stale:
        cached += f", {stale} cached answer(s) unusable (asked again)"
    return f"llm {llm.model} at {without_userinfo(llm.base_url)}; {fallback}; {cached}"


def summary(
    config: Config, base_dir: Path = Path("."), plan: RunPlan | None = None
) -> list[tuple[str, str]]:
    """(label, value) lines describing a valid config (its files relative to ``base_dir``)
    and its run ``plan`` (made here when not given); never a header value or a secret."""
    agent = config.agent
    if agent.type is AgentType.HTTP:
        target = f"http {agent.method} {without_userinfo(agent.endpoint)}"
    else:
        target = f"python {agent.endpoint}"
    plan = plan or plan_run(config, base_dir)
    lines = [("agent", target), ("channel", plan.channel.describe())]
    lines += _a2a_lines(config)
    lines += _contract_lines(config, plan)
    lines += _mutation_lines(config, base_dir, plan)
    lines += _replay_lines(config, plan)
    lines += _judge_lines(config, base_dir)
    phases = [name.value for name in PhaseName if name.configured(config)]
    lines.append(("phases", ", ".join(phases) if phases else "none configured"))
    if len(plan.phases) > 1 and plan.ci is not None:
        exact = "" if plan.ci.exact else " (at most: see validate --json)"
        lines.append(("ci", f"{plan.ci.invocations} invocations for every phase in one run{exact}"))
    return lines


@dataclass
class JudgeState:
    """A judge of the config's ``llm_judge`` invariants as ``validate`` sees it: what it is, how
    many invariants ask it, the examples it must agree with, and how many verdicts its cache
    already holds for them (None for ``mock``, which keeps none)."""

    judge: str
    invariants: int = 0
    examples: int = 0
    cached: int | None = None


def judge_states(config: Config, base_dir: Path) -> list[JudgeState]:
    """One :class:`JudgeState` per judge, read from the config and the cache (no call made)."""
    from flakestorm.checks.judge.which import judge_of, judged_invariants

    states: dict[str, JudgeState] = {}
    groups: dict[str, set[tuple[str, str, tuple[JudgeExample, ...]]]] = {}
    for item in judged_invariants(config):
        inv = item.invariant
        judge = judge_of(inv, config)
        if judge is None or inv.rubric is None:
            continue
        if isinstance(judge, str):
            label = "mock (built in, deterministic: nothing to cache)"
        else:
            label = f"{judge.model} at {masked_url(str(judge.base_url))}"
            groups.setdefault(label, set()).add(
                (judge.model, inv.rubric, tuple(inv.examples or ()))
            )
        state = states.setdefault(label, JudgeState(label))
        state.invariants += 1
        state.examples += len(inv.examples or ())
    if groups:  # the verdict cache is read only for a judge that has one
        from flakestorm.checks.judge import cache

        root = cache.cache_root(config, base_dir)
        for label, keys in groups.items():
            dirs = {cache.group_dir(root, *key) for key in keys}
            states[label].cached = sum(cache.count(group) for group in dirs)
    return list(states.values())


def _judge_lines(config: Config, base_dir: Path) -> list[tuple[str, str]]:
    lines = []
    for state in judge_states(config, base_dir):
        value = (
            f"{state.judge}: {_plural(state.invariants, 'invariant')}, {state.examples} "
            "example(s) to agree with"
        )
        if state.cached is not None:
            value += f", {state.cached} verdict(s) cached"
        lines.append(("judge", value))
    return lines


def _contract_lines(config: Config, plan: RunPlan) -> list[tuple[str, str]]:
    contract = plan.phases.get(PhaseName.CONTRACT.value)
    matrix = contract.matrix if contract is not None else None
    if config.contract is None or contract is None or matrix is None:
        return [("contract", "none (no `contract` section)")]
    skipped = f" ({matrix.skipped} skipped by `when`)" if matrix.skipped else ""
    lines = [
        ("contract", config.contract.name),
        (
            "matrix",
            f"{_plural(matrix.invariants, 'invariant')} × "
            f"{_plural(matrix.scenarios, 'scenario')} = "
            f"{_plural(matrix.cells, 'cell')}{skipped}",
        ),
    ]
    swept = sweeps_of(config.contract)
    if swept:
        values = "; ".join(
            f"{s.scenario}: {s.field} at {_plural(len(s.values), 'value')} ({', '.join(s.values)})"
            for s in swept
        )
        lines.append(("sweeps", values))
    parts = [f"{matrix.prompt_runs} prompts × repeat {matrix.repeat}"]
    if matrix.baselines:
        parts.append(f"{_plural(matrix.baselines, 'baseline')} (behavior_unchanged)")
    if matrix.detection:
        parts.append(f"{matrix.detection} stateful-detection (no reset configured)")
    if matrix.probe:
        parts.append("1 forwarding probe (does the agent forward the cell header?)")
    turns = " (each turn of a conversation one)" if config.conversations else ""
    lines.append(
        ("invocations", f"{matrix.invocations} per contract run{turns}: {' + '.join(parts)}")
    )
    budget = config.advanced.max_invocations
    if budget is not None and matrix.invocations > budget:
        lines.append(("budget", f"advanced.max_invocations = {budget}: the run will stop early"))
    serial = [s.name for s in contract.scenarios if s.runs == ONE_AT_A_TIME]
    unless = [s.name for s in contract.scenarios if s.runs == UNLESS_ATTRIBUTED]
    if serial or unless:
        groups = [", ".join(serial)] if serial else []
        if unless:
            groups.append(", ".join(unless) + " unless the agent forwards attribution")
        lines.append(("one at a time", "; ".join(groups) + " (validate --json says why)"))
    if contract.flight is not None:
        lines.append(("scenarios", f"{contract.flight.runs} (validate --json says why)"))
    lines += _conduct_lines(config)
    return lines


def a2a_agents(config: Config) -> list[dict[str, object]]:
    """Each downstream A2A agent (SPEC §17): its name, route and URL, and each fault and
    context attack on it — the scenario, the fault and what it acts on (``validate --json``'s
    ``a2a``)."""
    agents = config.proxy.a2a if config.proxy is not None else {}
    scenarios = config.contract.chaos_matrix if config.contract is not None else []
    return [
        {
            "name": name,
            "route": f"/a2a/{name}",
            "url": without_userinfo(url),
            "faults": [
                {
                    "scenario": scenario.name,
                    "fault": f"{fault.mode.value}{TOOL_MODES[fault.mode].detail(fault)}",
                    "acts_on": _acted_on(fault),
                }
                for scenario in scenarios
                for fault in scenario.tool_faults
                if fault.tool == name
            ]
            + [
                {
                    "scenario": scenario.name,
                    "fault": attack.type.value,
                    "acts_on": "the text of its answers",
                }
                for scenario in scenarios
                for attack in scenario.context_attacks
                if attack.tool == name and attack.type in TOOL_RESULT_ATTACKS
            ],
        }
        for name, url in agents.items()
    ]


def _a2a_lines(config: Config) -> list[tuple[str, str]]:
    """Each downstream A2A agent (SPEC §17), and what each fault on it acts on."""
    lines = []
    for agent in a2a_agents(config):
        faults = agent["faults"]
        assert isinstance(faults, list)
        acts = [f"{f['scenario']}: {f['fault']} on {f['acts_on']}" for f in faults]
        said = "; ".join(acts) if acts else "no fault acts on it"
        lines.append(("a2a", f"{agent['name']} at {agent['route']} -> {agent['url']}; {said}"))
    return lines


def _acted_on(fault: ToolFault) -> str:
    """What a fault on an A2A agent acts on: its card, its method's calls or every call."""
    if fault.mode is ToolFaultMode.CARD:
        return "every fetch of its card"
    calls = f"its {fault.method.value} calls" if fault.method else "every call"
    return calls + (f" (calls {fault.calls})" if fault.calls else "")


def _conduct_lines(config: Config) -> list[tuple[str, str]]:
    """What each of the contract's invariants on calls counts (SPEC §15)."""
    assert config.contract is not None
    watched = [i for i in config.contract.invariants if i.type.reads_calls]
    if not watched:
        return []
    from flakestorm.checks.conduct import counts

    calm = next((s.name for s in config.contract.chaos_matrix if not s.has_chaos), None)
    return [("counted", f"{i.id}: {counts(i, calm)}") for i in watched]


def _mutation_lines(config: Config, base_dir: Path, plan: RunPlan) -> list[tuple[str, str]]:
    counted = plan.phases.get(PhaseName.MUTATION.value)
    if config.mutations is None or counted is None:
        return []
    from flakestorm.mutations.registry import types_of

    kinds = types_of(config)
    sent, baselines = counted.sends, counted.baselines
    extra = f" + {_plural(baselines, 'baseline')}" if baselines else ""
    count = counted.cells
    per = f"{count}" if sent == count else f"{sent} requests (a burst's each, a turn's each)"
    lines = [
        (
            "mutations",
            f"{count} = {_plural(len(config.golden_prompts), 'prompt')} × "
            f"{config.mutations.count} over {_plural(len(kinds), 'type')} "
            f"({config.mutations.generator.value}); {counted.invocations} invocations: {per} × "
            f"repeat {config.advanced.repeat}{extra}",
        )
    ]
    generator = llm_generator_state(config, base_dir)
    if generator:
        lines.append(("generator", generator))
    return lines


def _replay_lines(config: Config, plan: RunPlan) -> list[tuple[str, str]]:
    counted = plan.phases.get(PhaseName.REPLAY.value)
    if config.replays is None or counted is None:
        return []
    responses = _plural(counted.recorded, "recorded tool response")
    return [
        (
            "replays",
            f"{_plural(counted.cells, 'session')} ({responses}), "
            f"{_plural(counted.invocations, 'invocation')} (one per session, a conversation's "
            "one per turn)",
        )
    ]
