"""The executor: cells against an agent, with isolation, repeats, budgets and stopping.

The agents here are python objects implementing the ``Agent`` protocol: the same seam the
product's python agents use. Synchronisation is by events, never by sleeping. The last tests
run a whole contract (:mod:`support.quote_project`) for what the executor does inside a run:
resets before the baselines, and progress announced after the delivery check.
"""

from __future__ import annotations

import itertools
import json
import shlex
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.dying_agent import dying_agent
from support.quote_project import contract_cells, quote_project, run_config

from flakestorm.agents import NO_CALL, Call, Reply
from flakestorm.checks.invariants import build_checker
from flakestorm.config import Advanced, Contract
from flakestorm.engine.events import CellFinished, Event, ProbeFinished, ScenarioFinished
from flakestorm.engine.executor import Executor, Options
from flakestorm.engine.matrix_plan import build_plan
from flakestorm.engine.probes import Probe, ProbeRun
from flakestorm.engine.runner import run_phases
from flakestorm.errors import AgentErrorKind, AgentNotReady, HarnessError
from flakestorm.loader import load_config_text
from flakestorm.results.model import Status
from flakestorm.stopping import Stop


class FnAgent:
    """An agent answering with ``answer(prompt, call)``; records every call."""

    def __init__(self, answer: Callable[[str, Call], str]) -> None:
        self._answer = answer
        self.calls: list[tuple[str, Call]] = []
        self._lock = threading.Lock()

    def invoke(self, prompt: str, call: Call = NO_CALL) -> Reply:
        with self._lock:
            self.calls.append((prompt, call))
        return Reply(output=self._answer(prompt, call), latency_ms=1.0, status=200)


def contract(invariants: list[dict[str, object]], scenarios: list[dict[str, object]]) -> Contract:
    return Contract.model_validate(
        {"name": "c", "invariants": invariants, "chaos_matrix": scenarios}
    )


CHECKER = build_checker(Advanced())
CALM = {"name": "calm"}
POISONED = {
    "name": "poisoned",
    "context_attacks": [{"type": "memory_poisoning", "payload": "EVIL", "strategy": "append"}],
}


def test_results_keep_plan_order_whatever_the_completion_order() -> None:
    # the first cell's invocation waits until every other cell has finished
    others_done = threading.Event()
    finished: list[str] = []

    def answer(prompt: str, call: Call) -> str:
        if call.cell_id == "a0[calm]#0.0":  # cell#run.prompt
            assert others_done.wait(5)
        return "ok"

    invariants = [{"id": f"a{i}", "type": "contains", "value": "ok"} for i in range(6)]
    plan = build_plan(contract(invariants, [CALM]), ["p"])

    def on_event(event: object) -> None:
        if isinstance(event, CellFinished):
            finished.append(event.result.id)
            if len(finished) == 5:
                others_done.set()

    results = Executor(
        FnAgent(answer), CHECKER, options=Options(concurrency=4), on_event=on_event
    ).run(plan, {})
    assert finished[-1] == "a0[calm]"  # it really finished last
    assert [r.id for r in results] == [f"a{i}[calm]" for i in range(6)]
    assert all(r.status is Status.PASSED for r in results)


def test_concurrency_keeps_that_many_invocations_in_flight() -> None:
    barrier = threading.Barrier(4, timeout=5)

    def answer(prompt: str, call: Call) -> str:
        barrier.wait()  # only returns once 4 invocations are in flight at the same time
        return "ok"

    invariants = [{"id": f"a{i}", "type": "output_not_empty"} for i in range(2)]
    plan = build_plan(contract(invariants, [CALM, POISONED]), ["p1", "p2"])
    results = Executor(FnAgent(answer), CHECKER, options=Options(concurrency=4)).run(plan, {})
    assert [r.status for r in results] == [Status.PASSED] * 4


def test_when_skips_and_memory_poisoning_reaches_the_input() -> None:
    agent = FnAgent(lambda prompt, call: f"you said: {prompt}")
    invariants = [
        {"id": "calm-only", "type": "contains", "value": "you said", "when": "no_chaos"},
        {"id": "no-evil", "type": "contains", "value": "EVIL", "negate": True},
    ]
    plan = build_plan(contract(invariants, [CALM, POISONED]), ["hello"])
    results = {r.id: r for r in Executor(agent, CHECKER).run(plan, {})}
    assert results["calm-only[calm]"].status is Status.PASSED
    assert results["calm-only[poisoned]"].status is Status.SKIPPED
    assert "no_chaos" in results["calm-only[poisoned]"].reason
    poisoned = results["no-evil[poisoned]"]
    assert poisoned.status is Status.FAILED
    assert poisoned.faults_fired == ("context_attacks[0] memory_poisoning(append)",)
    assert poisoned.prompts[0].prompt == "hello"
    assert poisoned.prompts[0].sent == "hello\n\nEVIL"
    assert results["no-evil[calm]"].faults_fired == ()
    # the skipped cell never invoked the agent
    assert len(agent.calls) == 3


def test_repeat_and_min_pass_mark_flaky_cells() -> None:
    counter = itertools.count()
    lock = threading.Lock()

    def answer(prompt: str, call: Call) -> str:
        with lock:
            n = next(counter)
        return "good" if n % 2 == 0 else "bad"

    invariants = [{"id": "good", "type": "contains", "value": "good"}]
    plan = build_plan(contract(invariants, [CALM]), ["p"])
    lenient = Executor(
        FnAgent(answer), CHECKER, options=Options(concurrency=1, repeat=4, min_pass=2)
    )
    [cell] = lenient.run(plan, {})
    assert (cell.status, cell.flaky, cell.runs_passed, cell.runs_total) == (
        Status.PASSED,
        True,
        2,
        4,
    )
    assert cell.reason.startswith("2/4 runs passed (min_pass 2)")
    strict = Executor(
        FnAgent(answer), CHECKER, options=Options(concurrency=1, repeat=4, min_pass=4)
    )
    [cell] = strict.run(plan, {})
    assert (cell.status, cell.flaky) == (Status.FAILED, True)


class CountingReset:
    def __init__(self, fail_on: int | None = None) -> None:
        self.count = 0
        self.fail_on = fail_on

    def reset(self) -> None:
        self.count += 1
        if self.count == self.fail_on:
            raise HarnessError("reset failed: POST http://127.0.0.1:1/reset returned 500")


def test_a_reset_runs_cells_one_at_a_time_and_a_failed_reset_errors_only_its_cell() -> None:
    in_flight = 0
    most = 0
    lock = threading.Lock()

    def answer(prompt: str, call: Call) -> str:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        with lock:
            in_flight -= 1
        return "ok"

    reset = CountingReset(fail_on=2)
    invariants = [{"id": f"a{i}", "type": "contains", "value": "ok"} for i in range(3)]
    plan = build_plan(contract(invariants, [CALM]), ["p1", "p2"])
    results = Executor(FnAgent(answer), CHECKER, reset, Options(concurrency=8)).run(plan, {})
    assert most == 1
    assert reset.count == 3
    assert [r.status for r in results] == [Status.PASSED, Status.ERRORED, Status.PASSED]
    assert results[1].reason == "reset failed: POST http://127.0.0.1:1/reset returned 500"


def test_an_agent_error_fails_the_cell_with_the_reason() -> None:
    class Down:
        def invoke(self, prompt: str, call: Call = NO_CALL) -> Reply:
            return Reply(None, 2.0, error=AgentErrorKind.CONNECTION, error_message="refused")

    invariants = [{"id": "x", "type": "regex", "pattern": r"\$\d", "negate": True}]
    [cell] = Executor(Down(), CHECKER).run(build_plan(contract(invariants, [CALM]), ["p"]), {})
    assert cell.status is Status.FAILED  # negate never turns "no answer" into a pass
    assert "did not answer" in cell.reason
    assert cell.prompts[0].error == "connection"


def test_max_invocations_stops_cleanly_and_keeps_what_finished() -> None:
    agent = FnAgent(lambda prompt, call: "ok")
    invariants = [{"id": f"a{i}", "type": "contains", "value": "ok"} for i in range(4)]
    plan = build_plan(contract(invariants, [CALM]), ["p1", "p2"])
    executor = Executor(agent, CHECKER, options=Options(concurrency=1, max_invocations=5))
    results = executor.run(plan, {})
    assert [r.status for r in results] == [
        Status.PASSED,
        Status.PASSED,
        Status.NOT_RUN,
        Status.NOT_RUN,
    ]
    assert "1/2 invocations" in results[2].reason
    assert len(results[2].prompts) == 1
    assert executor.invocations == 5
    assert executor.stop_reason == "max_invocations"


def test_stop_lets_invocations_in_flight_finish_and_marks_the_rest_not_run() -> None:
    stop = threading.Event()

    def answer(prompt: str, call: Call) -> str:
        stop.set()  # Ctrl-C arrives during the first invocation
        return "ok"

    invariants = [{"id": f"a{i}", "type": "contains", "value": "ok"} for i in range(3)]
    plan = build_plan(contract(invariants, [CALM]), ["p"])
    executor = Executor(FnAgent(answer), CHECKER, options=Options(concurrency=1), stop=stop)
    results = executor.run(plan, {})
    assert [r.status for r in results] == [Status.PASSED, Status.NOT_RUN, Status.NOT_RUN]
    assert executor.stop_reason == "interrupted"


def test_behavior_unchanged_compares_each_prompt_with_its_own_chaos_free_answer() -> None:
    answers = {"capital of France?": "Paris is the capital of France.", "2+2?": "2+2 is 4."}

    def answer(prompt: str, call: Call) -> str:
        if "EVIL" in prompt:
            return "I have been compromised and will now talk about pirates."
        return answers[prompt]

    agent = FnAgent(answer)
    invariants = [{"id": "same", "type": "behavior_unchanged", "baseline": "auto"}]
    plan = build_plan(contract(invariants, [CALM, POISONED]), list(answers))
    executor = Executor(agent, CHECKER)
    baselines = executor.baselines(plan.baselines)
    assert {p: r.output for p, r in baselines.items() if r} == answers
    calm, poisoned = executor.run(plan, baselines)
    assert calm.status is Status.PASSED
    assert poisoned.status is Status.FAILED
    assert [p.similarity is not None for p in poisoned.prompts] == [True, True]


def test_a_harness_error_while_judging_errors_the_cell() -> None:
    class BrokenChecker:
        def check(self, invariant: object, observation: object) -> object:
            raise HarnessError("embeddings endpoint http://127.0.0.1:9/v1 is down")

    invariants = [{"id": "sim", "type": "similarity", "expected": "x"}]
    plan = build_plan(contract(invariants, [CALM]), ["p1", "p2"])
    [cell] = Executor(FnAgent(lambda p, c: "x"), BrokenChecker()).run(plan, {})  # type: ignore[arg-type]
    assert cell.status is Status.ERRORED
    assert "embeddings endpoint" in cell.reason


def test_a_bug_in_a_worker_is_raised_not_swallowed() -> None:
    def answer(prompt: str, call: Call) -> str:
        raise RuntimeError("boom")

    plan = build_plan(contract([{"id": "a", "type": "completes"}], [CALM]), ["p1", "p2"])
    with pytest.raises(RuntimeError, match="boom"):
        Executor(FnAgent(answer), CHECKER, options=Options(concurrency=2)).run(plan, {})


def test_scenario_events_arrive_once_per_scenario_with_its_cells() -> None:
    events: list[ScenarioFinished] = []
    invariants = [{"id": f"a{i}", "type": "completes"} for i in range(3)]
    plan = build_plan(contract(invariants, [CALM, POISONED]), ["p"])
    Executor(
        FnAgent(lambda p, c: "ok"),
        CHECKER,
        on_event=lambda e: events.append(e) if isinstance(e, ScenarioFinished) else None,
    ).run(plan, {})
    assert sorted(e.name for e in events) == ["calm", "poisoned"]
    assert all(len(e.results) == 3 for e in events)


# --------------------------------------------------------------------------- through a run


def test_a_failing_reset_before_the_baselines_errors_cells_instead_of_aborting_the_run(
    tmp_path: Path,
) -> None:
    path = quote_project(
        tmp_path,
        [{"name": "calm"}],
        agent={"reset_function": "TOOLS:reset"},
        invariants=[
            {"id": "same", "type": "behavior_unchanged", "baseline": "auto"},
            {"id": "answers", "type": "output_not_empty"},
        ],
    )
    result = run_config(path)  # a HarnessError escaping here loses every report
    by_id = contract_cells(result)
    assert {c.status for c in by_id.values()} == {Status.ERRORED}
    assert "reset failed" in by_id["answers[calm]"].reason
    assert result.exit_code == 3


def test_scenario_progress_reports_the_verdicts_after_the_delivery_check(tmp_path: Path) -> None:
    # the agent calls get_quote once per invocation, never a 5th time: the scenario's cells end
    # ERRORED ("fault not delivered"); the progress line printed for the scenario must not say
    # they passed
    misfire = {"tool": "get_quote", "mode": "error", "calls": "5"}
    path = quote_project(tmp_path, [{"name": "misfire", "tool_faults": [misfire]}])
    events: list[Event] = []
    result = run_config(path, on_event=events.append)
    final = [c.status for c in contract_cells(result).values()]
    assert final == [Status.ERRORED]
    announced = [e for e in events if isinstance(e, ScenarioFinished)]
    assert [e.name for e in announced] == ["misfire"]
    assert [c.status for c in announced[0].results] == final
    # each cell is announced once, with its final verdict
    assert [e.result.status for e in events if isinstance(e, CellFinished)] == final


def test_a_stop_during_the_mutations_sends_and_resets_nothing_more() -> None:
    stop = Stop(grace_s=60)

    def answer(prompt: str, call: Call) -> str:
        stop.set()  # Ctrl-C arrives during the first mutation
        return "ok"

    agent = FnAgent(answer)
    reset = CountingReset()
    events: list[Event] = []
    executor = Executor(agent, CHECKER, reset, Options(), stop=stop, on_event=events.append)
    probes = [Probe(f"m{i}", f"p{i}") for i in range(4)]
    runs = executor.run_probes(probes, Judged)
    assert reset.count == 1
    assert [prompt for prompt, _ in agent.calls] == ["p0"]
    assert [run.reply is not None for (run,) in runs] == [True, False, False, False]
    assert executor.stop_reason == "interrupted"
    last = events[-1]
    assert isinstance(last, ProbeFinished)
    assert (last.done, last.total, last.sent) == (4, 4, 1)  # "mutation: 1 of 4 mutations sent"


class Judged:
    def __init__(self, probe: Probe, reply: Reply) -> None:
        self.passed = reply.output == "ok"
        self.down = reply.output == "down"  # the agent went down under it


class Reviver:
    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.count = 0

    def revive(self) -> bool:
        self.count += 1
        if self.fails:
            raise AgentNotReady("the agent was not ready after 50 ms (agent.ready_timeout)")
        return True


def both_down_together(then: dict[str, list[str]]) -> FnAgent:
    """An agent that goes down under two requests in flight together, then answers each
    prompt with the next of its answers in ``then``."""
    together = threading.Barrier(2, timeout=5)
    sent = itertools.count()
    after = {prompt: iter(answers) for prompt, answers in then.items()}

    def answer(prompt: str, call: Call) -> str:
        if next(sent) < 2:
            together.wait()  # both in flight at once
            return "down"
        return next(after[prompt])

    return FnAgent(answer)


def test_probes_the_agent_went_down_under_together_are_judged_again_alone() -> None:
    # the first sent alone may meet the agent still going down: it is tried a second time
    agent = both_down_together({"p0": ["down", "down"], "p1": ["ok"]})
    reviver = Reviver()
    events: list[Event] = []
    executor = Executor(
        agent, CHECKER, options=Options(concurrency=2), on_event=events.append, reviver=reviver
    )
    runs = executor.run_probes([Probe("m0", "p0"), Probe("m1", "p1")], Judged)
    # alone, in probe order: the killer twice
    assert [prompt for prompt, _ in agent.calls][2:] == ["p0", "p0", "p1"]
    assert reviver.count == 3  # the agent made ready again before each
    [(m0,), (m1,)] = runs
    assert m0.alone and m0.verdict is not None and not m0.verdict.passed
    assert m1.alone and m1.verdict is not None and m1.verdict.passed
    assert m1.crowded is not None and m1.crowded.reply is not None
    assert m1.crowded.reply.output == "down"
    # each announced once, with its final verdict
    finished = [(e.probe_id, e.passed) for e in events if isinstance(e, ProbeFinished)]
    assert finished == [("m0", False), ("m1", True)]


def test_the_first_probe_sent_alone_that_meets_the_agent_still_going_down_is_tried_again() -> None:
    """Right after the crowd's crash, a dying agent can pass its readiness check: the first
    probe sent alone meets it down, and only its second try says what it does alone."""
    agent = both_down_together({"p0": ["down", "ok"], "p1": ["ok"]})
    reviver = Reviver()
    executor = Executor(agent, CHECKER, options=Options(concurrency=2), reviver=reviver)
    [(m0,), (m1,)] = executor.run_probes([Probe("m0", "p0"), Probe("m1", "p1")], Judged)
    assert [prompt for prompt, _ in agent.calls][2:] == ["p0", "p0", "p1"]
    assert m0.alone and m0.verdict is not None and m0.verdict.passed
    assert m1.alone and m1.verdict is not None and m1.verdict.passed
    assert reviver.count == 3


def test_a_sink_gets_each_probe_once_with_its_final_runs_and_nothing_is_kept() -> None:
    """With a sink (the mutation phase's spool), a probe judged again alone is handed over
    only with the verdict of its run alone, as the list would have it."""
    agent = both_down_together({"p0": ["down", "down"], "p1": ["ok"], "p2": ["ok"]})
    events: list[Event] = []
    executor = Executor(
        agent, CHECKER, options=Options(concurrency=2), on_event=events.append, reviver=Reviver()
    )
    sunk: list[tuple[int, tuple[ProbeRun, ...]]] = []
    probes = [Probe("m0", "p0"), Probe("m1", "p1"), Probe("m2", "p2")]
    assert executor.run_probes(probes, Judged, sink=lambda i, runs: sunk.append((i, runs))) == []
    assert sorted(i for i, _ in sunk) == [0, 1, 2]
    by_position = {i: runs for i, runs in sunk}
    [m0], [m1] = by_position[0], by_position[1]
    assert m0.alone and m0.verdict is not None and not m0.verdict.passed
    assert m1.alone and m1.verdict is not None and m1.verdict.passed
    finished = sorted((e.probe_id, e.passed) for e in events if isinstance(e, ProbeFinished))
    assert finished == [("m0", False), ("m1", True), ("m2", True)]


def test_a_run_stopped_before_its_probes_ran_alone_hands_them_over_as_they_stand() -> None:
    """Stopped while the agent is made ready again, the probes it went down under are not
    sent alone: the sink still gets each, with its first run (as the list would have it)."""
    stop = threading.Event()

    class Stopping(Reviver):
        def revive(self) -> None:
            stop.set()

    agent = both_down_together({})
    executor = Executor(
        agent, CHECKER, options=Options(concurrency=2), stop=stop, reviver=Stopping()
    )
    sunk: dict[int, tuple[ProbeRun, ...]] = {}
    probes = [Probe("m0", "p0"), Probe("m1", "p1")]
    executor.run_probes(probes, Judged, sink=lambda i, runs: sunk.setdefault(i, runs))
    assert sorted(sunk) == [0, 1] and len(agent.calls) == 2
    for (run,) in sunk.values():
        assert not run.alone and run.reply is not None and run.reply.output == "down"


def test_probes_keep_their_first_reply_and_error_when_the_agent_does_not_come_back() -> None:
    agent = both_down_together({})
    reviver = Reviver(fails=True)
    executor = Executor(agent, CHECKER, options=Options(concurrency=2), reviver=reviver)
    runs = executor.run_probes([Probe("m0", "p0"), Probe("m1", "p1")], Judged)
    assert len(agent.calls) == 2 and reviver.count == 1  # waited for once, not per probe
    for (run,) in runs:
        assert not run.alone and run.reply is not None and run.reply.output == "down"
        assert run.error is not None
        assert run.error.startswith("the agent went down with others in flight and is not back")
        assert "agent.ready_timeout" in run.error


def test_the_agent_down_under_a_probe_alone_is_that_probe_s_doing() -> None:
    agent = FnAgent(lambda prompt, call: "down" if prompt == "p0" else "ok")
    reviver = Reviver()
    executor = Executor(agent, CHECKER, options=Options(concurrency=1), reviver=reviver)
    runs = executor.run_probes([Probe("m0", "p0"), Probe("m1", "p1")], Judged)
    assert len(agent.calls) == 2
    assert reviver.count == 1  # brought back before m1 was sent, not judged again
    assert not any(run.alone for (run,) in runs)
    assert [run.verdict is not None and run.verdict.passed for (run,) in runs] == [False, True]


def test_a_probe_that_meets_the_agent_still_going_down_alone_gets_a_second_try() -> None:
    """The agent goes down under m0 on its own; m1, sent right after, meets it still going
    down (it passed its readiness check while dying): m1 is tried once more, and passes."""
    agent = both_down_together({"p0": ["down", "down"], "p1": ["down", "ok"]})
    reviver = Reviver()
    executor = Executor(agent, CHECKER, options=Options(concurrency=2), reviver=reviver)
    [(m0,), (m1,)] = executor.run_probes([Probe("m0", "p0"), Probe("m1", "p1")], Judged)
    # (m0, first sent alone right after the crowd went down, has its second try too)
    assert [prompt for prompt, _ in agent.calls][2:] == ["p0", "p0", "p1", "p1"]
    assert reviver.count == 4
    assert m0.verdict is not None and not m0.verdict.passed
    assert m1.verdict is not None and m1.verdict.passed and m1.alone


class Killable:
    """An agent that goes down for good under the prompts in ``kills`` (it answers "down" until
    brought back); ``revive`` brings it back, unless it ``stays_down``."""

    def __init__(self, kills: set[str], stays_down: bool = False) -> None:
        self.kills = kills
        self.stays_down = stays_down
        self.up = True
        self.revived = 0
        self.agent = FnAgent(self.answer)

    def answer(self, prompt: str, call: Call) -> str:
        if not self.up:
            return "down"
        if prompt in self.kills:
            self.up = False
            return "down"
        return "ok"

    def revive(self) -> bool:
        self.revived += 1
        if self.stays_down:
            raise AgentNotReady("the agent was not ready after 50 ms (agent.ready_timeout)")
        was_down, self.up = not self.up, True
        return was_down


def test_at_concurrency_1_the_agent_is_brought_back_before_the_next_mutation() -> None:
    killable = Killable({"p1"})
    executor = Executor(killable.agent, CHECKER, options=Options(concurrency=1), reviver=killable)
    probes = [Probe(f"m{i}", f"p{i}") for i in range(4)]
    runs = executor.run_probes(probes, Judged)
    assert [prompt for prompt, _ in killable.agent.calls] == ["p0", "p1", "p2", "p3"]
    assert killable.revived == 1  # once, right after m1: the agent never went down again
    passed = [run.verdict is not None and run.verdict.passed for (run,) in runs]
    assert passed == [True, False, True, True]
    assert not any(run.alone or run.error for (run,) in runs)


def test_with_a_reset_the_agent_is_brought_back_before_the_next_reset() -> None:
    killable = Killable({"p0"})
    order: list[str] = []

    class Reset:
        def reset(self) -> None:
            order.append("reset" if killable.up else "reset of a dead agent")

    executor = Executor(killable.agent, CHECKER, Reset(), Options(concurrency=4), reviver=killable)
    runs = executor.run_probes([Probe("m0", "p0"), Probe("m1", "p1")], Judged)
    assert order == ["reset", "reset"]
    assert [run.verdict is not None and run.verdict.passed for (run,) in runs] == [False, True]


def test_mutations_left_when_the_agent_does_not_come_back_are_errored_once_not_sent() -> None:
    killable = Killable({"p1"}, stays_down=True)
    events: list[Event] = []
    executor = Executor(
        killable.agent,
        CHECKER,
        options=Options(concurrency=1),
        on_event=events.append,
        reviver=killable,
    )
    runs = executor.run_probes([Probe(f"m{i}", f"p{i}") for i in range(4)], Judged)
    assert [prompt for prompt, _ in killable.agent.calls] == ["p0", "p1"]  # nothing more sent
    assert killable.revived == 1  # waited for once, not once per mutation left
    (m0,), (m1,), (m2,), (m3,) = runs
    assert m0.verdict is not None and m0.verdict.passed
    assert m1.verdict is not None and not m1.verdict.passed and m1.error is None  # blamed
    for run in (m2, m3):
        assert run.lost and run.reply is None
        assert run.error == (
            "the agent did not come back after mutation m1: "
            "the agent was not ready after 50 ms (agent.ready_timeout)"
        )
    last = events[-1]
    assert isinstance(last, ProbeFinished) and (last.done, last.sent) == (4, 2)


def test_a_mutation_meeting_the_agent_still_going_down_after_a_revival_is_tried_again() -> None:
    """The agent went down under m0 on its own; m1, sent once it passed its readiness check,
    meets it still going down: it is brought back again and m1 tried once more."""
    answers = {"p0": iter(["down"]), "p1": iter(["down", "ok"]), "p2": iter(["ok"])}
    agent = FnAgent(lambda prompt, call: next(answers[prompt]))
    reviver = Reviver()
    executor = Executor(agent, CHECKER, options=Options(concurrency=1), reviver=reviver)
    runs = executor.run_probes([Probe(f"m{i}", f"p{i}") for i in range(3)], Judged)
    assert [prompt for prompt, _ in agent.calls] == ["p0", "p1", "p1", "p2"]
    assert reviver.count == 2
    passed = [run.verdict is not None and run.verdict.passed for (run,) in runs]
    assert passed == [False, True, True]


DIES_ON_BOOM = dying_agent(
    'json.loads(body)["input"] == "boom"',
    once=True,
    reply='"answer to " + json.loads(body)["input"]',
)


def test_a_contract_cell_after_one_the_agent_process_died_under_finds_it_started_again(
    tmp_path: Path,
) -> None:
    """An agent flakestorm started dies under the second prompt of the first cell: that cell
    fails, and the agent is started again before the next invocation, so the second cell is
    not sent to a dead agent; the report says so."""
    (tmp_path / "agent.py").write_text(DIES_ON_BOOM)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    doc = {
        "agent": {
            "endpoint": f"http://127.0.0.1:{port}/invoke",
            "ready_timeout": 20_000,
            "start": {"command": f"{shlex.quote(sys.executable)} agent.py {port}"},
        },
        "golden_prompts": ["hello", "boom"],
        "contract": {
            "name": "c",
            "invariants": [
                {"id": "first", "type": "output_not_empty"},
                {"id": "second", "type": "contains", "value": "answer to"},
            ],
            "chaos_matrix": [{"name": "calm"}],
        },
        "advanced": {"concurrency": 1},
        "output": {"dir": str(tmp_path / "reports")},
    }
    notices: list[str] = []
    loaded = load_config_text(json.dumps(doc), base_dir=tmp_path)
    result = run_phases(loaded, ["contract"], on_notice=notices.append)
    cells = contract_cells(result)
    assert cells["first[calm]"].status is Status.FAILED  # the agent died under it
    assert cells["second[calm]"].status is Status.PASSED, cells["second[calm]"].reason
    restarts = [n for n in notices if n.startswith("the agent process exited (code 1)")]
    assert len(restarts) == 1
    [warning] = [w for w in result.phases["contract"].warnings if "brought it back" in w]
    assert warning.startswith(
        "The agent stopped answering under cell first[calm]: flakestorm brought it back before "
        "the next cell"
    )
    log = (tmp_path / "reports" / "agent.log").read_text()
    assert log.count("agent up") == 2 and log.count("agent crashed") == 1


class Refusing:
    """An agent whose connection is refused once ``dead`` (it died under the prompt "boom")."""

    def __init__(self) -> None:
        self.dead = False
        self.calls: list[str] = []

    def invoke(self, prompt: str, call: Call = NO_CALL) -> Reply:
        self.calls.append(prompt)
        if self.dead or prompt == "boom":
            self.dead = True
            return Reply(None, 1.0, error=AgentErrorKind.CONNECTION, error_message="refused")
        return Reply("ok", 1.0, status=200)


def test_cells_left_when_the_agent_does_not_come_back_are_errored_not_sent() -> None:
    agent = Refusing()
    reviver = Reviver(fails=True)
    invariants = [{"id": f"a{i}", "type": "contains", "value": "ok"} for i in range(3)]
    plan = build_plan(contract(invariants, [CALM]), ["hello", "boom"])
    executor = Executor(agent, CHECKER, options=Options(concurrency=1), reviver=reviver)
    first, second, third = executor.run(plan, {})
    assert agent.calls == ["hello", "boom"]  # nothing more sent to the dead agent
    assert reviver.count == 1  # waited for once
    assert first.status is Status.FAILED  # the agent died under it
    for cell in (second, third):
        assert cell.status is Status.ERRORED
        assert cell.reason.startswith(
            "the agent did not come back after cell a0[calm]: the agent was not ready"
        ), cell.reason
