"""The runtime every actor shares: the core, the journal, the handler, and the supervision
of actor tasks.

Theory of operation
-------------------
`Runtime.spawn` makes an actor (`inturn.actors.Actor`, given as
``make_actor``) for a lane when the core says the lane needs one, and
`Runtime.serve` runs it in a spare `Worker` task (a new one only when none
is spare: activating a key costs a wake-up, not a task).  An actor with
nothing to run *lingers* (`Runtime.linger`): it ends, its worker goes back
to the pool at once, and its lane keeps nothing but its deadline here; a
``send`` gets it an actor again (`spawn`, `wake`), and when `IdleReaper`
says ``idle_timeout`` passed, it is gone (`retire`).  A crashed actor is
restarted within the restart budget, and escalates beyond it
(`supervise`).  The runtime knows actors only by `ActorLike`, so that this
module sits under the actors, which use it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import attrs
import structlog
import trio

from ._claims import one_at_a_time
from ._schedule import Schedule
from ._steps import StepLog
from ._tasks import start_task
from ._workers import REAPER_SLACK, IdleReaper, Worker
from .codec import Codec
from .core import Core, Entry, Lane
from .errors import JournalError, LeaseLost, describe
from .events import Logger, debug_is_off, exception_text
from .jobs import Job
from .journal import Journal

if TYPE_CHECKING:
    from ._otel import Observer
    from .journal.records import Change, FleetChange, Release


Handler: TypeAlias = Callable[[Job], Awaitable[object]]


BatchHandler: TypeAlias = Callable[[list[Job]], Awaitable[object]]


def key_of(lane: Lane) -> str | None:
    """*lane*'s sequence key; None for a keyless job's lane (its job id)."""
    return lane if isinstance(lane, str) else None


class _Holds(Protocol):
    async def hold(self) -> None: ...


class FleetPart(Protocol):
    """What the actors ask of their supervisor's part of a fleet (`inturn.fleet.Fleet`).

    A protocol, so that the actors need not import the fleet, which drives them.
    """

    poll_interval: float

    @property
    def settled(self) -> bool: ...

    @property
    def journal(self) -> _Holds: ...

    async def complete_last(
        self, changes: Sequence[Change], release: Release, now: float | None
    ) -> Sequence[FleetChange]: ...

    async def let_go(self, key: str) -> bool: ...

    def retired(self) -> None: ...


class ActorLike(Protocol):
    """What the runtime asks of an actor (`inturn.actors.Actor`)."""

    lane: Lane
    interruptible: trio.CancelScope | None
    interrupted: bool
    backing_off: bool

    @property
    def key(self) -> str | None: ...

    async def run(self) -> None: ...

    async def supervise(self, crash: Exception) -> None: ...


@attrs.define(eq=False)
class Waiter:
    """An ``ask`` waiting for one job's outcome."""

    event: trio.Event = attrs.field(factory=trio.Event)
    result: object = None
    error: BaseException | None = None
    closed: bool = False


@attrs.define(eq=False, kw_only=True)
class Runtime:
    """The state every actor shares, and the supervision of actor tasks."""

    core: Core
    journal: Journal
    codec: Codec
    handler: Callable[[Any], Awaitable[object]]
    """A `Handler`; a `BatchHandler` when *batch* is set."""
    make_actor: Callable[[Runtime, Lane], ActorLike]
    """Makes the actor of a lane (`inturn.actors.Actor`)."""
    random: Callable[[], float]
    idle_timeout: float
    job_timeout: float | None
    max_restarts: int
    restart_window: float
    max_payload: int = 16 * 1024 * 1024
    batch: int | None = None
    """The handler takes a list of up to this many jobs of one key (`Core.followers`)."""
    nursery: trio.Nursery | None = None
    now: Callable[[], float] = attrs.field(
        factory=lambda: trio.lowlevel.current_clock().current_time
    )
    """Trio time now, as ``trio.current_time()`` gives it (a mock clock's, in tests), read
    from the run's clock directly: called a few times a job."""
    actors: dict[Lane, ActorLike] = attrs.field(factory=dict)
    """Lanes with an actor: running, or about to get a task."""
    lingering: dict[Lane, float] = attrs.field(factory=dict)
    """Lanes with nothing to run now, and when their linger ends (inf: until a send wakes
    them).  A lingering lane is this deadline and no more (no actor, and no state in the
    core unless a send to it is being journaled), since a million keys seen once linger
    together for ``idle_timeout``."""
    waiters: dict[int, Waiter] = attrs.field(factory=dict)
    running: int = 0
    closed: bool = False
    escalated: BaseException | None = None
    fleet: FleetPart | None = None
    """This supervisor's part of a fleet (see `inturn.fleet`); None when it holds its journal alone."""
    spare: dict[Worker, None] = attrs.field(factory=dict)
    """Worker tasks parked until a lane needs one, oldest first (an ordered set)."""
    reaper: IdleReaper = attrs.field(
        default=attrs.Factory(
            lambda self: IdleReaper(
                self.idle_timeout, self.idle_timeout * REAPER_SLACK, self.spare, self
            ),
            takes_self=True,
        )
    )
    schedule: Schedule = attrs.field(factory=Schedule)
    """The scheduled jobs' wait (`run_schedule`)."""
    recurring: Schedule = attrs.field(factory=Schedule)
    """The recurring schedules' wait (`run_recurring`)."""
    steps: StepLog = attrs.field(
        default=attrs.Factory(
            lambda self: StepLog(self.journal, self.codec, self.unix_now, self.max_payload),
            takes_self=True,
        )
    )
    nothing_runs: trio.Event | None = None
    """Set when ``running`` falls to 0, while a graceful shutdown waits for it."""
    log: Logger = attrs.field(factory=lambda: structlog.get_logger("inturn").bind())
    """Bound once, when the supervisor opens: a filtered-out debug call is then
    one call to a no-op, not a trip through structlog's lazy proxy."""
    debug: bool = attrs.field(
        default=attrs.Factory(lambda self: not debug_is_off(self.log), takes_self=True)
    )
    """Whether `log`'s debug events may go anywhere (set again with `log`): the
    events of every job, started and completed, are skipped if not."""
    _crashes: deque[float] = attrs.field(factory=deque)
    _idle: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    idle_waiters: int = 0
    """How many wait in `wait_idle`: a job's end asks this plain count, not the parking
    lot's Python ``bool``."""
    stopped: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    """Operators waiting for a skipped job's attempt to stop (`wait_stopped`)."""
    stop_waiters: int = 0
    """How many wait in `stopped`: a plain count, which an attempt's end asks for (the
    parking lot's own ``bool`` is a Python call)."""
    observer: Observer | None = None
    """OpenTelemetry's spans and metrics (`observe`), if the supervisor traces."""
    halt_writes: dict[str, trio.Event] = attrs.field(factory=dict)
    """Keys with a write in flight that halts them (a failure for good under
    ``on_discard="halt"``) or lifts their halt (`Resume`, a resuming `Revive`).
    One at a time per key: two in flight at once are answered together, and
    trio may tell their writers in either order, so the core could hear them
    in an order other than the journal's and end with the other word on the
    key's halt."""

    def writing_halt(
        self, key: str | None, *, shield: bool = False
    ) -> AbstractAsyncContextManager[None]:
        """Hold *key* in `halt_writes` within the block (if a key: else nothing).

        With *shield*, the wait for the turn is not cancelled.
        """
        if key is None:
            return nullcontext()
        return one_at_a_time(self.halt_writes, key, shield=shield)

    # -- called by the supervisor --------------------------------------------

    def start(self, nursery: trio.Nursery, lanes: list[Lane]) -> None:
        """Run in *nursery*: the idle reaper, and an actor for each of *lanes*."""
        self.nursery = nursery
        start_task(nursery, self.reaper.run, name="inturn.idle_reaper")
        for lane in lanes:
            self.spawn(lane)

    def spawn(self, lane: Lane) -> None:
        """Start an actor task for *lane*; or leave it waiting for a slot (`Core.take_slot`).

        The core attached *lane* just now: if it lingers, it left the core then (`linger`),
        and this wakes it.
        """
        woken = bool(self.lingering) and self.lingering.pop(lane, None) is not None
        if self.core.take_slot(lane):
            if woken:
                self._resume(lane)
            else:
                self._start(lane)

    def start_holding(self, lane: Lane | None) -> None:
        """Start a task for *lane*, which the core just gave a slot (if any lane)."""
        if lane is not None:
            self._start(lane)

    def _start(self, lane: Lane) -> None:
        actor = self.actors[lane] = self.make_actor(self, lane)
        self.log.debug("actor.spawned", key=actor.key)
        self.serve(actor)

    def serve(self, actor: ActorLike) -> None:
        """Run *actor* in a spare worker task; or in a new one.

        A key that becomes active costs a wake-up, not a task: spawning one
        (and the collector's walks over many live ones) is what made every
        new key's first job cost twice a job on a busy key.
        """
        if self.spare:
            worker, _ = self.spare.popitem()  # the latest parked: the others age out
            worker.give(actor)
            return
        assert self.nursery is not None
        # A constant name: trio would otherwise format one per task.
        start_task(self.nursery, Worker(self).run, actor, name="inturn.actor")

    def linger(self, actor: ActorLike, seconds: float = math.inf) -> None:
        """*actor* has nothing to run and ends: its lane waits for work with no actor, and
        `wake` gives it one again, or after *seconds* `retire` decides its fate.

        A lane left with nothing at all leaves the core at once (`Core.try_retire`):
        lingering, it is a deadline here and nothing more (what a million keys seen
        once hold for ``idle_timeout``), and a send gives it a new actor as to a key
        never seen (`spawn`).  One whose next job is still being journaled stays,
        for that send to wake.
        """
        lane = actor.lane
        del self.actors[lane]
        if seconds == math.inf:
            self.lingering[lane] = seconds
        else:
            self._linger_until(lane, self.now() + seconds)
            self.core.try_retire(lane)

    def _linger_until(self, lane: Lane, deadline: float) -> None:
        self.lingering[lane] = deadline
        self.reaper.add(deadline, lane)

    def retire(self, lane: Lane) -> None:
        """Lingering *lane*'s deadline passed (taken out of `lingering`): it retires, or
        runs again."""
        core = self.core
        if not core.is_attached(lane):  # it left the core when it began to linger
            if core.awaits_commit(lane):
                self.lingering[lane] = math.inf  # until that send's answer wakes it
            else:
                self.log.debug("actor.exited", key=key_of(lane))
        elif core.keeps_while_halted(lane):
            self._resume(lane)  # its actor gives them back, then retires
        elif core.try_retire(lane):
            self.log.debug("actor.exited", key=key_of(lane))
        elif core.has_work(lane):
            self._resume(lane)  # a send landed as the linger ran out: serve it
        else:
            self.lingering[lane] = math.inf  # the head is still being journaled: its send wakes it

    def retired(self, actor: ActorLike) -> None:
        """*actor*'s lane is gone (`Core.resting`): forget it; a fleet member has room for
        one more claim."""
        self._exited(actor)
        if self.fleet is not None:
            self.fleet.retired()

    def _exited(self, actor: ActorLike) -> None:
        """*actor* ended with its lane (retired, or its key let go): forget it."""
        del self.actors[actor.lane]
        self.log.debug("actor.exited", key=actor.key)

    # -- a fleet member's (`inturn.fleet`), for its actors ---------------------

    async def let_go(self, actor: ActorLike) -> bool:
        """*actor*'s key, run dry, goes back to the journal (`Core.resting`): True if it is
        released (the actor ends), False if jobs came for it meanwhile."""
        assert self.fleet is not None
        assert actor.key is not None
        if not await self.fleet.let_go(actor.key):
            return False
        self._exited(actor)
        return True

    async def renew_lease(self) -> None:
        """Renew this member's lease if it may have stalled past its heartbeat, or stop
        (`LeaseLost`): before a handler runs a start an earlier write marked."""
        assert self.fleet is not None
        await self.fleet.journal.hold()

    async def complete_last(
        self, changes: Sequence[Change], release: Release, now: float | None
    ) -> Sequence[FleetChange]:
        """Write a completion, and *release* its key in the same transaction (`Core.completion`)."""
        assert self.fleet is not None
        return await self.fleet.complete_last(changes, release, now)

    def give_slot(self, lane: Lane) -> None:
        """*lane* has nothing to run now: its slot goes to the oldest lane waiting."""
        self.start_holding(self.core.give_slot(lane))

    def wake(self, lane: Lane) -> None:
        """New work may be startable in *lane*: a lingering lane gets an actor (a running
        one will see the work)."""
        deadline = self.lingering.get(lane)
        if deadline is None:
            return
        if self.core.is_attached(lane):
            del self.lingering[lane]
            self._resume(lane)
        elif deadline == math.inf:  # held for a send that was refused: it lingers anew
            self._linger_until(lane, self.now() + self.idle_timeout)

    def _resume(self, lane: Lane) -> None:
        """Lingering *lane* (taken out of `lingering`) has work: it gets an actor again."""
        actor = self.actors[lane] = self.make_actor(self, lane)
        self.serve(actor)

    @property
    def idle(self) -> bool:
        """Nothing runs or waits here (a fleet member: nor in the journal for it, `Fleet.settled`)."""
        return self.core.idle and (self.fleet is None or self.fleet.settled)

    async def wait_idle(self) -> None:
        while not self.idle and not self.closed:
            self.idle_waiters += 1
            try:
                await self._idle.park()
            finally:
                self.idle_waiters -= 1

    def check_idle(self) -> None:
        if self.idle_waiters and (self.idle or self.closed):
            self._idle.unpark_all()

    def unix_now(self) -> float:
        """Unix time by the supervisor's clock (virtual under a mock clock).

        The ``now`` of the writes that finish a job or take a unique key, so
        that dedup windows pass in the time the handlers see.
        """
        return self.core.unix_time(self.now())

    def close(self) -> None:
        """No more jobs are accepted; every ``ask`` still waiting is told; spare workers exit.

        (Woken to exit, not cancelled with the nursery: a cancel costs four times a wake-up.)
        """
        self.closed = True
        while self.spare:
            worker, _ = self.spare.popitem()
            worker.give(None)
        for waiter in self.waiters.values():
            waiter.closed = True
            waiter.event.set()
        self.waiters.clear()
        self.check_idle()

    async def give_back_marks(self) -> None:
        """At shutdown: give back each attempt marked early that never started.

        A head's start journaled with its acceptance or its predecessor's
        completion, whose actor was stopped before it ran, must not count as
        an attempt the next supervisor sees as cut short.
        """
        await self.give_back(self.core.marked_heads())

    async def give_back(self, entries: list[Entry]) -> None:
        """Give back the attempt each of *entries* had marked, shielded; a failure is logged.

        The jobs are accepted whatever comes: an attempt not given back only
        counts one attempt too many.
        """
        if not entries:
            return
        with trio.CancelScope(shield=True):
            try:
                await self.journal.write(self.core.give_back(entries))
            except Exception as exc:
                # Text, not exc_info: a renderer would show this frame's locals (the entries' data).
                error, exception = describe(exc), exception_text(exc)
                for entry in entries:
                    self.log.warning(
                        "job.attempt_not_returned",
                        key=entry.key,
                        job_id=entry.id,
                        error=error,
                        exception=exception,
                    )

    # -- called by actors ----------------------------------------------------

    def finished(
        self, job_id: int, result: object = None, error: BaseException | None = None
    ) -> None:
        """Job *job_id* is terminal: tell its ``ask``, if any; maybe the supervisor is idle."""
        self.answer(job_id, result, error)
        self.check_idle()

    def answer(
        self, job_id: int, result: object = None, error: BaseException | None = None
    ) -> None:
        """Tell the ``ask`` that waits for job *job_id*, if any, how it ended."""
        waiter = self.waiters.pop(job_id, None)
        if waiter is not None:
            waiter.result, waiter.error = result, error
            waiter.event.set()

    def observe(self, observer: Observer) -> None:
        """Report to *observer*: every event it is told (its log tee), attempts and steps."""
        from ._otel import ObservingLog

        self.observer = self.steps.observer = observer
        self.log = ObservingLog(self.log, observer)
        self.debug = True

    async def call_handler(self, job: Job | list[Job], entries: Sequence[Entry]) -> object:
        """Call the handler with *job*, or with a batch of jobs (*entries*'); ``running``
        counts the jobs; the observer, if any, spans the call (`Observer.processing`)."""
        count = len(entries)
        self.running += count
        try:
            if self.observer is None:
                return await self._handle(job)
            with self.observer.processing(entries, self.core.epoch(entries[0].lane)):
                return await self._handle(job)
        finally:
            self.ran(count)

    async def _handle(self, job: Job | list[Job]) -> object:
        if self.job_timeout is None:
            return await self.handler(job)
        with trio.move_on_after(self.job_timeout):
            return await self.handler(job)
        what = f"job {job.id}" if isinstance(job, Job) else f"the batch from job {job[0].id}"
        raise TimeoutError(f"{what} ran longer than job_timeout={self.job_timeout}s")

    async def wait_stopped(self) -> None:
        """Wait until an attempt stops (a skip waiting for the one it cut short)."""
        self.stop_waiters += 1
        try:
            await self.stopped.park()
        finally:
            self.stop_waiters -= 1

    def ran(self, count: int) -> None:
        """*count* jobs' handler call ended."""
        self.running -= count
        if not self.running and self.nothing_runs is not None:
            self.nothing_runs.set()

    async def wait_nothing_runs(self) -> None:
        """Wait until no handler runs (a graceful shutdown's grace)."""
        while self.running:
            self.nothing_runs = trio.Event()
            await self.nothing_runs.wait()

    def interrupt_all(self) -> None:
        """Cancel what every actor does now: running attempts give their attempts back."""
        for actor in self.actors.values():
            if actor.interruptible is not None:
                actor.interruptible.cancel()

    # -- supervision ---------------------------------------------------------

    async def supervise(self, actor: ActorLike, crash: Exception) -> None:
        """*actor* crashed with *crash*: restart it, within the restart budget, until it
        returns; or escalate.  (Its `Worker` runs it first: a frame fewer per activation.)"""
        while True:
            # Text, not exc_info: a renderer would show the frames' locals, payloads among them.
            self.log.error(
                "actor.crashed",
                key=actor.key,
                error=describe(crash),
                exception=exception_text(crash),
            )
            # Another process holds the journal now: nothing here may go on.
            if isinstance(crash, LeaseLost):
                self.escalate(crash)
                return
            if self.fleet is not None and isinstance(crash, JournalError):
                # A fleet member rides out its server's outage: it starts nothing
                # until the journal answers again, or its heartbeat runs out
                # (LeaseLost).  Not a crash the restart budget counts.
                await trio.sleep(self.fleet.poll_interval)
            elif not self._may_restart():
                self.escalate(crash)
                return
            # Logged as text: the frames it went through (their locals, the attempt's
            # job and payload among them) need not live as long as the restarted actor.
            _forget_frames(crash)
            try:
                await actor.run()
            except Exception as exc:
                crash = exc
            else:
                return

    def _may_restart(self) -> bool:
        now = self.now()
        self._crashes.append(now)
        while self._crashes[0] <= now - self.restart_window:
            self._crashes.popleft()
        return len(self._crashes) <= self.max_restarts

    def escalate(self, error: BaseException) -> None:
        """Stop the supervisor; *error* comes out of ``open_supervisor``."""
        if self.escalated is None:
            self.escalated = error
            if isinstance(error, LeaseLost):  # an event too, for on_event and the logs
                self.log.error("supervisor.lease_lost", error=describe(error))
        assert self.nursery is not None
        self.nursery.cancel_scope.cancel()


def _forget_frames(error: BaseException) -> None:
    """Drop the tracebacks of *error* and of every exception it chains or groups."""
    pending, seen = [error], set[int]()
    while pending:
        each = pending.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        each.__traceback__ = None
        pending.extend(other for other in (each.__cause__, each.__context__) if other is not None)
        if isinstance(each, BaseExceptionGroup):
            pending.extend(each.exceptions)
