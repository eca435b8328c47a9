"""The run's judges (``llm_judge``, SPEC §3): built once, calibrated against their invariants'
examples before the agent is called, their health reported after the run.

Which invariants are calibrated: those the run's phases check — the top-level ``invariants``
(the mutation and chaos phases), the contract's (the contract phase, and replayed sessions
that use it) and the contracts replayed sessions name in files of their own.
"""

from __future__ import annotations

from collections.abc import Mapping

from flakestorm.checks.invariants import Checker, build_checker
from flakestorm.checks.judge.which import Judged, judged_invariants
from flakestorm.config import InvariantType, PhaseName
from flakestorm.engine.phases.phase import PhasePlan
from flakestorm.errors import Problem
from flakestorm.loader import LoadedConfig
from flakestorm.structure.paths import format_path

_TOP_LEVEL = {PhaseName.MUTATION.value, PhaseName.CHAOS.value}


def run_checker(loaded: LoadedConfig, plans: Mapping[str, PhasePlan]) -> Checker:
    """The run's checker, with its judges (none asked anything yet) and the invariants they
    judge in the planned phases (:func:`judged_in`)."""
    judged = judged_in(loaded, plans)
    if not judged:  # nothing to judge: the judges' clients are not even imported
        return build_checker(loaded.config.advanced)
    from flakestorm.checks.judge.judges import Judges

    return build_checker(loaded.config.advanced, Judges(loaded.config, loaded.base_dir, judged))


def judged_in(loaded: LoadedConfig, plans: Mapping[str, PhasePlan]) -> list[Judged]:
    """The ``llm_judge`` invariants the planned phases check."""
    config = loaded.config
    out: list[Judged] = []
    for item in judged_invariants(config):
        top_level = item.at[0] == "invariants"
        if (top_level and _TOP_LEVEL & plans.keys()) or (not top_level and _contract(plans)):
            out.append(item)
    replay = plans.get(PhaseName.REPLAY.value)
    if replay is not None:  # a ReplayPlan: its sessions and the contracts they name
        seen = {id(config.contract)}
        for session in getattr(replay, "sessions", ()):
            if id(session.contract) in seen:
                continue
            seen.add(id(session.contract))
            out += [
                Judged(("replays",), inv)
                for inv in session.contract.invariants
                if inv.type is InvariantType.LLM_JUDGE
            ]
    return out


def _contract(plans: Mapping[str, PhasePlan]) -> bool:
    return PhaseName.CONTRACT.value in plans or PhaseName.REPLAY.value in plans


def calibrate(loaded: LoadedConfig, checker: Checker) -> None:
    """Every example of the invariants the run judges given to its judge; a judge that
    disagrees with one (or cannot judge it) raises :class:`JudgeCalibrationError` located at
    the example."""
    if checker.judges is None or not checker.judges.judged:
        return
    from flakestorm.checks.judge.judges import JudgeCalibrationError

    try:
        checker.judges.calibrate()
    except JudgeCalibrationError as exc:
        line = loaded.line_of(exc.at)
        field = format_path(exc.at)
        problem = Problem(loaded.path.name, line, 1, field, str(exc))
        raise JudgeCalibrationError(str(problem), exc.at) from exc


def health(checker: Checker) -> list[str]:
    """One line per judge the run asked: verdicts, cached, retried, unusable, calibration."""
    return checker.judges.lines() if checker.judges is not None else []
