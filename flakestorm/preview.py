"""What a run of a config would do, from the config alone (``flakestorm validate``): the
agent, the contract matrix, the invocations by the run's own rules, the configured phases.
Never a header value or a secret."""

from __future__ import annotations

from pathlib import Path

from flakestorm.config import AgentType, Config, InvariantType
from flakestorm.errors import Problem, UsageError
from flakestorm.loader.replays import resolve_sessions
from flakestorm.mutations.generation import left_out, slots
from flakestorm.mutations.registry import types_of
from flakestorm.phases.matrix import MatrixCount, count_invocations
from flakestorm.phases.phase import PhaseName
from flakestorm.plan import build_plan


def count_matrix(config: Config) -> MatrixCount | None:
    """Cells and agent invocations of a contract run, by the run's own rules; None without
    a contract (or with an invariant that has no prompt, which validation reports)."""
    if config.contract is None:
        return None
    try:
        plan = build_plan(config.contract, config.golden_prompts)
    except UsageError:
        return None
    return count_invocations(plan, config)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def without_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def notes(config: Config) -> list[str]:
    """What ``validate`` warns about beyond the file's problems: mutation types that ``count``
    leaves out (they are dealt round-robin)."""
    mutations = config.mutations
    skipped = left_out(config)
    if mutations is None or not skipped:
        return []
    names = ", ".join(k.value for k in skipped)
    return [
        f"mutations.count {mutations.count} per golden prompt leaves out "
        f"{_plural(len(skipped), 'type')}: {names} (types are dealt round-robin; raise count "
        "to at least the number of types, or list fewer types)"
    ]


def summary(config: Config, base_dir: Path = Path(".")) -> list[tuple[str, str]]:
    """(label, value) lines describing a valid config (its files relative to ``base_dir``);
    never a header value or a secret."""
    agent = config.agent
    if agent.type is AgentType.HTTP:
        target = f"http {agent.method} {without_userinfo(agent.endpoint)}"
    else:
        target = f"python {agent.endpoint}"
    lines = [("agent", target)]
    matrix = count_matrix(config)
    if config.contract is None or matrix is None:
        lines.append(("contract", "none (no `contract` section)"))
    else:
        lines.append(("contract", config.contract.name))
        skipped = f" ({matrix.skipped} skipped by `when`)" if matrix.skipped else ""
        lines.append(
            (
                "matrix",
                f"{_plural(matrix.invariants, 'invariant')} × "
                f"{_plural(matrix.scenarios, 'scenario')} = "
                f"{_plural(matrix.cells, 'cell')}{skipped}",
            )
        )
        parts = [f"{matrix.prompt_runs} prompts × repeat {matrix.repeat}"]
        if matrix.baselines:
            parts.append(f"{_plural(matrix.baselines, 'baseline')} (behavior_unchanged)")
        if matrix.detection:
            parts.append(f"{matrix.detection} stateful-detection (no reset configured)")
        if matrix.probe:
            parts.append("1 forwarding probe (does the agent forward the cell header?)")
        lines.append(("invocations", f"{matrix.invocations} per contract run: {' + '.join(parts)}"))
        budget = config.advanced.max_invocations
        if budget is not None and matrix.invocations > budget:
            lines.append(
                ("budget", f"advanced.max_invocations = {budget}: the run will stop early")
            )
    if config.mutations is not None:
        kinds = types_of(config)
        count = len(slots(config))
        baselines = (
            len(set(config.golden_prompts))
            if any(
                i.type is InvariantType.BEHAVIOR_UNCHANGED and (i.baseline or "auto") == "auto"
                for i in config.invariants
            )
            else 0
        )
        runs = count * config.advanced.repeat + baselines
        extra = f" + {_plural(baselines, 'baseline')}" if baselines else ""
        lines.append(
            (
                "mutations",
                f"{count} = {_plural(len(config.golden_prompts), 'prompt')} × "
                f"{config.mutations.count} over {_plural(len(kinds), 'type')} "
                f"({config.mutations.generator.value}); {runs} invocations: {count} × repeat "
                f"{config.advanced.repeat}{extra}",
            )
        )
    if config.replays is not None:
        sessions, _ = resolve_sessions(config, base_dir, lambda path, m: Problem("", 1, 1, "", m))
        responses = _plural(
            sum(len(s.session.tool_responses) for s in sessions), "recorded tool response"
        )
        lines.append(
            (
                "replays",
                f"{_plural(len(sessions), 'session')} ({responses}), one invocation each",
            )
        )
    phases = [name.value for name in PhaseName if name.configured(config)]
    lines.append(("phases", ", ".join(phases) if phases else "none configured"))
    return lines
