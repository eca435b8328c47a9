"""Running probes — inputs judged as a whole against every invariant (the mutations) — for
:meth:`flakestorm.engine.executor.Executor.run_probes`, and who is blamed when the agent goes down.

Each probe runs ``repeat`` times, concurrently like cells, or one at a time after a reset when
one is configured. A run whose verdict says the agent went down (:attr:`ProbeVerdict.down`: a
reset or refused connection, a 5xx, a hang, a failed readiness check) is handled in two ways:

- *New sends wait for the agent.* Once a run's verdict says the agent went down, the next run
  to start first brings it back (:class:`~flakestorm.engine.revival.Reviver`: an agent process
  flakestorm started is started again, any other agent is waited for); the other runs about to
  start wait for that. So a request that kills the agent is blamed for itself, not for every
  later one sent to a dead agent. The first run sent after the agent was brought back that
  finds it down again is brought back and tried once more (a dying agent can pass a readiness
  check for an instant). When the agent does not come back, every run left is errored, not
  sent, with one reason naming the probe the agent went down under
  (:attr:`ProbeRun.lost`). The gate is the run's (:mod:`flakestorm.engine.revival`), so a phase
  after
  this one does not meet the agent dead either. Where the agent never goes down, this costs nothing.
- *Runs in flight are judged again alone.* A run the agent went down under while other runs
  were in flight may be the victim of another: once every probe has run, such runs are sent
  again one at a time, each after the agent is brought back, and judged on that run of their
  own (:attr:`ProbeRun.crowded` keeps the first).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from flakestorm.agents import NO_CALL, Call, Reply
from flakestorm.engine.events import Event, ProbeFinished
from flakestorm.engine.revival import Flight, Gate
from flakestorm.errors import HarnessError

_T = TypeVar("_T")


@dataclass(frozen=True)
class Probe:
    """One input sent to the agent and judged as a whole against every invariant (a mutation),
    rather than one invariant's cell. ``call`` carries a described request when the input is
    an HTTP request of its own."""

    id: str
    prompt: str
    call: Call = NO_CALL
    turns: tuple[str, ...] = ()
    """Turns sent before ``prompt``, in the same session (an attack sent as real turns): each
    its own invocation (``ID#RUN.ALONE.TURN``); the last turn's reply is judged."""


class ProbeVerdict(Protocol):
    """What a probe's judge decides on one reply."""

    @property
    def passed(self) -> bool: ...

    @property
    def down(self) -> bool:
        """The agent did not stay up to answer (a reset, a 5xx, a hang, a failed readiness
        check): with other probes in flight, one of them may have brought it down."""
        ...


@dataclass(frozen=True)
class ProbeRun:
    """One run of a probe: the reply (None when the run stopped first, or was not sent) and
    ``judge``'s verdict on it, or the error that prevented judging it."""

    reply: Reply | None
    verdict: ProbeVerdict | None = None
    error: str | None = None
    crowded: ProbeRun | None = None
    """Set when this run was sent again on its own: the run it replaces, under which the
    agent went down while other probes were in flight."""
    lost: bool = False
    """Not sent: the agent went down under an earlier run and did not come back (``error``
    says after which probe, the same for every run it stranded)."""

    @property
    def alone(self) -> bool:
        """Judged on a run of its own, after the agent went down under the first."""
        return self.crowded is not None


@dataclass(frozen=True)
class Host:
    """What the probe runner uses of its executor."""

    invoke: Callable[[str, Call], Reply | None]
    """One invocation within the budget; None when the run is stopping or out of budget."""
    session: Callable[[str], str]
    each: Callable[[list[tuple[int, int]], Callable[[tuple[int, int]], None], bool], bool]
    """Apply work to items on the worker threads (parallel or not); False when abandoned."""
    stop: threading.Event
    on_event: Callable[[Event], None]
    repeat: int
    concurrency: int
    sessions: bool
    """``agent.session``: each run is a conversation of its own."""
    gate: Gate
    """The run's :class:`~flakestorm.engine.revival.Gate`: sends wait on it once the agent went
    down."""
    reset: Callable[[], None] | None = None


def run_probes(
    host: Host,
    probes: Sequence[Probe],
    judge: Callable[[Probe, Reply], ProbeVerdict],
    before_invocation: Callable[[str], None] | None = None,
    sink: Callable[[int, tuple[ProbeRun, ...]], None] | None = None,
) -> list[tuple[ProbeRun, ...]]:
    """See :meth:`flakestorm.engine.executor.Executor.run_probes`."""
    return _ProbeRuns(host, probes, judge, before_invocation, sink).run()


class _ProbeRuns:
    """One call of :func:`run_probes`: every run of every probe sent (concurrently unless a
    reset is configured), the runs the agent went down under with others in flight sent again
    alone, and each probe's runs settled once all are in."""

    def __init__(
        self,
        host: Host,
        probes: Sequence[Probe],
        judge: Callable[[Probe, Reply], ProbeVerdict],
        before_invocation: Callable[[str], None] | None,
        sink: Callable[[int, tuple[ProbeRun, ...]], None] | None,
    ) -> None:
        self.host, self.probes, self.judge = host, probes, judge
        self.before_invocation, self.sink = before_invocation, sink
        self.gate = host.gate
        self.parallel = host.reset is None
        self.runs: list[list[ProbeRun | None]] = [[None] * host.repeat for _ in probes]
        self.left = [host.repeat] * len(probes)
        self.lock = threading.Lock()
        self.done = 0
        self.sent = 0
        self.flight = Flight() if self.parallel and host.concurrency > 1 else None
        self.crowded: dict[tuple[int, int], ProbeRun] = {}
        self.frozen = False
        """The work was abandoned: what it reports later is ignored."""
        self.after_down = True
        """The agent went down under the previous run sent alone (or, before the first, under
        the crowd: the first run sent alone may meet it still going down, as the runs after a
        run it went down under may; like :attr:`flakestorm.engine.revival.Crowd.after_down`)."""

    def run(self) -> list[tuple[ProbeRun, ...]]:
        host = self.host
        tasks = [(i, run) for i in range(len(self.probes)) for run in range(host.repeat)]
        if host.each(tasks, self.one, self.parallel) and self.crowded:
            host.each(sorted(self.crowded), self.alone, False)
        with self.lock:
            self.frozen = True
        if self.sink is None:
            return [_complete(probe) for probe in self.runs]
        for i, probe_runs in enumerate(self.runs):
            if self.left[i] > 0:
                self.sink(i, _complete(probe_runs))
        return []

    def attempt(self, i: int, run: int, alone: bool = False) -> ProbeRun:
        host, gate, probe = self.host, self.gate, self.probes[i]
        if host.stop.is_set():  # a stopped run starts nothing more, not even a reset
            return ProbeRun(None)
        if gate.lost is not None:
            return ProbeRun(None, error=gate.stranded, lost=True)
        if host.reset is not None:
            try:
                host.reset()
            except HarnessError as exc:
                return ProbeRun(None, error=str(exc))
        call = probe.call
        if host.sessions:  # each run its own conversation
            key = f"{call.cell_id or probe.id}#{run}{':alone' if alone else ''}"
            call = dataclasses.replace(call, session=host.session(key))
        if call.cell_id:
            call = dataclasses.replace(call, cell_id=f"{call.cell_id}#{run}.{int(alone)}")
            if self.before_invocation is not None and host.reset is not None:
                self.before_invocation(call.cell_id)
        reply = _converse(host, probe, call)
        if reply is None:
            return ProbeRun(None)
        try:
            outcome = ProbeRun(reply, self.judge(probe, reply))
        except HarnessError as exc:
            return ProbeRun(reply, error=str(exc))
        if _down(outcome):
            gate.down(f"mutation {probe.id}")  # before it leaves the flight: see ``one``
        return outcome

    def send(self, i: int, run: int) -> ProbeRun:
        """A first run, once the agent is back if it went down under an earlier one."""
        revived = self.gate.open()
        outcome = self.attempt(i, run)
        if revived and _down(outcome) and self.gate.again(f"mutation {self.probes[i].id}"):
            # sent right after the agent came back, it may have met it still going down
            return self.attempt(i, run)
        return outcome

    def settle(self, i: int, run: int, outcome: ProbeRun) -> None:
        probe = self.probes[i]
        with self.lock:
            if self.frozen:
                return
            mine = self.runs[i]
            mine[run] = outcome
            self.left[i] -= 1
            finished = self.left[i] == 0
            if finished:
                self.done += 1
                self.sent += any(r is not None and r.reply is not None for r in mine)
                count, reached = self.done, self.sent
                if self.sink is not None:  # in the lock: nothing reaches it once abandoned
                    self.sink(i, _complete(mine))
                    self.runs[i] = []  # not kept
        if finished:
            passed = all(getattr(r.verdict, "passed", False) for r in mine if r is not None)
            self.host.on_event(ProbeFinished(probe.id, passed, count, len(self.probes), reached))

    def one(self, task: tuple[int, int]) -> None:
        if self.flight is None:
            self.settle(*task, self.send(*task))
            return
        # in flight before the gate is looked at: a run that starts while the agent is going
        # down under another, before the gate knows, shares the agent with it
        self.flight.enter(task)
        outcome = self.send(*task)
        if self.flight.leave(task) and _down(outcome):
            with self.lock:  # judged again, alone; until then the first verdict stands
                self.runs[task[0]][task[1]] = self.crowded[task] = outcome
            return
        self.settle(*task, outcome)

    def alone(self, task: tuple[int, int]) -> None:
        gate, first = self.gate, self.crowded[task]
        # right after the agent went down under the run before, this one may meet it still
        # going down (a dying agent can pass a readiness check): then it gets a second try
        for _ in range(2 if self.after_down else 1):
            gate.down(f"mutation {self.probes[task[0]].id}")  # it went down under the first
            gate.open()
            if gate.lost is not None:
                why = f"the agent went down with others in flight and is not back: {gate.lost}"
                self.settle(*task, dataclasses.replace(first, error=why))
                return
            outcome = self.attempt(*task, alone=True)
            if outcome.reply is None and outcome.error is None:  # stopped: the first stands
                return
            if not _down(outcome):
                break
        self.after_down = _down(outcome)
        self.settle(*task, dataclasses.replace(outcome, crowded=first))


def _converse(host: Host, probe: Probe, call: Call) -> Reply | None:
    """Send ``probe``'s turns in order in its session, then its prompt: the reply to judge
    (the first turn the agent did not answer, else the last)."""
    if not probe.turns:
        return host.invoke(probe.prompt, call)
    messages = (*probe.turns, probe.prompt)
    reply = None
    for number, message in enumerate(messages, 1):
        turn = (
            call
            if not call.cell_id
            else dataclasses.replace(call, cell_id=f"{call.cell_id}.{number}")
        )
        if number < len(messages) and turn.request is not None:
            # a request-level mutation changes the last turn's request; the turns before it
            # are the conversation's own, sent as usual
            turn = dataclasses.replace(turn, request=None)
        reply = host.invoke(message, turn)
        if reply is None or reply.error is not None:
            return reply
    return reply


def _complete(runs: list[ProbeRun | None]) -> tuple[ProbeRun, ...]:
    """A probe's runs, each one that did not happen a run with no reply."""
    return tuple(r if r is not None else ProbeRun(None) for r in runs)


def _down(run: ProbeRun) -> bool:
    """The agent went down under ``run`` (its verdict says so)."""
    return run.verdict is not None and run.verdict.down
