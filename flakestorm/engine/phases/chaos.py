"""The chaos-only phase: the golden prompts under the top-level ``chaos`` (SPEC §2.4, §5).

It runs as a one-scenario contract — the top-level ``invariants`` (or, when there are none,
``completes`` and ``output_not_empty``) × one scenario named ``chaos`` holding the top-level
faults (or a built-in profile's) — so it gets the same fault delivery and proof as contract
cells. Its score is different: the pass rate of the golden prompts, a prompt passing when
every applicable invariant held for it.
"""

from __future__ import annotations

from flakestorm.config import Config, Severity
from flakestorm.engine.matrix_plan import MatrixPlan, chaos_contract, plan_for
from flakestorm.engine.phases.matrix import MatrixPhase, dealt
from flakestorm.engine.phases.phase import PhaseName, PhaseRequest
from flakestorm.errors import UsageError
from flakestorm.loader import LoadedConfig, load_profile
from flakestorm.results.model import PhaseOutcome, PhaseScore, Status
from flakestorm.results.scoring import judged, score_cells


class ChaosPhase(MatrixPhase):
    kind = PhaseName.CHAOS
    invariants_at = ("invariants",)

    def plan(self, loaded: LoadedConfig, request: PhaseRequest) -> MatrixPlan:
        config = loaded.config
        if not config.golden_prompts:
            raise UsageError("the chaos phase sends the golden prompts: add `golden_prompts`")
        profile = load_profile(request.chaos_profile) if request.chaos_profile else None
        if profile is None and config.chaos is None:
            raise UsageError(
                f"{loaded.path.name} has no `chaos` section: add one, or pick a built-in "
                "profile with --chaos-profile"
            )
        contract = chaos_contract(config, profile)
        plan = plan_for(config, contract)
        return dealt(plan, request)

    def score(self, outcome: PhaseOutcome, config: Config) -> PhaseScore:
        return score_prompts(outcome, config.advanced.effective_min_pass)


def score_prompts(outcome: PhaseOutcome, min_pass: int = 1) -> PhaseScore:
    """The chaos phase's score of ``outcome``: the pass rate of its prompts (0–100).

    A prompt passes when every scored cell judged it and passed it (in at least ``min_pass``
    of the repeated runs, like a cell); a cell that errored fails every prompt. Critical
    failures keep the contract rule: any failed critical cell fails.
    """
    prompts: dict[str, bool] = {}
    for cell in outcome.cells:
        if not cell.status.scored:
            continue
        if cell.status is Status.ERRORED:
            for p in cell.prompts or ():
                prompts[p.prompt] = False
            if not cell.prompts:
                prompts["(errored)"] = False
            continue
        held: dict[tuple[str, int], bool] = {}  # (prompt, run) -> held in that run
        for p in cell.prompts:
            held[(p.prompt, p.run)] = held.get((p.prompt, p.run), True) and p.passed
        runs_held: dict[str, int] = {}
        for (prompt, _), ok in held.items():
            runs_held[prompt] = runs_held.get(prompt, 0) + ok
        for prompt, n in runs_held.items():
            prompts[prompt] = prompts.get(prompt, True) and n >= min_pass
    passed = sum(prompts.values())
    score = round(100.0 * passed / len(prompts), 2) if prompts else None
    critical = tuple(
        c.id
        for c in outcome.cells
        if c.severity == Severity.CRITICAL.value and c.status in (Status.FAILED, Status.ERRORED)
    )
    cells = score_cells(outcome.cells).counts
    counts = dict(cells) | {"prompts": len(prompts), "prompts_passed": passed}
    summary = f"{passed} of {len(prompts)} prompts passed"
    return judged(
        PhaseScore(
            score=score,
            passed=not critical,
            critical_failures=critical,
            counts=counts,
            summary=summary,
        )
    )
