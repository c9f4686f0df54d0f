"""The pool of worker tasks that actors run in, and the one timer that idles keys and workers out.

A key that becomes active costs a wake-up, not a task: a spare `Worker`
takes its actor.  `IdleReaper` ends the linger of idle lanes and the life of
spare workers, one timer for all of them.  Both know their runtime
(`inturn._runtime.Runtime`) and the actors they serve only by the protocols
below, so that this module sits under the actors, not beside them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol

import attrs
import trio

from .core import Lane

__all__ = ["REAPER_SLACK", "IdleReaper", "Worker"]


REAPER_SLACK: Final = 1 / 16
"""An idle actor or spare task may exit up to this fraction of ``idle_timeout`` early, so
that the keys going idle in that span cost `IdleReaper` one wake-up, not one each."""


class Served(Protocol):
    """What a worker runs: an `inturn.actors.Actor`."""

    interruptible: trio.CancelScope | None
    interrupted: bool

    async def run(self) -> None: ...

    async def supervise(self, crash: Exception) -> None: ...


class Pool(Protocol):
    """What workers and the reaper share with their runtime (`inturn._runtime.Runtime`)."""

    closed: bool
    spare: dict[Worker, None]
    lingering: dict[Lane, float]
    reaper: IdleReaper
    now: Callable[[], float]

    def retire(self, lane: Lane) -> None: ...


@attrs.define(eq=False)
class IdleReaper:
    """Times out lingering lanes and spare workers: one timer for all of them, not one each.

    Every one waits the same *timeout*, so deadlines arrive in the order
    they went idle and a FIFO of deadlines (with one of the lanes beside it:
    a tuple each cost 64 bytes per lingering key) is already sorted.  A lane
    woken since, or lingering to a later deadline, turns its entry here
    stale (its deadline in *runtime*'s ``lingering`` is another, or gone).
    Spare workers need no entry: *spare* holds them oldest first, each with
    the time it parked (`Worker.since`), so the first one's deadline is the
    next (a worker parks after every job of a key that goes idle: an entry
    each cost as much as the lane's).

    At the first deadline it also expires those due within *slack* seconds:
    one wake-up for the many keys that went idle in that span, not one each
    (at a key seen once, that wake-up was a task switch per job).  Early, not
    late: no lane lingers past its ``idle_timeout``.
    """

    timeout: float
    slack: float
    spare: dict[Worker, None]
    runtime: Pool
    _deadlines: deque[float] = attrs.field(factory=deque)
    _lanes: deque[Lane] = attrs.field(factory=deque)
    """Whose each of `_deadlines` is."""
    _added: trio.Event = attrs.field(factory=trio.Event)

    def add(self, deadline: float, lane: Lane) -> None:
        self._deadlines.append(deadline)
        self._lanes.append(lane)
        self._added.set()

    def spare_added(self) -> None:
        """A worker parked where none was spare: its deadline may be the only one."""
        self._added.set()

    async def run(self) -> None:
        deadlines, lanes, spare, timeout = self._deadlines, self._lanes, self.spare, self.timeout
        lingering = self.runtime.lingering
        while True:
            # Most entries went stale long before their deadline (a busy key is
            # woken again and again): drop them without sleeping.
            while deadlines and lingering.get(lanes[0]) != deadlines[0]:
                deadlines.popleft()
                lanes.popleft()
            first = deadlines[0] if deadlines else math.inf
            if spare:  # no later than an actor's: it parked after that one went idle
                first = min(first, next(iter(spare)).since + timeout)
            if first == math.inf:
                self._added = trio.Event()
                await self._added.wait()
                continue
            await trio.sleep_until(first)
            now = self.runtime.now() + self.slack
            while deadlines and deadlines[0] <= now:
                lane = lanes.popleft()
                if lingering.get(lane) == deadlines.popleft():  # not woken since
                    del lingering[lane]
                    self.runtime.retire(lane)
            while spare:
                worker = next(iter(spare))
                if worker.since + timeout > now:
                    break
                del spare[worker]
                worker.give(None)


@attrs.define(eq=False)
class Worker:
    """A task that serves one lane's `Actor` after another; between them, spare.

    A spare worker parks until ``Runtime.serve`` hands it an actor, or
    ``idle_timeout`` passes (`IdleReaper`) and it exits.
    """

    runtime: Pool
    since: float = 0.0
    """When it last parked as a spare worker (`IdleReaper` times it out from then)."""
    _next: Served | None = None
    _parked: trio.lowlevel.Task | None = None

    async def run(self, actor: Served | None) -> None:
        """Serve *actor*, then the actors given to the task while it is spare.

        In one cancel scope for all of them, not one each (a scope costs
        about as much as a checkpoint), until an operator cancels it through
        the actor it serves (`Actor.interruptible`): that actor goes on in a
        fresh scope.  A cancel that lands as its actor ends, meant for it, is
        left behind with the scope before another actor runs.
        """
        while actor is not None:
            with trio.CancelScope() as scope:
                while actor is not None:
                    actor.interruptible, actor.interrupted = scope, False
                    try:
                        await actor.run()
                    except Exception as exc:
                        crash: Exception | None = exc
                    else:
                        crash = None
                    if crash is not None:  # restarted outside the handler: nothing chains
                        await actor.supervise(crash)
                        crash = None
                    actor.interruptible = None
                    actor = None  # ended: a parked worker keeps no actor (nor its lane) alive
                    if not scope.cancel_called:  # else the cancel was meant for the one that ended
                        actor = await self._wait_for_actor()
            if actor is None and scope.cancel_called:
                actor = await self._wait_for_actor()

    @trio.lowlevel.enable_ki_protection
    async def _wait_for_actor(self) -> Served | None:
        """Park as a spare worker; the actor to run next, or None to exit."""
        runtime = self.runtime
        if runtime.closed:
            return None
        self.since = runtime.now()
        if not runtime.spare:
            runtime.reaper.spare_added()
        runtime.spare[self] = None
        self._parked = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort_wait)
        actor, self._next = self._next, None
        return actor

    def _abort_wait(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._parked = None
        self.runtime.spare.pop(self, None)
        return trio.lowlevel.Abort.SUCCEEDED

    def give(self, actor: Served | None) -> None:
        """Run *actor* next (taken from the spare ones already); None: exit."""
        self._unpark(actor)

    @trio.lowlevel.enable_ki_protection
    def _unpark(self, actor: Served | None) -> None:
        task = self._parked
        if task is not None:
            self._parked = None
            self._next = actor
            trio.lowlevel.reschedule(task)
