"""The run's judges: which judge each ``llm_judge`` invariant asks (its ``judge``, else
``advanced.judge``, else the proxy's ``llm_upstream`` when that is ``mock``), the calibration
before the run, and the health line every report carries."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from flakestorm.checks.excerpts import excerpt
from flakestorm.checks.judge.cache import cache_root
from flakestorm.checks.judge.client import JudgeClient, Judgement
from flakestorm.checks.judge.which import Judged, judge_of
from flakestorm.config import Config, Invariant, Judge, JudgeExample, JudgeVerdict
from flakestorm.errors import HarnessError, InfrastructureError
from flakestorm.structure.paths import ConfigPath


class JudgeCalibrationError(InfrastructureError):
    """A judge disagreed with (or could not judge) an example of its invariant: the run stops
    before the agent is called (exit 3)."""

    cause = "the llm judge failed its calibration"

    def __init__(self, message: str, at: ConfigPath) -> None:
        super().__init__(message)
        self.at = at


class Judges:
    """One :class:`JudgeClient` per distinct judge of the run, made when first asked."""

    def __init__(self, config: Config, base_dir: Path, judged: Sequence[Judged] = ()) -> None:
        self._config = config
        self._root = cache_root(config, base_dir)
        self.judged = tuple(judged)
        """The ``llm_judge`` invariants the run checks (:meth:`calibrate` gives each its
        examples)."""
        self._clients: dict[Judge, JudgeClient] = {}
        self._resolved: dict[Judge | str | None, Judge | None] = {}
        """The judge an invariant's ``judge`` setting resolves to, resolved once."""
        self._lock = threading.Lock()

    def client(self, invariant: Invariant) -> JudgeClient:
        with self._lock:
            if invariant.judge not in self._resolved:
                self._resolved[invariant.judge] = judge_of(invariant, self._config)
            judge = self._resolved[invariant.judge]
        if judge is None:
            raise HarnessError(
                f"the llm_judge invariant {invariant.id or ''!r} has no judge: set `judge:` on "
                "it or advanced.judge"
            )
        with self._lock:  # cells ask from many threads: one client per judge (by value)
            if judge not in self._clients:
                self._clients[judge] = JudgeClient(judge, self._config.advanced.seed, self._root)
            return self._clients[judge]

    def judge(self, invariant: Invariant, output: str) -> Judgement:
        """The verdict of ``invariant``'s judge on ``output`` (HarnessError: none)."""
        assert invariant.rubric is not None
        return self.client(invariant).judge(invariant.rubric, invariant.examples or (), output)

    def calibrate(self) -> None:
        """Each example of each judged invariant judged (cached like any output); the first
        that does not get its verdict raises :class:`JudgeCalibrationError` naming it."""
        for item in self.judged:
            inv = item.invariant
            client = self.client(inv)
            examples = inv.examples or ()
            for i, example in enumerate(examples):
                at = (*item.at, "examples", i)
                name = f"the judge of invariant {inv.id!r} ({client.label})"
                assert inv.rubric is not None
                try:
                    judgement = client.judge(inv.rubric, examples, example.output, counted=False)
                except HarnessError as exc:
                    raise JudgeCalibrationError(
                        f"{name} could not judge example {i + 1}: {exc}", at
                    ) from exc
                client.health.examples += 1
                got = JudgeVerdict.PASS if judgement.answer.passed else JudgeVerdict.FAIL
                if got is not example.verdict:
                    kept = _not_kept(client, inv.rubric, examples, example.output, judgement)
                    raise JudgeCalibrationError(
                        f"{name} disagrees with its example {i + 1} "
                        f"(`{excerpt(example.output, 60)}`): expected {example.verdict.value}, "
                        f"it answered {got.value} ({excerpt(judgement.answer.reason, 120)}); "
                        f"{kept}; a judge that disagrees with its own examples judges nothing: "
                        "fix the rubric, the example or the judge",
                        at,
                    )
                client.health.agreed += 1

    def lines(self) -> list[str]:
        """One health line per judge that was asked anything."""
        out = []
        for client in self._clients.values():
            h = client.health
            calibration = (
                f"; calibration: {h.agreed} of {h.examples} example(s) agreed" if h.examples else ""
            )
            out.append(
                f"{client.label}: {h.verdicts} verdict(s) ({h.cached} cached), {h.retried} "
                f"retried, {h.unusable} unusable, {h.calls} call(s) made{calibration}"
            )
        return out

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


def _not_kept(
    client: JudgeClient,
    rubric: str,
    examples: Sequence[JudgeExample],
    output: str,
    judgement: Judgement,
) -> str:
    """A verdict that failed calibration is not kept, so a fixed judge is asked again: it is
    forgotten (removed from the cache when it came from there), and the sentence says so."""
    if client.endpoint is None:
        return "the mock judge keeps no cache"
    try:
        client.forget(rubric, examples, output)
    except OSError as exc:
        return (
            f"this answer could not be removed from the judge cache ({exc}): delete that file, "
            "or the next run reads the same answer"
        )
    if judgement.cached:
        return (
            "this answer came from the judge cache, where an earlier run kept it, and is "
            "removed from it: the next run asks the judge again"
        )
    return "this answer is not kept in the judge cache: the next run asks the judge again"
