"""Runs cells against the agent and yields :class:`~flakestorm.results.model.CellResult` values.

The executor never prints: progress goes to the ``on_event`` callback.

Scheduling. Every invocation of a run is one task (cell, repeat, prompt); ``concurrency``
worker threads pull tasks in plan order from one shared queue, so 300 invocations at
concurrency 8 keep 8 in flight the whole time. When a reset is configured, a reset is global
(it clears the agent's state, not one cell's), so cells then run strictly one at a time:
reset, then that cell's prompts in order. With ``agent.session`` there is no reset: each cell
(and each repeat of it) is its own conversation, with a session id from the seed and the cell
(:func:`session_id`): its prompts are sent in order, and ``concurrency`` cells side by side.

Stopping. Setting ``stop`` (Ctrl-C, SIGTERM) or spending ``max_invocations`` stops new
invocations and resets. Work in flight (an invocation, a reset) runs on worker threads, never
on the caller's: after a stop it gets the grace of :mod:`flakestorm.stopping` (1.5 s, none after
a second signal) to finish, then it is abandoned and the executor returns at once. Finished
cells keep their verdicts; cells that did not finish are ``not_run`` with what they did
recorded, and whatever an abandoned invocation returns later is ignored.

The agent going down. Once a cell's invocation meets a refused or reset connection (or a probe's
verdict says the agent went down), the next invocation first brings the agent back through the
run's :class:`~flakestorm.engine.revival.Gate`; when it does not come back, the cells left are
ERRORED
unsent with one reason. An invocation the agent went down under while others were in flight
(any of them may have brought it down) is held, and once every cell has run it is sent again on
its own after the agent is back, and judged on that (with ``agent.session``, the cell's run
whole, in a session of its own); the cell notes it. Probes: :mod:`flakestorm.engine.probes`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from flakestorm.agents import NO_CALL, Agent, Call, Reply
from flakestorm.agents.session import session_id
from flakestorm.chaos.attacks.memory import poison_input
from flakestorm.checks.invariants import Observation, Verdict
from flakestorm.config import Invariant
from flakestorm.engine.budget import Budget, FirstReply
from flakestorm.engine.events import Event
from flakestorm.engine.fanout import each
from flakestorm.engine.matrix_plan import Baseline, BaselineKey, Cell, MatrixPlan, baseline_sends
from flakestorm.engine.probes import Host, Probe, ProbeRun, ProbeVerdict, run_probes
from flakestorm.engine.prompt_result import judged_reply
from flakestorm.engine.revival import Crowd, Gate, Reviver
from flakestorm.engine.tracker import Tracker
from flakestorm.errors import AgentErrorKind, HarnessError
from flakestorm.results.model import CellResult, PromptResult

_T = TypeVar("_T")

MISREAD = "response_path"
"""The stop reason of a run whose first reply lacked ``agent.response_path``."""


class Checker(Protocol):
    def check(self, invariant: Invariant, observation: Observation) -> Verdict: ...


class Resetter(Protocol):
    def reset(self) -> None: ...


@dataclass(frozen=True)
class Options:
    concurrency: int = 4
    repeat: int = 1
    min_pass: int = 1
    max_invocations: int | None = None
    session_seed: int | None = None
    """With ``agent.session``: the seed session ids derive from (None: no sessions)."""
    trace_seed: int | None = None
    """The run seed each invocation's ``traceparent`` derives from (None: none sent)."""


class Executor:
    """Runs a plan's cells; one instance per run."""

    def __init__(
        self,
        agent: Agent,
        checker: Checker,
        resetter: Resetter | None = None,
        options: Options = Options(),
        stop: threading.Event | None = None,
        on_event: Callable[[Event], None] | None = None,
        reviver: Reviver | None = None,
        begin: Callable[[str], None] | None = None,
    ) -> None:
        """``begin(invocation_id)`` is called as each invocation is sent: fault delivery
        times the faults' ``window_ms`` from there."""
        self._agent = agent
        self._begin = begin
        self._checker = checker
        self._resetter = resetter
        self._options = options
        self._stop = stop or threading.Event()
        self._on_event = on_event or (lambda event: None)
        self._budget = Budget(options.max_invocations)
        self._first = FirstReply()
        self._gate = Gate(reviver, self._stop)
        self._noticed: list[float] = []

    @property
    def invocations(self) -> int:
        return self._budget.spent

    @property
    def options(self) -> Options:
        return self._options

    @property
    def misread(self) -> str | None:
        """The first reply's ``agent.response_path`` error, when the run stopped there."""
        return self._first.misread

    @property
    def stop_reason(self) -> str | None:
        if self._first.misread is not None:
            return MISREAD
        if self._stop.is_set():
            return "interrupted"
        if self._budget.exhausted:
            return "max_invocations"
        return None

    # ----------------------------------------------------------------- before the matrix

    def _session(self, key: str) -> str:
        seed = self._options.session_seed
        return "" if seed is None else session_id(seed, key)

    def session_of(self, key: str) -> str:
        """The session id of ``key`` (a replayed conversation's), or "" without sessions."""
        return self._session(key)

    def _invoke(self, prompt: str, call: Call = NO_CALL) -> Reply | None:
        """One invocation, or None when the run is stopping or out of budget; sent once the
        agent is back if it went down under an earlier one (:mod:`flakestorm.engine.revival`)."""
        if self._stop.is_set() or not self._budget.take():
            return None
        self._gate.open()
        if call.cell_id and call.seed is None and self._options.trace_seed is not None:
            call = dataclasses.replace(call, seed=self._options.trace_seed)
        if self._begin is not None and call.cell_id:
            self._begin(call.cell_id)
        reply = self._agent.invoke(prompt, call)
        if self._first.see(reply):
            self._stop.set()
        return reply

    @property
    def revived(self) -> tuple[str, ...]:
        """What the agent went down under (``mutation ID``, ``cell ID``), each time it was
        brought back before the next request, in order."""
        return tuple(self._gate.revived)

    def baselines(self, baselines: Sequence[Baseline]) -> dict[BaselineKey, Reply | None]:
        """The chaos-free answer to each prompt (for ``behavior_unchanged`` with ``auto``), and
        to each turn of each conversation: its turns sent in order in a session of their own
        (or after a reset), each reply the baseline of its turn (``(turns, N)``)."""
        out: dict[BaselineKey, Reply | None] = {}

        def one(baseline: Baseline) -> None:
            if isinstance(baseline, str):
                key = f"baseline:{baseline}"
            else:
                key = f"baseline-conversation:{json.dumps(baseline)}"
            if self._resetter is not None:
                if self._stop.is_set():
                    return
                try:
                    self._resetter.reset()
                except HarnessError:  # no baseline: the cells needing it are ERRORED
                    return
            call = Call(cell_id="baseline", scenario="", session=self._session(key))
            for at, text in baseline_sends(baseline):
                out[at] = self._invoke(text, call)

        self._each(list(baselines), one, parallel=self._resetter is None)
        return {k: out.get(k) for b in baselines for k, _ in baseline_sends(b)}

    def invoke(self, prompt: str, call: Call) -> Reply | None:
        """One invocation outside a matrix (a replayed session), within the budget; None when
        the run is stopping or the budget is spent. With ``agent.session`` it is a
        conversation of its own (keyed by its cell id)."""
        if not call.session and self._options.session_seed is not None:
            call = dataclasses.replace(call, session=self._session(call.cell_id))
        # the agent going down under it is marked, as under a cell: the next send waits for it
        return self._send(f"session {call.cell_id.rpartition('#')[0]}", prompt, call)

    @property
    def lost(self) -> str | None:
        """Why nothing more can be sent: the agent went down and did not come back."""
        return self._gate.stranded if self._gate.lost is not None else None

    def reset(self) -> bool:
        """Reset the agent when a reset is configured (HarnessError when it fails); whether
        one is configured."""
        if self._resetter is None:
            return False
        self._resetter.reset()
        return True

    def announce(self, event: Event) -> None:
        """Pass a phase's own progress event on (``CellFinished``, ``ScenarioFinished``)."""
        self._on_event(event)

    def probe(self, prompt: str, cell_id: str) -> Reply | None:
        """One chaos-free invocation outside the matrix (e.g. to learn whether the agent
        forwards the cell header)."""
        return self._one(
            lambda: self._invoke(prompt, Call(cell_id=cell_id, session=self._session(cell_id)))
        )

    def looks_stateful(self, prompt: str) -> bool:
        """Send ``prompt`` twice without chaos; True when the two answers differ."""

        def twice() -> tuple[Reply | None, Reply | None]:
            first = self._invoke(prompt, Call(cell_id="stateful-check"))
            return first, self._invoke(prompt, Call(cell_id="stateful-check"))

        first, second = self._one(twice) or (None, None)
        if first is None or second is None:
            return False
        return (first.output, first.error) != (second.output, second.error)

    def check(self, invariant: Invariant, observation: Observation) -> Verdict:
        """The run's checker on one observation (HarnessError when the checker failed)."""
        return self._checker.check(invariant, observation)

    # ----------------------------------------------------------------- probes

    def run_probes(
        self,
        probes: Sequence[Probe],
        judge: Callable[[Probe, Reply], ProbeVerdict],
        before_invocation: Callable[[str], None] | None = None,
        sink: Callable[[int, tuple[ProbeRun, ...]], None] | None = None,
    ) -> list[tuple[ProbeRun, ...]]:
        """Each probe ``repeat`` times, judged by ``judge(probe, reply)`` (which may raise
        :class:`HarnessError`); the runs of each probe, in probe order. Concurrent like cells,
        or one at a time after a reset when one is configured; a stopped run leaves runs
        with no reply.

        Run ``RUN`` of a probe whose call has a cell id is sent as ``CELL#RUN.0`` (the cell
        header), as a cell's invocations are, so the calls it causes are attributed to it.
        Run one at a time (a reset is configured), ``before_invocation(invocation_id)`` is
        called before each invocation: how calls without the header are attributed.

        When the agent goes down under a run (``verdict.down``), the reviver brings it back
        before the next run is sent, and runs that were in flight with others are judged again
        alone (as ``CELL#RUN.1``) once every probe has run (:mod:`flakestorm.engine.probes`). A
        probe is announced (:class:`ProbeFinished`) once, with its final verdict.

        With ``sink``, the runs of each probe go to ``sink(position, runs)`` once final (a
        stopped run's unfinished probes at the end, as they stand) and are not kept: memory
        stays flat in the number of probes, and the list returned is empty."""
        host = Host(
            invoke=self._invoke,
            session=self._session,
            each=self._each,
            stop=self._stop,
            on_event=self._on_event,
            repeat=self._options.repeat,
            concurrency=self._options.concurrency,
            sessions=self._options.session_seed is not None,
            gate=self._gate,
            reset=self._resetter.reset if self._resetter is not None else None,
        )
        return run_probes(host, probes, judge, before_invocation, sink)

    def _one(self, work: Callable[[], _T]) -> _T | None:
        """``work()`` on a worker thread; None if it was abandoned (the run is stopping)."""
        out: list[_T] = []
        self._each([None], lambda _: out.append(work()), parallel=False)
        return out[0] if out else None

    # ----------------------------------------------------------------- the matrix

    def run(
        self, plan: MatrixPlan, baselines: Mapping[BaselineKey, Reply | None]
    ) -> list[CellResult]:
        """Run every cell of ``plan``; results in plan order."""
        return self.run_cells(plan.cells, baselines)

    def run_cells(
        self,
        cells: Sequence[Cell],
        baselines: Mapping[BaselineKey, Reply | None],
        serial: bool = False,
        before_invocation: Callable[[str], None] | None = None,
        settle: Callable[[str, list[CellResult]], list[CellResult]] | None = None,
        sink: Callable[[CellResult], None] | None = None,
    ) -> list[CellResult]:
        """Run ``cells``; results in their order.

        With ``sink`` (and no ``settle``), each cell goes to ``sink`` as it finishes and is not
        kept: the results returned then hold no prompts and calls (memory stays flat).

        ``serial`` runs one invocation at a time (as a configured reset always does), calling
        ``before_invocation(invocation_id)`` first — how fault delivery attributes calls to
        an invocation when the agent does not forward the cell header. ``settle(scenario,
        results)`` completes a scenario's verdicts once its every cell has run (its delivery
        judgement): its cells are announced (:class:`CellFinished`, :class:`ScenarioFinished`)
        only after it, as soon as that scenario is done, so every verdict is announced once,
        final.
        """
        tracker = Tracker(cells, self._options, self._on_event, sink=sink, settle=settle)
        for cell in cells:
            if not cell.applicable:
                tracker.skip(cell)
        runnable = [c for c in cells if c.applicable]
        runs = [(cell, run) for cell in runnable for run in range(self._options.repeat)]
        crowd: _Crowd | None = Crowd() if self._options.concurrency > 1 else None
        if self._resetter is None and not serial and self._options.session_seed is not None:
            # a session is one conversation: a cell's prompts in order, the cells side by side
            finished = self._each(
                runs,
                lambda item: self._run_isolated(*item, tracker, baselines, crowd=crowd),
                parallel=True,
            )
        elif self._resetter is None and not serial:
            tasks = [_Task(cell, run, i) for cell, run in runs for i in range(len(cell.prompts))]
            finished = self._each(
                tasks, lambda t: self._do(t, tracker, baselines, crowd), parallel=True
            )
        else:
            crowd = None  # one at a time: an invocation the agent went down under is the one
            finished = self._each(
                runs,
                lambda item: self._run_isolated(*item, tracker, baselines, before_invocation),
                parallel=False,
            )
        if finished and crowd is not None and crowd.held:
            # the agent went down with several invocations in flight: each is judged again
            # alone once it is back, so only the one it goes down under again fails
            finished = self._each(
                sorted(crowd.held, key=lambda held: held[0][0].order),
                lambda held: self._alone(held, tracker, baselines, crowd),
                parallel=False,
            )
        if not finished:
            tracker.abandon()
        return tracker.results()

    def _run_isolated(
        self,
        cell: Cell,
        run: int,
        tracker: Tracker,
        baselines: Mapping[BaselineKey, Reply | None],
        before_invocation: Callable[[str], None] | None = None,
        crowd: _Crowd | None = None,
    ) -> None:
        """Run ``run`` of ``cell``, its prompts in order (after a reset, or in a session of its
        own). With ``crowd`` (sessions side by side), a run the agent went down under while
        other runs were in flight is held, whole, to be run again alone."""
        if self._stop.is_set():
            for i in range(len(cell.prompts)):
                tracker.record(cell, run, i, None)
            return
        self._gate.open()  # the agent back before its reset, if it went down
        if self._gate.lost is not None:
            tracker.error(cell, self._gate.stranded)
            return
        if self._resetter is not None:
            try:
                self._resetter.reset()
            except HarnessError as exc:
                tracker.error(cell, str(exc))
                return
        tasks = [_Task(cell, run, i) for i in range(len(cell.prompts))]
        if crowd is None:
            for task in tasks:
                if not self._reset_before(task, tracker):
                    return
                if before_invocation is not None and not self._stop.is_set():
                    before_invocation(task.invocation_id)
                self._do(task, tracker, baselines)
            return
        key = (cell.index, run)
        crowd.flight.enter(key)
        outcomes: list[_Outcome] = []
        try:
            for task in tasks:  # after an error, the rest of the run is not sent
                errored = any(o.error is not None for o in outcomes)
                outcomes.append(_Outcome() if errored else self._attempt(task, baselines))
        finally:
            shared = crowd.flight.leave(key)
        if shared and any(o.down for o in outcomes):
            crowd.hold(tuple(zip(tasks, outcomes, strict=True)))
            return
        for task, outcome in zip(tasks, outcomes, strict=True):
            outcome.commit(tracker, task)

    def _reset_before(self, task: _Task, tracker: Tracker) -> bool:
        """With a reset and no sessions, a conversation after a cell's first prompt starts
        from a reset of its own (SPEC §12); False when that reset failed (the cell ERRORED)."""
        turn = task.cell.turn(task.prompt_index)
        if (
            self._resetter is None
            or self._options.session_seed is not None
            or task.prompt_index == 0
            or turn is None
            or not turn.first
            or self._stop.is_set()
        ):
            return True
        try:
            self._resetter.reset()
        except HarnessError as exc:
            tracker.error(task.cell, str(exc))
            return False
        return True

    def _do(
        self,
        task: _Task,
        tracker: Tracker,
        baselines: Mapping[BaselineKey, Reply | None],
        crowd: _Crowd | None = None,
    ) -> None:
        """One invocation of a cell, recorded; with ``crowd``, held to be sent again alone when
        the agent went down under it while other invocations were in flight."""
        if tracker.is_errored(task.cell):
            tracker.record(task.cell, task.run, task.prompt_index, None)
            return
        if crowd is None:
            self._attempt(task, baselines).commit(tracker, task)
            return
        key = task.order
        crowd.flight.enter(key)
        try:
            outcome = self._attempt(task, baselines)
        finally:
            shared = crowd.flight.leave(key)
        if shared and outcome.down:
            crowd.hold(((task, outcome),))
            return
        outcome.commit(tracker, task)

    def _alone(
        self,
        held: tuple[tuple[_Task, _Outcome], ...],
        tracker: Tracker,
        baselines: Mapping[BaselineKey, Reply | None],
        crowd: _Crowd,
    ) -> None:
        """Send invocations the agent went down under while others were in flight again, on
        their own (a session's run whole, in a session of its own) once the agent is back,
        and judge them on that: only the one the agent goes down under again fails."""
        first = held[0][0]
        if self._stop.is_set():  # stopping: the first verdicts stand
            for task, outcome in held:
                outcome.commit(tracker, task)
            return
        # it went down under the first send: brought back before this one; right after it went
        # down under the one before, this one may meet it still going down (a dying agent can
        # pass a readiness check): then it is tried again
        self._gate.down(f"cell {first.cell.id}")
        retry, crowd.after_down = crowd.after_down, False
        for task, _ in held:
            outcome = self._attempt(task, baselines, alone=True, retry=retry)
            crowd.after_down |= outcome.down
            outcome.commit(tracker, task, alone=True)

    def _attempt(
        self,
        task: _Task,
        baselines: Mapping[BaselineKey, Reply | None],
        alone: bool = False,
        retry: bool = True,
    ) -> _Outcome:
        """Send one invocation of a cell and judge the reply. ``alone``: sent again on its own
        after the agent went down with others in flight, as invocation ``CELL#R.P`` with ``R``
        its run plus ``repeat`` (so its calls and fault decisions are its own)."""
        cell = task.cell
        index = task.prompt_index
        prompt = cell.prompts[index]
        turn = cell.turn(index)
        sent, fired = poison_input(prompt, cell.scenario, 1 if turn is None else turn.number)
        run = task.run + (self._options.repeat if alone else 0)
        call = Call(
            cell_id=cell.invocation(run, index),
            scenario=cell.scenario.name,
            session=self._session(cell.session_key(run, index)),
        )
        reply = self._send(f"cell {cell.id}", sent, call, retry)
        if reply is None:  # not sent: stopping, or the agent did not come back
            return _Outcome(error=self._gate.stranded if self._gate.lost is not None else None)
        baseline_reply = baselines.get(cell.baseline_key(index))
        baseline = baseline_reply.output if baseline_reply is not None else None
        checked = cell.checks(index) or reply.error is not None  # a turn unanswered fails
        try:
            verdict = (
                self._checker.check(cell.invariant, Observation(sent, reply, baseline))
                if checked
                else Verdict(True, f"not checked (turn: {cell.invariant.turn})")
            )
        except HarnessError as exc:
            return _Outcome(error=str(exc))
        result = judged_reply(
            prompt,
            sent,
            task.run,
            reply,
            verdict,
            conversation=None if turn is None else turn.conversation,
            turn=None if turn is None else turn.number,
            checked=checked,
            console="" if verdict.passed else reply.console,
        )
        return _Outcome(result, fired, down=reply.error is AgentErrorKind.CONNECTION)

    def _send(self, what: str, sent: str, call: Call, retry: bool = True) -> Reply | None:
        """One invocation of ``what`` (``cell ID``, ``session ID``), once the agent is back if
        it went down; None when not sent (the run is stopping, or the agent did not come
        back). A refused or reset
        connection marks the agent down; met right after the agent was brought back (a dying
        agent can pass a readiness check), the agent is brought back again and it is sent
        once more (``retry``; not when it was the agent's last victim's own re-run)."""
        revived = self._gate.open()
        if self._gate.lost is not None:
            return None
        reply = self._invoke(sent, call)
        if reply is None or reply.error is not AgentErrorKind.CONNECTION:
            return reply
        if not (retry and revived and self._gate.again(what)):
            self._gate.down(what)
            return reply
        again = self._invoke(sent, call)
        if again is not None and again.error is AgentErrorKind.CONNECTION:
            self._gate.down(what)
        return again

    def _each(self, items: list[_T], work: Callable[[_T], None], parallel: bool) -> bool:
        """Apply ``work`` to every item on up to ``concurrency`` worker threads (one when not
        ``parallel``): :func:`flakestorm.engine.fanout.each`."""
        workers = min(self._options.concurrency, len(items)) if parallel else 1
        return each(items, work, workers, self._stop, self._noticed)


@dataclass(frozen=True)
class _Task:
    cell: Cell
    run: int
    prompt_index: int

    @property
    def order(self) -> tuple[int, int, int]:
        return self.cell.index, self.run, self.prompt_index

    @property
    def invocation_id(self) -> str:
        """``cell#run.prompt`` (``.turn`` after it for a conversation's turn): sent as the
        cell header so fault decisions (``after_calls``, ``probability``, ``turns``) are made
        per invocation, whatever the concurrency."""
        return self.cell.invocation(self.run, self.prompt_index)


@dataclass(frozen=True)
class _Outcome:
    """One invocation of a cell: its prompt result and the faults fired into its input (no
    result: not sent, the run stopping), or the error that settles it."""

    result: PromptResult | None = None
    fired: tuple[str, ...] = ()
    error: str | None = None
    down: bool = False
    """The agent went down under it (a refused or reset connection)."""

    def commit(self, tracker: Tracker, task: _Task, alone: bool = False) -> None:
        if self.error is not None:
            tracker.error(task.cell, self.error, task.run, task.prompt_index)
        else:
            tracker.record(
                task.cell, task.run, task.prompt_index, self.result, self.fired, alone=alone
            )


_Crowd = Crowd[tuple[tuple[_Task, _Outcome], ...]]
"""Invocations held with their first outcome (a session's run: all its prompts)."""
