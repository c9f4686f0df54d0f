"""`open_supervisor` and `Supervisor`: the public face of the runtime.

Theory of operation
-------------------
``open_supervisor`` opens the journal, rebuilds the core from it, and runs
one nursery for all actor tasks.  The user's ``async with`` body runs inside
that nursery, so its lifetime is structured the way trio's is:

* leaving the body normally waits until idle (every job terminal or parked on
  a halted key), then forgets the lingering keys (none holds a task);
* cancellation stops at once: running handlers are cancelled, nothing is
  marked failed, unfinished jobs stay in the journal for the next open;
* a runtime error beyond the restart budget cancels everything and comes out
  of ``open_supervisor`` as itself.

The nursery is an implementation detail, so its exception groups are
unwrapped: an exception from the body, or an escalated runtime error, comes
out bare when it is the only one.  Two or more real errors (the body failed
*and* the runtime escalated) come out as an `ExceptionGroup`, so neither is
lost.

``send`` follows one shape: validate -> encode -> reserve in the core
(synchronous: id, FIFO place) -> journal (the one await; the journal alone
enforces unique keys; a job that will start next, with a slot, has its start
journaled in the same write) -> commit (synchronous: the gate may open).  A
failure before the commit retracts the reservation, so a rejected ``send``
changes nothing.  ``send_many`` is the same shape for a whole batch, with one
write.

Operators' fixes (``skip``, ``requeue``, ``pause``, ...) are methods here and
nowhere else: `inturn.operate` and the ``inturn`` command reach them
directly, or through the journal as a `Command` that `serve_commands` takes
and carries out while the supervisor runs.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import random as _random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal, NoReturn, TypeVar, cast, final

import attrs
import trio

from ._checks import MAX_COUNT, MAX_PAYLOAD, check_count, check_handler, check_number
from ._claims import one_at_a_time, until_unclaimed
from ._fixes import (
    SKIPPED_TEXT,
    check_job_id,
    check_limit,
    purge_dead,
    requeue_check,
    schedule_point,
    skip_check,
)
from ._schedule import PAGE, due_time
from ._tasks import start_task
from .actors import BatchHandler, Handler, Runtime, Waiter
from .codec import Codec, JSONCodec
from .core import Core, Entry, Lane, Run
from .errors import (
    EncodeError,
    InturnError,
    JobDiscarded,
    JobStateError,
    KeyNotFound,
    PermanentError,
    SupervisorClosed,
    describe,
)
from .events import Event, EventTee, debug_is_off, exception_text, logs_debug
from .fleet import Fleet, FleetJournal, capacity_for
from .info import JobInfo, KeyFilter, KeyInfo
from .jobs import Item, Stats
from .journal import (
    Answer,
    Append,
    Change,
    Command,
    Discard,
    Due,
    Halt,
    Journal,
    MarkAttempt,
    MemoryJournal,
    Requeue,
    Resume,
    Revive,
    StoredJob,
)
from .keys import validate_key, validate_unique, validate_unique_for
from .retry import Retry

__all__ = ["Supervisor", "open_supervisor"]


@final
class Supervisor:
    """Accepts jobs and runs them: one at a time, in order, per key.

    Made by `open_supervisor`; valid inside its ``async with`` block.
    """

    def __init__(self, runtime: Runtime, fleet: Fleet | None) -> None:
        self._runtime = runtime
        self._fleet = fleet
        """This supervisor's part of a fleet (``runtime.fleet`` too); None when it holds its
        journal alone."""
        self._skipping: dict[int, trio.Event] = {}
        """Skips under way, by job id."""
        self._halting: dict[str, trio.Event] = {}
        """Keys whose halt an operator's `Halt`, `Resume` or `Revive` being journaled may
        change (`_changing_halt`)."""
        self._valid_key: str | None = None
        """The last key `send` validated."""
        self._answered: trio.Event | None = None
        """Set when a write that accepts jobs is answered; made only while a skip waits for
        one (`_skip`)."""

    async def send(
        self,
        key: str,
        payload: object,
        *,
        unique: str | None = None,
        unique_for: float | None = None,
        delay: float | None = None,
        at: float | datetime.datetime | None = None,
    ) -> int:
        """Accept a job for sequence *key*; return its id once it is journaled.

        It runs after every job accepted before it for *key* is terminal, and
        never blocks because *key* is busy: the backlog has no limit.

        With *unique*, no other job can take that key while this one is
        unfinished, and with *unique_for*, for that many seconds more from
        when it completes or is discarded (a dedup window, across restarts:
        the journal keeps it).  The window is timed by the supervisor's
        clock, so it passes in virtual time under trio's mock clock.

        With *delay* (seconds) or *at* (a Unix time, or an aware `datetime`)
        the job is *scheduled*: journaled now, holding its unique key, it
        joins *key*'s sequence only when it falls due, behind whatever is
        queued for *key* then, and blocks nothing until then.  Due times are
        durable and measured on trio's clock, so they elapse in virtual time
        under a mock clock; one in the past is due at once.

        Raises:
            TypeError: *key* or *unique* is not a `str`, *unique_for* not a
                number, *delay* or *at* of a wrong type.
            ValueError: *delay* and *at* both given, or out of range (see `due_time`).
            InvalidKey: *key* or *unique* breaks a key rule.
            ValueError: *unique_for* is not > 0 and at most ten years, or
                comes without *unique*.
            EncodeError: the codec cannot round-trip *payload*.
            DuplicateError: another job reserves *unique*: it is unfinished,
                or finished within its window (``until`` says when that ends).
            SupervisorClosed: the supervisor has stopped.
            JournalError: the journal could not store the job.

        Any of these leaves everything as it was: nothing is journaled.  The one
        exception: a supervisor cancelled while the job was being journaled
        raises `SupervisorClosed` with the job already in the journal, where
        the next supervisor opened on it finds it.
        """
        if type(key) is not str or key != self._valid_key:  # a producer often repeats one
            key = self._valid_key = validate_key(key)
        job_id = await self._accept(key, payload, unique, unique_for, delay, at)
        await schedule_point()
        return job_id

    async def send_many(self, jobs: Iterable[tuple[str, object] | Item]) -> list[int]:
        """Accept several sequenced jobs at once, all or none, in one journal write.

        *jobs* holds ``(key, payload)`` pairs, or `inturn.Item` values for jobs
        with a unique key or a due time (``Item(key, payload, unique=...,
        unique_for=..., delay=..., at=...)``, as `send` takes them); they are
        accepted in that order, so jobs of one key run in the order they are
        listed (a scheduled one joins its key when due).  This is how one producer gets a durable journal's
        group commit without concurrency.

        Returns:
            The jobs' ids, in the order given.

        Raises:
            TypeError: an item is not a ``(key, payload)`` pair or an `Item`,
                or a key is not a `str`.
            ValueError: two items take the same unique key.

        and every error of `send`: one bad item (a unique key another job
        reserves, say) rejects the whole batch, with nothing journaled.
        """
        self._check_open()
        runtime = self._runtime
        batch: list[tuple[str, bytes, str | None]] = []  # what `Core.reserve_many` takes
        extras: dict[int, tuple[float | None, float | None]] = {}  # an `Item`'s window, due time
        now = runtime.unix_now()
        first: dict[str, int] = {}  # unique key -> the item that takes it
        scheduled = False  # an item has a due time
        items: Iterable[object] = jobs  # checked here: callers may pass anything
        valid: str | None = None  # the last key validated: a batch often repeats one
        for position, item in enumerate(items):
            if isinstance(item, tuple) and len(item) == 2:  # no unique key, due at once
                key, payload = item
                if type(key) is not str or key != valid:
                    key = valid = validate_key(key)
                batch.append((key, self._encode(payload), None))
                continue
            due: float | None = None
            if isinstance(item, Item):
                key, payload, unique, unique_for = (
                    item.key,
                    item.payload,
                    item.unique,
                    item.unique_for,
                )
                due = due_time(item.delay, item.at, now)
            else:
                raise TypeError(
                    "send_many takes (key, payload) pairs or inturn.Item values,"
                    f" not a {type(item).__name__}"
                )
            key, unique = validate_key(key), validate_unique(unique)
            unique_for = validate_unique_for(unique_for, unique)
            if unique is not None and first.setdefault(unique, position) != position:
                raise ValueError(
                    f"send_many: items {first[unique]} and {position} both take unique key"
                    f" {unique!r}"
                )
            batch.append((key, self._encode(payload), unique))
            extras[position] = (unique_for, due)
            scheduled = scheduled or due is not None
        if not batch:
            await trio.lowlevel.checkpoint()
            return []
        if self._fleet is not None:
            ids = await self._fleet.new_ids(len(batch))
            appends = [
                Append(job_id, key, data, unique, *extras.get(position, (None, None)))
                for position, (job_id, (key, data, unique)) in enumerate(
                    zip(ids, batch, strict=True)
                )
            ]
            await self._fleet.append(appends, now=now)
            await schedule_point()
            return ids
        core = runtime.core
        later: list[Append] = []  # the scheduled jobs'
        windows: list[float | None] = []  # the others' unique_for, if any has one
        if not scheduled:  # the core reserves the whole batch in one call
            runs = core.reserve_many(batch)
            ids = list(range(runs[0].first, core.next_id))
            if extras:
                windows = [extras.get(position, (None, None))[0] for position in range(len(batch))]
        else:  # ids rise in the order given, the scheduled jobs' too
            ids, runs, now_due = [], [], []
            for position, (key, data, unique) in enumerate(batch):
                unique_for, due = extras.get(position, (None, None))
                if due is None:
                    runs.extend(core.reserve_many([(key, data, unique)]))
                    now_due.append((key, data, unique))
                    windows.append(unique_for)
                    ids.append(runs[-1].first)
                else:
                    later.append(self._scheduled(key, data, unique, unique_for, due))
                    ids.append(later[-1].job_id)
            batch = now_due
        await self._journal_new(runs, batch, windows, later)
        await schedule_point()
        return ids

    async def submit(
        self,
        payload: object,
        *,
        unique: str | None = None,
        unique_for: float | None = None,
        delay: float | None = None,
        at: float | datetime.datetime | None = None,
    ) -> int:
        """Accept a job with no key: it runs concurrently with everything else.

        *unique*, *unique_for*, *delay* and *at* are `send`'s.  Raises the same
        errors as `send`.
        """
        job_id = await self._accept(None, payload, unique, unique_for, delay, at)
        await schedule_point()
        return job_id

    async def ask(
        self,
        key: str,
        payload: object,
        *,
        unique: str | None = None,
        unique_for: float | None = None,
        delay: float | None = None,
        at: float | datetime.datetime | None = None,
    ) -> object:
        """`send` a job, wait for it, and return what its handler returned.

        Raises:
            JobDiscarded: the job was discarded; its ``__cause__`` is the last failure.
            SupervisorClosed: the supervisor stopped before the job was terminal.

        and the errors of `send`.  If the caller is cancelled, the job itself
        still runs: it was accepted.
        """
        key = validate_key(key)
        if self._fleet is not None:
            raise NotImplementedError(
                "ask() on a fleet member: another member may run the job, and its result"
                " stays there; use send() and a result store of your own"
            )
        job_id = await self._accept(key, payload, unique, unique_for, delay, at)
        # _accept has no schedule point after the commit: the job cannot have
        # finished before its waiter is registered.
        waiter = self._runtime.waiters[job_id] = Waiter()
        try:
            await waiter.event.wait()
        finally:
            self._runtime.waiters.pop(job_id, None)
        if waiter.closed:
            raise SupervisorClosed(f"the supervisor stopped before job {job_id} finished")
        if waiter.error is not None:
            raise JobDiscarded(job_id) from waiter.error
        return waiter.result

    async def shutdown(self, grace: float = 30.0) -> None:
        """Stop gracefully: accept nothing, start nothing, let running handlers finish.

        At once, `send`, `submit`, `ask` and `send_many` raise
        `SupervisorClosed` (an ``ask`` still waiting is told) and no job
        starts any more; handlers already running have *grace* seconds to
        return, and their jobs complete or fail as usual.  Those still
        running then are cancelled, and their attempts are given back: a
        restart runs them as the same attempt.  Everything not run stays in
        the journal.  Returns once no handler runs; leave the ``async with``
        block next (docs/api.md has a recipe for SIGTERM).
        """
        grace = _number("grace", grace, minimum=0)
        runtime = self._runtime
        runtime.close()
        runtime.core.stop()
        runtime.log.info("supervisor.stopping", running=runtime.running, grace=grace)
        with trio.move_on_after(grace):
            await runtime.wait_nothing_runs()
        cancelled = runtime.running
        runtime.interrupt_all()
        with trio.CancelScope(shield=True):
            await runtime.wait_nothing_runs()
        runtime.log.info("supervisor.stopped", cancelled=cancelled)

    async def wait_idle(self) -> None:
        """Wait until every accepted job is terminal, or parked on a halted key.

        Raises:
            SupervisorClosed: the supervisor stopped with jobs still unfinished.
        """
        await trio.lowlevel.checkpoint()
        await self._runtime.wait_idle()
        if not self._runtime.core.idle:
            raise SupervisorClosed("the supervisor stopped with jobs unfinished")

    async def resume(self, key: str) -> None:
        """Let a key halted by a discard, or paused, run its queued jobs again, in order.

        Resuming a key that is not halted does nothing.

        Raises:
            TypeError, InvalidKey: *key* is not a valid key.
            SupervisorClosed: the supervisor has stopped.
        """
        key = validate_key(key)
        self._check_open()
        runtime = self._runtime
        if self._fleet is not None and not self._fleet.owns(key):
            await self._fleet.fix([Resume(key)])  # a halted key is nobody's: claimable now
            runtime.log.info("key.resumed", key=key)
            await schedule_point()
            return
        async with self._changing_halt(key):
            if not runtime.core.is_halted(key):
                await trio.lowlevel.checkpoint()
                return
            async with runtime.writing_halt(key):
                await runtime.journal.write([Resume(key)], now=runtime.unix_now())
                if runtime.core.resume(key):
                    runtime.spawn(key)
        runtime.log.info("key.resumed", key=key)
        runtime.check_idle()
        await schedule_point()

    def stats(self) -> Stats:
        """A snapshot of the supervisor's counters."""
        runtime = self._runtime
        # A lingering key counts as one actor: its deadline stands for it.
        actors = len(runtime.actors) + len(runtime.lingering)
        return runtime.core.stats(actors=actors, running=runtime.running)

    # -- the operator's view -------------------------------------------------

    async def keys(self, *, state: KeyFilter | None = None, limit: int = 100) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted: the oldest head first, so a stuck key leads.

        *state* keeps only ``"blocked"`` keys (head retrying, or key halted),
        ``"running"`` ones, or ``"halted"`` ones.  A key a discard halted
        names that job and its error (``halted_by``, ``halt_error``).

        Raises:
            TypeError, ValueError: *state* or *limit* (an int >= 1) is invalid.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        limit = check_limit(limit)
        now, asked = self._runtime.unix_now(), limit
        while True:
            infos = await self._runtime.journal.keys(state=state, limit=asked, now=now)
            live = [self._live_key(info) for info in infos]
            if state == "running":  # a recovered head still waiting to run again is not
                live = [info for info in live if info.head_state == "running"]
            if len(live) >= limit or len(infos) < asked:
                await schedule_point()
                return live[:limit]
            asked *= 2

    async def job(self, job_id: int) -> JobInfo | None:
        """The unfinished job or dead letter *job_id*; None if there is none.

        Raises:
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        info = await self._runtime.journal.job(check_job_id(job_id))
        await schedule_point()
        return None if info is None else self._live_job(info)

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        """*key*'s unfinished jobs in the order they run: its head first, then what waits behind it.

        Each with its state, attempts, last error and retry time, read from
        the journal (the backlog beyond what is in memory included); page on
        with *after*, the last id seen.

        Raises:
            TypeError, ValueError: *key*, *limit* (an int >= 1) or *after*
                (an int >= 0) is invalid.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        key = validate_key(key)
        found = await self._runtime.journal.jobs(
            key, limit=check_limit(limit), after=check_count("after", after, minimum=0)
        )
        await schedule_point()
        return [self._live_job(info) for info in found]

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Scheduled jobs not due yet, the earliest due first (of *key*, if given).

        Each with its ``due_at``; `skip` cancels one before it is due.

        Raises:
            TypeError, ValueError: *key* or *limit* (an int >= 1) is invalid.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        if key is not None:
            key = validate_key(key)
        found = await self._runtime.journal.scheduled(key=key, limit=check_limit(limit))
        await schedule_point()
        return found

    async def dead_letters(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Discarded jobs, oldest first, with their attempts and last error; of *key* if given.

        Raises:
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        if key is not None:
            key = validate_key(key)
        found = await self._runtime.journal.dead_letters(key=key, limit=check_limit(limit))
        await schedule_point()
        return found

    async def requeue(self, job_id: int, *, head: bool = False) -> int:
        """Put dead letter *job_id* back on its key, attempts reset.

        By default at the tail, under a new id, behind everything sent before.
        With *head*, in its own place instead, under its own id: before every
        job of its key accepted after it, so a key its discard halted runs it
        first again and keeps its order; the key is resumed in the same
        journaled step (a paused one too).  A dead letter that a skip under
        way made is revived once that skip returns.

        Returns:
            The id it runs under now.

        Raises:
            JobNotFound: no unfinished job or dead letter has that id.
            JobStateError: the job is not a dead letter.
            DuplicateError: an unfinished job holds its unique key.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        journal = self._runtime.journal
        info = await requeue_check(journal, job_id)
        if self._fleet is not None:
            return await self._fleet_requeue(info, head=head)
        if head:
            return await self._revive(info)
        entry = self._runtime.core.reserve(info.key, info.data, info.unique)
        if not await self._journal([entry], requeue_of=info.id):
            await requeue_check(journal, info.id)  # requeued meanwhile: say so
            raise JobStateError(info.id, "dead", "it was requeued or purged meanwhile")
        self._runtime.log.info("job.requeued", key=info.key, job_id=entry.id, was=info.id)
        await schedule_point()
        return entry.id

    async def _fleet_requeue(self, info: JobInfo, *, head: bool) -> int:
        """`requeue` for a fleet member: straight to the journal, whoever owns the key.

        The owner, if any, finds the job when it next runs dry (`Fleet.let_go`).
        """
        fleet = self._fleet
        assert fleet is not None
        if head:
            change: Change = Revive(info.id, resume=info.key is not None)
            job_id = info.id
        else:
            [job_id] = await fleet.new_ids(1)
            change = Requeue(info.id, job_id)
        if await fleet.fix([change]):
            await requeue_check(self._runtime.journal, info.id)  # requeued meanwhile: say so
            raise JobStateError(info.id, "dead", "it was requeued or purged meanwhile")
        fleet.nudge()
        self._runtime.log.info("job.requeued", key=info.key, job_id=job_id, was=info.id, head=head)
        await schedule_point()
        return job_id

    async def _revive(self, info: JobInfo) -> int:
        if info.key is None:
            return await self._revive_claimed(info)
        async with self._changing_halt(info.key):  # it may resume the key
            return await self._revive_claimed(info)

    async def _revive_claimed(self, info: JobInfo) -> int:
        runtime = self._runtime
        # A skip of the job under way may have made the dead letter: its discard
        # must be heard back before this revive is, as the journal has them.
        # (A skip that starts later waits for this revive: `Core.accepting`.)
        await until_unclaimed(self._skipping, info.id)
        resume = info.key is not None and runtime.core.is_halted(info.key)
        runtime.core.reviving(info.id)
        async with contextlib.AsyncExitStack() as halt_written:
            try:
                if resume:  # heard in journal order with a halting discard
                    await halt_written.enter_async_context(runtime.writing_halt(info.key))
                revive = Revive(info.id, resume=resume)
                superseded = await runtime.journal.write([revive], now=runtime.unix_now())
            except BaseException:
                runtime.core.revive_refused(info.id)
                self._answer_skips()
                raise
            needs_actor = False
            if superseded:
                runtime.core.revive_refused(info.id)
            else:
                stored = StoredJob(id=info.id, key=info.key, data=info.data, unique=info.unique)
                needs_actor = runtime.core.revive(stored)
                if resume:
                    assert info.key is not None
                    needs_actor = runtime.core.resume(info.key) or needs_actor
                    runtime.log.info("key.resumed", key=info.key)
        self._answer_skips()
        if superseded:
            await requeue_check(runtime.journal, info.id)  # requeued meanwhile: say so
            raise JobStateError(info.id, "dead", "it was requeued or purged meanwhile")
        lane = info.key if info.key is not None else info.id
        if needs_actor:
            runtime.spawn(lane)
        else:
            runtime.wake(lane)  # its actor may be waiting for work
        runtime.log.info("job.requeued", key=info.key, job_id=info.id, was=info.id, head=True)
        runtime.check_idle()
        await schedule_point()
        return info.id

    async def _skip_scheduled(self, info: JobInfo) -> bool:
        """Skip *info* if it is still scheduled (the scheduler may promote it meanwhile).

        Returns False if it is in its key's sequence now: skip it there.
        """
        runtime = self._runtime
        async with runtime.schedule.lock:
            info = await skip_check(runtime.journal, info.id)
            if info.state != "scheduled":
                return False
            changes = [Discard(info.id, SKIPPED_TEXT)]
            superseded = await runtime.journal.write(changes, now=runtime.unix_now())
            runtime.core.unschedule(discarded=True)  # gone, by this skip or by another writer
            if superseded:
                runtime.check_idle()
                await skip_check(runtime.journal, info.id)  # say what it is now
                raise JobStateError(info.id, "dead", "another writer discarded it first")
        runtime.log.warning("job.discarded", key=info.key, job_id=info.id, error=SKIPPED_TEXT)
        runtime.finished(info.id, error=PermanentError(SKIPPED_TEXT))
        runtime.check_idle()
        return True

    async def skip(self, job_id: int) -> None:
        """Discard unfinished job *job_id* without running it any more.

        The job never starts again: a running attempt is cancelled (it counts
        as an attempt made) and waited for, a backoff cut short, and the
        discard is journaled before this returns.  Its dead letter's error
        reads ``"skipped by operator"``; the key goes on with its next job
        even under ``on_discard="halt"`` (unless it is halted).  A job whose
        attempt finishes (completed, or discarded) as it is skipped keeps
        that outcome, and the skip raises as it would for that job now (a
        dead letter requeued at its head meanwhile is skipped again).  A
        job the journal shows before its sender heard back is skipped once
        its sender has it.  A skip cancelled before the discard is journaled
        is called off: the job runs again.

        Raises:
            JobNotFound: no unfinished job or dead letter has that id (a
                completed job is forgotten, one that completed as it was
                skipped too).
            JobStateError: the job is a dead letter already, or became one as
                it was skipped.
            JournalError: the journal refused the discard; the skip is undone
                and the job runs again.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        runtime = self._runtime
        checked = check_job_id(job_id)
        # One skip of a job at a time; the next one sees its outcome.
        async with one_at_a_time(self._skipping, checked):
            info = await skip_check(runtime.journal, checked)
            if self._fleet is not None and (
                info.state == "scheduled"  # in no key's sequence: nobody's
                or not self._fleet.owns(info.id if info.key is None else info.key)
            ):
                await self._fleet_skip(info)
                return
            if info.state == "scheduled":
                if await self._skip_scheduled(info):
                    return
                info = await skip_check(runtime.journal, checked)  # promoted meanwhile
            await self._skip(info)

    async def _fleet_skip(self, info: JobInfo) -> None:
        """`skip` of a job this fleet member does not own: its discard, straight to the journal.

        The owner, if any, finds its start or its completion superseded; a
        running attempt is not cut short, as it is on the key's own member.
        """
        runtime = self._runtime
        assert self._fleet is not None
        if await self._fleet.fix([Discard(info.id, SKIPPED_TEXT)]):
            await skip_check(runtime.journal, info.id)  # say what it is now
            raise JobStateError(info.id, "dead", "another writer discarded it first")
        runtime.log.warning("job.discarded", key=info.key, job_id=info.id, error=SKIPPED_TEXT)

    async def _skip(self, info: JobInfo) -> None:
        runtime, core = self._runtime, self._runtime.core
        lane: Lane = info.id if info.key is None else info.key
        place = info.id if info.place is None else info.place
        running = core.skip(info.id, info.key)  # from here on, it never starts
        runtime.log.info("job.skipped", key=info.key, job_id=info.id)
        if running is not None:
            self._interrupt(lane)
        try:
            await self._until_skippable(info, place, running)
            if running is None and (running := core.skip(info.id, info.key)) is not None:
                # Revived meanwhile with no skip to mark it, and started: cut it short.
                self._interrupt(lane)
                await self._until_skippable(info, place, running)
        except BaseException:  # the skip is called off: the job may run again
            core.unskip(info.id, info.key)
            runtime.wake(lane)
            raise
        if running is not None and not core.holds(running):
            # Its attempt finished first (its outcome was being journaled, or the
            # handler shielded itself): it keeps that outcome, and the caller learns
            # which from the error a skip of it raises now.  Unless it is unfinished
            # again (a dead letter another operator requeued at its head meanwhile):
            # then this skip is of the job as it is now.
            await self._skip(await skip_check(runtime.journal, info.id))
            return
        head = core.head(lane)
        waiting_head = head is not None and head.id == info.id  # in a backoff, maybe
        discard = Discard(info.id, SKIPPED_TEXT)
        changes: list[Change] = [discard]
        if head is not None and waiting_head and head.marked and not head.running:
            # Its start was journaled early (with its acceptance, or its predecessor's
            # completion) and never ran: its dead letter must not count that attempt.
            changes.insert(0, MarkAttempt(head.id, head.attempt - 1))
        try:
            superseded = await runtime.journal.write(changes, now=runtime.unix_now())
        except BaseException:
            core.unskip(info.id, info.key)
            runtime.wake(lane)
            raise
        if discard in superseded:  # another writer finished it first: it keeps that outcome
            core.unskip(info.id, info.key)  # and leaves no mark: a revive of it runs
            runtime.wake(lane)  # a head that waited for this discard: its start is superseded
            await skip_check(runtime.journal, info.id)
            raise JobStateError(info.id, "dead", "another writer discarded it first")
        core.skipped(info.id, info.key, place)
        runtime.log.warning("job.discarded", key=info.key, job_id=info.id, error=SKIPPED_TEXT)
        runtime.finished(info.id, error=PermanentError(SKIPPED_TEXT))
        if waiting_head:
            self._interrupt(lane, backing_off=True)  # cut its backoff short
        runtime.wake(lane)  # the actor goes on to the next job

    async def _until_skippable(self, info: JobInfo, place: int, running: Entry | None) -> None:
        """Wait until skipped job *info* (at *place*) is accepted and, if it was *running*, stopped.

        The journal may show a job before its sender's write is answered (a
        durable write commits first): its sender commits it here, then it can
        be discarded.
        """
        runtime = self._runtime
        while runtime.core.accepting(info.id, info.key, place):
            if runtime.closed:  # its sender never commits it now
                raise SupervisorClosed(f"the supervisor stopped while job {info.id} was sent")
            if self._answered is None:
                self._answered = trio.Event()
            await self._answered.wait()
        while running is not None and running.running:
            await runtime.wait_stopped()

    async def retry_now(self, key: str) -> bool:
        """Run *key*'s head at once if it is waiting out a retry's backoff.

        Returns:
            Whether a waiting head was woken.

        Raises:
            KeyNotFound: *key* has no unfinished jobs and is not halted.
            SupervisorClosed: the supervisor has stopped.
        """
        key = validate_key(key)
        self._check_open()
        runtime = self._runtime
        if self._fleet is not None and not self._fleet.owns(key):
            raise NotImplementedError(
                "retry_now cuts a backoff short in the fleet member that owns the key only;"
                " call it there"
            )
        await trio.lowlevel.checkpoint()
        head = runtime.core.head(key)
        if head is None and not runtime.core.is_known(key):
            raise KeyNotFound(key)
        if head is None or head.running:
            return False
        return self._interrupt(key, backing_off=True)

    async def pause(self, key: str) -> None:
        """Halt *key*: its running job finishes, nothing else starts until `resume`.

        A key whose only jobs are scheduled can be paused too: they join it
        when due, and wait.  A pause returns once the journal holds the halt;
        it waits for another operator's halt, resume or head requeue of *key*
        being journaled first (`_changing_halt`).

        Raises:
            KeyNotFound: *key* has no unfinished jobs (scheduled ones included)
                and is not halted.
            SupervisorClosed: the supervisor has stopped.
        """
        key = validate_key(key)
        self._check_open()
        runtime = self._runtime
        if self._fleet is not None and not self._fleet.owns(key):
            journal = runtime.journal
            if not await journal.jobs(key, limit=1) and not await journal.scheduled(
                key=key, limit=1
            ):
                raise KeyNotFound(key)
            await self._fleet.fix([Halt(key)])  # its owner starts nothing more
            runtime.log.info("key.paused", key=key)
            await schedule_point()
            return
        if not runtime.core.is_known(key) and not await runtime.journal.scheduled(key=key, limit=1):
            await trio.lowlevel.checkpoint()
            raise KeyNotFound(key)
        async with self._changing_halt(key):
            if runtime.core.is_halted(key):
                await trio.lowlevel.checkpoint()
                return
            # Halted in the core first, so nothing starts while the Halt is being
            # journaled; a start already under way takes itself back (Core.may_run).
            runtime.core.pause(key)
            try:
                await runtime.journal.write([Halt(key)], now=runtime.unix_now())
            except BaseException:
                if runtime.core.pause_refused(key):
                    runtime.spawn(key)
                raise
            runtime.core.paused(key)
        runtime.log.info("key.paused", key=key)
        runtime.check_idle()
        await schedule_point()

    async def purge_dead(self, *, older_than: float, key: str | None = None) -> int:
        """Delete dead letters discarded more than *older_than* seconds ago; return how many.

        Raises:
            TypeError, ValueError: *older_than* is not a number >= 0, or *key* is invalid.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        return await purge_dead(self._runtime.journal, older_than, key, self._runtime.unix_now())

    def _live_key(self, info: KeyInfo) -> KeyInfo:
        """The journal's view of a key, corrected by what runs right now (see `_waiting`)."""
        if info.head_job_id is None or not self._waiting(
            info.key, info.head_job_id, info.head_state
        ):
            return info
        return attrs.evolve(info, head_state="queued")

    def _live_job(self, info: JobInfo) -> JobInfo:
        """*info* as this supervisor sees it: queued if it waits here to run again."""
        if self._waiting(info.key, info.id, info.state):
            return attrs.evolve(info, state="queued")
        return info

    def _waiting(self, key: str | None, job_id: int, state: object) -> bool:
        """Whether the journal shows *job_id* as running while it waits here.

        The journal counts an attempt as running from its mark until it ends;
        a head recovered with the attempt a dead process marked waits (for a
        slot, say) until it runs again: queued, with the attempts counted.
        """
        if state != "running":
            return False
        head = self._runtime.core.head(job_id if key is None else key)
        return head is not None and head.id == job_id and not head.running

    # -- operators' commands, through the journal ----------------------------

    async def serve_commands(self) -> None:
        """Carry out the `Command`s operators send through the journal, each in a task of its own.

        Runs for as long as the supervisor does.  A journal failing to hand
        them out is logged and asked again a second later: the jobs go on.
        """
        runtime = self._runtime
        assert runtime.nursery is not None
        while True:
            try:
                commands = await runtime.journal.commands()
            except Exception as exc:
                runtime.log.error(
                    "commands.failed", error=describe(exc), exception=exception_text(exc)
                )
                await trio.sleep(1.0)
                continue
            for command in commands:
                start_task(runtime.nursery, self._answer, command, name="inturn.command")

    async def _answer(self, command: Command) -> None:
        runtime = self._runtime
        runtime.log.info("command.taken", command=command.verb, command_id=command.id)
        try:
            result = await self.carry_out(command)
        except (InturnError, TypeError, ValueError) as exc:
            answer = Answer(error=type(exc).__name__, error_args=_plain(exc.args))
        else:
            answer = Answer(result=result)
        try:
            await runtime.journal.answer(command.id, answer)
        except Exception as exc:
            runtime.log.error(
                "command.not_answered",
                command_id=command.id,
                error=describe(exc),
                exception=exception_text(exc),
            )

    async def carry_out(self, command: Command) -> int | bool | None:
        """Run *command* with the method its verb names; return that method's result."""
        match command.verb:
            case "skip":
                await self.skip(_given(command.job_id))
                return None
            case "requeue":
                return await self.requeue(_given(command.job_id))
            case "requeue_head":
                return await self.requeue(_given(command.job_id), head=True)
            case "pause":
                await self.pause(_given(command.key))
                return None
            case "resume":
                await self.resume(_given(command.key))
                return None
            case "retry_now":
                return await self.retry_now(_given(command.key))
            case "purge_dead":
                return await self.purge_dead(older_than=_given(command.older_than), key=command.key)
        raise ValueError(f"not an operator's command: {command.verb!r}")

    def _interrupt(self, lane: Lane, *, backing_off: bool = False) -> bool:
        """Cancel what *lane*'s actor does (its running attempt; or its backoff)."""
        actor = self._runtime.actors.get(lane)
        if actor is None or actor.interruptible is None:
            return False
        if backing_off and not actor.backing_off:
            return False
        actor.interruptible.cancel()
        actor.interrupted = True
        return True

    def _check_open(self) -> None:
        if self._runtime.closed:
            raise SupervisorClosed("the supervisor has stopped")

    def _changing_halt(self, key: str) -> AbstractAsyncContextManager[None]:
        """Within the block, only this operator's call may journal a change to *key*'s halt.

        The core halts a key before its `Halt` is journaled, and lifts the halt
        once its `Resume` (or `Revive`) is: two such writes in flight at once
        could leave the core's word on the key other than the journal's last
        (a `Resume` answered after a later `Halt` took effect), and a pause
        could return before its halt is in the journal.  Each waits for the
        one before, then decides on what the core holds now.
        """
        return one_at_a_time(self._halting, key)

    async def _accept(
        self,
        key: str | None,
        payload: object,
        unique: object,
        unique_for: object,
        delay: object,
        at: object,
    ) -> int:
        self._check_open()
        runtime = self._runtime
        unique = validate_unique(unique)
        window = validate_unique_for(unique_for, unique)
        due = None if delay is None and at is None else due_time(delay, at, runtime.unix_now())
        data = self._encode(payload)
        if self._fleet is not None:  # the journal places it; its key's owner runs it
            [job_id] = await self._fleet.new_ids(1)
            append = Append(
                job_id=job_id, key=key, data=data, unique=unique, unique_for=window, due_at=due
            )
            await self._fleet.append([append], now=runtime.unix_now())
            return job_id
        if due is not None:
            append = self._scheduled(key, data, unique, window, due)
            await self._journal_new([], [], later=[append])
            return append.job_id
        job = (key, data, unique)
        runs = runtime.core.reserve_many([job])
        await self._journal_new(runs, [job], [window])
        return runs[0].first

    def _scheduled(
        self, key: str | None, data: bytes, unique: str | None, window: float | None, due: float
    ) -> Append:
        """The `Append` of a new scheduled job, its id taken; `_journal_new` writes it."""
        return Append(
            job_id=self._runtime.core.schedule(),
            key=key,
            data=data,
            unique=unique,
            unique_for=window,
            due_at=due,
        )

    async def run_schedule(self) -> None:
        """Promote scheduled jobs as they fall due, the earliest first, for as long as the supervisor runs.

        A journal failing to read or promote them is logged and asked again a
        second later; the jobs stay scheduled meanwhile.
        """
        runtime = self._runtime
        schedule, core = runtime.schedule, runtime.core
        while not core.stopping:
            schedule.reading()
            try:
                async with schedule.lock:
                    found = await runtime.journal.scheduled(limit=PAGE)
                    now = runtime.unix_now()
                    # (a hand-made row may lack its due time: due at once)
                    due = [info for info in found if info.due_at is None or info.due_at <= now]
                    if due and self._fleet is not None:
                        await self._fleet.promote(due)
                    elif due:
                        await self._promote(due)
            except Exception as exc:
                runtime.log.error(
                    "schedule.failed", error=describe(exc), exception=exception_text(exc)
                )
                await trio.sleep(1.0)
                continue
            if due:
                await schedule_point()
                continue
            # Earliest first, and none is due: the first one's due time is the next.
            first = found[0].due_at if found else None
            del found, due  # their payloads, perhaps for days
            await schedule.wait(math.inf if first is None else core.clock_time(first))

    async def _promote(self, due: list[JobInfo]) -> None:
        """Due scheduled jobs join their keys' sequences, in one write."""
        runtime = self._runtime
        entries = [
            runtime.core.promote(
                StoredJob(
                    id=info.id,
                    key=info.key,
                    data=info.data,
                    unique=info.unique,
                    attempts=info.attempts,
                )
            )
            for info in due
        ]
        await self._journal(entries)
        runtime.check_idle()

    def _encode(self, payload: object) -> bytes:
        runtime = self._runtime
        try:
            data = runtime.codec.encode(payload)
        except EncodeError:
            raise
        except Exception as exc:  # a custom codec's own error type
            raise EncodeError(
                f"cannot encode payload: the codec raised {type(exc).__qualname__}"
            ) from exc
        if len(data) > runtime.max_payload:  # refused alone, before it joins a batch
            raise EncodeError(
                f"payload is {len(data)} bytes encoded, over max_payload={runtime.max_payload}"
            )
        return data

    async def _journal_new(
        self,
        runs: list[Run],
        jobs: Sequence[tuple[str | None, bytes, str | None]],
        windows: Sequence[float | None] = (),
        later: Sequence[Append] = (),
    ) -> None:
        """Journal new jobs in one write, then commit them; or retract them all.

        *runs* are what `Core.reserve_many` reserved for *jobs*, ``(key,
        data, unique)`` in the same order, and *windows* their ``unique_for``
        (kept here, not in the core: once journaled, the journal keeps them);
        *later* the `Append`s of scheduled jobs, which join their keys when
        due.
        """
        runtime = self._runtime
        core = runtime.core
        changes: list[Change] = []
        starting: list[tuple[Entry, MarkAttempt]] = []
        position = 0
        for run in runs:
            for job_id in range(run.first, run.first + run.size):
                key, data, unique = jobs[position]
                window = windows[position] if windows else None
                changes.append(Append(job_id, key, data, unique, window))
                position += 1
                if job_id == run.first and run.entries and core.starts_next(run.entries[0]):
                    head = run.entries[0]  # its start goes in the same write
                    mark = MarkAttempt(job_id, head.attempt)
                    changes.append(mark)
                    starting.append((head, mark))
        if later:  # ids rise through a batch: each job's changes in id order (sort is stable)
            changes = sorted([*changes, *later], key=_job_of)
            # Counted first: the scheduler may read them from the journal, and promote
            # them, before this write returns.
            core.scheduled(len(later))
        now = runtime.unix_now()
        try:
            superseded = await runtime.journal.write(changes, now=now)
        except BaseException:
            for lane in core.retract_many(runs):
                runtime.start_holding(lane)
            for run in runs:
                runtime.wake(run.lane)  # its actor may be waiting on this head
            for _ in later:
                core.unschedule()
            runtime.check_idle()
            self._answer_skips()
            raise
        if self._runtime.closed:
            await self._closed_while_journaled(changes, starting, superseded)
        if later:
            for append in later:
                assert append.due_at is not None
                runtime.schedule.noticed(core.clock_time(append.due_at))
                runtime.log.debug(
                    "job.scheduled", key=append.key, job_id=append.job_id, due_at=append.due_at
                )
        give_back = self._started_early(starting, superseded)
        for lane, wants_actor in core.commit_many(runs):
            if wants_actor:
                runtime.spawn(lane)
            else:
                runtime.wake(lane)  # once per run of the lane's jobs
        self._answer_skips()
        log = runtime.log
        if logs_debug(log):  # a batch skips its no-op calls
            for change in changes:
                if isinstance(change, Append) and change.due_at is None:
                    log.debug("job.accepted", key=change.key, job_id=change.job_id)
        if give_back:
            await runtime.give_back(give_back)

    async def _journal(self, entries: list[Entry], *, requeue_of: int | None = None) -> bool:
        """Journal reserved *entries*, jobs going back into their keys, in one write, then
        commit them; or retract them all.

        With *requeue_of*, the one entry is dead letter *requeue_of* going back
        (`Requeue`); False if the journal superseded that (it is no dead
        letter now), with the entry retracted.  Else the entries are
        scheduled jobs joining their keys (`Due`), which wait for their due
        time no more; one the journal superseded is retracted alone (another
        writer finished it: this supervisor's own skips take the schedule's
        lock, so it is one in another process).
        """
        runtime = self._runtime
        core = runtime.core
        due = requeue_of is None
        changes: list[Change] = []
        firsts: list[Change] = []  # each entry's own change
        starting: list[tuple[Entry, MarkAttempt]] = []
        lane = None  # the previous entry's: one behind it in its lane cannot start next
        for entry in entries:
            first: Change = (
                Due(entry.id, entry.place) if requeue_of is None else Requeue(requeue_of, entry.id)
            )
            changes.append(first)
            firsts.append(first)
            if entry.lane != lane and core.starts_next(entry):  # its start goes in the same write
                mark = MarkAttempt(entry.id, entry.attempt)
                changes.append(mark)
                starting.append((entry, mark))
            lane = entry.lane
        now = runtime.unix_now()
        try:
            superseded = await runtime.journal.write(changes, now=now)
            if not due and changes[0] in superseded:
                raise _Superseded
        except BaseException as exc:
            for entry in reversed(entries):
                runtime.start_holding(core.retract(entry))
                runtime.wake(entry.lane)  # its actor may be waiting on this head
            runtime.check_idle()
            self._answer_skips()
            if isinstance(exc, _Superseded):
                return False
            raise
        if self._runtime.closed:
            await self._closed_while_journaled(changes, starting, superseded)
        give_back = self._started_early(starting, superseded)
        for entry, first in zip(entries, firsts, strict=True):
            if due:
                core.unschedule()  # in its lane now, or finished by another writer
            if first in superseded:
                runtime.start_holding(core.retract(entry))
                continue
            self._commit(entry)
        self._answer_skips()
        if give_back:
            await runtime.give_back(give_back)
        return True

    def _commit(self, entry: Entry) -> None:
        """Journaled *entry* may run: its lane gets an actor, or its actor is woken."""
        runtime = self._runtime
        if runtime.core.commit(entry):
            runtime.spawn(entry.lane)
        elif entry.lane in runtime.lingering:  # `wake`'s test, first: once per job
            runtime.wake(entry.lane)
        if runtime.debug:
            runtime.log.debug("job.accepted", key=entry.key, job_id=entry.id)

    async def _closed_while_journaled(
        self,
        changes: list[Change],
        starting: list[tuple[Entry, MarkAttempt]],
        superseded: Sequence[Change],
    ) -> NoReturn:
        """The supervisor stopped (was cancelled) while *changes* were journaled: raise
        `SupervisorClosed`, first giving back each start journaled with them: it never runs
        now, and the next supervisor would count an attempt cut short."""
        self._answer_skips()
        await self._runtime.give_back([entry for entry, mark in starting if mark not in superseded])
        raise SupervisorClosed(
            f"the supervisor stopped while job {_job_of(changes[0])} was journaled;"
            " it runs when the journal is opened again"
        )

    def _answer_skips(self) -> None:
        """A write that accepts jobs was answered: wake the skips waiting for one (`_skip`)."""
        if self._answered is not None:
            self._answered.set()
            self._answered = None

    def _started_early(
        self, starting: list[tuple[Entry, MarkAttempt]], superseded: Sequence[Change]
    ) -> list[Entry]:
        """Tell the core which of the starts journaled with their jobs held; return those whose
        marks go back (a key halted meanwhile starts nothing: its mark goes back, and its slot)."""
        runtime = self._runtime
        give_back: list[Entry] = []
        for entry, mark in starting:
            returned, free = runtime.core.early_start_answered(entry, marked=mark not in superseded)
            runtime.start_holding(free)
            if returned:
                give_back.append(entry)
        return give_back


def _job_of(change: Change) -> int:
    """The job a change of a new job's batch names (an `Append` or a `MarkAttempt`)."""
    assert isinstance(change, Append | MarkAttempt | Requeue | Due)
    return change.job_id


class _Superseded(Exception):
    """A requeue lost to another writer (see `Supervisor._journal`)."""


def _number(name: str, value: object, *, minimum: float, inclusive: bool = True) -> float:
    check_number(name, value)
    assert isinstance(value, int | float)
    if value < minimum or (not inclusive and value == minimum):
        relation = ">=" if inclusive else ">"
        raise ValueError(f"{name} must be a finite number {relation} {minimum}, not {value!r}")
    return float(value)


@asynccontextmanager
async def open_supervisor(
    handler: Handler | BatchHandler,
    *,
    batch: int | None = None,
    journal: Journal | None = None,
    retry: Retry | None = None,
    idle_timeout: float = 1.0,
    job_timeout: float | None = None,
    on_discard: Literal["continue", "halt"] = "continue",
    max_concurrency: int | None = None,
    window: int = 1000,
    max_buffered: int = 100_000,
    max_payload: int = 16 * 1024 * 1024,
    max_snoozes: int = 100,
    codec: Codec | None = None,
    max_restarts: int = 3,
    restart_window: float = 5.0,
    random: Callable[[], float] | None = None,
    on_event: Callable[[Event], object] | None = None,
) -> AsyncIterator[Supervisor]:
    """Run *handler* for every accepted job, one at a time per key.

    Args:
        handler: ``async def handler(job: inturn.Job) -> object``.  An
            `Exception` it raises fails the attempt; what it returns is the
            result ``ask`` gets.  With *batch*, ``async def handler(jobs:
            list[inturn.Job]) -> list | None`` instead.
        batch: run up to this many queued jobs of one key in one handler
            call: the handler gets them in order, and returns None or one
            result per job.  They complete as one step, and the key's next
            batch starts after.  Raise `inturn.BatchError` to say that one
            job failed (those before it completed); any other exception
            fails the whole batch: its first job's retry policy decides, and
            the others share its fate (a retry counts an attempt for each; a
            `Snooze` gives every attempt back; a failure that is not retried
            makes every job of the batch a dead letter).  None (the default)
            calls the handler with one job at a time.
        journal: where jobs live until they are terminal; None means a fresh
            `MemoryJournal`.  Unfinished jobs found in it are run again.
        retry: the retry policy; None means ``Retry()``.
        idle_timeout: seconds an actor lingers with an empty mailbox.
        job_timeout: seconds an attempt may run before it fails with
            `TimeoutError`; None for no limit.
        on_discard: ``"continue"`` runs a key's next job after a discard;
            ``"halt"`` parks the key until `Supervisor.resume`.
        max_concurrency: at most this many handlers at once (fair, FIFO);
            None for no limit.
        window: at most this many jobs of one key are held in memory; the
            rest of its backlog waits in the journal and is read back in
            order as the key drains.
        max_buffered: about this many jobs in memory over all keys (each
            key's next job always is), so a backlog of any size over any
            number of keys costs bounded memory.
        max_payload: the largest encoded payload `send` accepts, in bytes (16
            MiB by default); a larger one is an `EncodeError` for that send
            alone, before it reaches the journal.
        max_snoozes: how many times in a row a job may `inturn.Snooze` (wait
            without using up an attempt) before one more counts as a failed
            attempt, so no job snoozes forever unseen.
        codec: turns payloads into bytes and back; None means `JSONCodec()`.
        max_restarts: crashes of the runtime around jobs (a journal failing,
            say) tolerated within *restart_window* seconds; one more escalates.
        restart_window: see *max_restarts*.
        random: the jitter's random source (``() -> float in [0, 1)``); pass a
            seeded one for repeatable delays.
        on_event: called with an `inturn.Event` for every lifecycle event
            inturn logs (same names), to feed metrics; what it raises is
            logged and ignored.

    Raises:
        TypeError, ValueError: an argument is invalid (before anything starts);
            a handler that is not an ``async def`` function is a TypeError.

    Exceptions from the ``async with`` body, and a runtime error escalated
    beyond the restart budget, come out as themselves, not wrapped in an
    exception group, unless there are several.
    """
    check_handler(handler)
    if retry is None:
        retry = Retry()
    elif not isinstance(retry, Retry):
        raise TypeError(f"retry must be an inturn.Retry, not {type(retry).__name__}")
    idle_timeout = _number("idle_timeout", idle_timeout, minimum=0)
    if job_timeout is not None:
        job_timeout = _number("job_timeout", job_timeout, minimum=0, inclusive=False)
    if on_discard not in ("continue", "halt"):
        raise ValueError(f"on_discard must be 'continue' or 'halt', not {on_discard!r}")
    # Bounded, so no count reaches a journal larger than it can store.
    if max_concurrency is not None:
        max_concurrency = check_count(
            "max_concurrency", max_concurrency, minimum=1, maximum=MAX_COUNT
        )
    window = check_count("window", window, minimum=1, maximum=MAX_COUNT)
    if batch is not None:
        batch = check_count("batch", batch, minimum=1, maximum=MAX_COUNT)
    max_buffered = check_count("max_buffered", max_buffered, minimum=1, maximum=MAX_COUNT)
    max_payload = check_count("max_payload", max_payload, minimum=1, maximum=MAX_PAYLOAD)
    max_restarts = check_count("max_restarts", max_restarts, minimum=0, maximum=MAX_COUNT)
    max_snoozes = check_count("max_snoozes", max_snoozes, minimum=0, maximum=MAX_COUNT)
    restart_window = _number("restart_window", restart_window, minimum=0, inclusive=False)
    if codec is None:
        codec = JSONCodec()
    elif not (
        callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))
    ):
        raise TypeError(f"codec must have encode() and decode(), not {codec!r}")
    if random is None:
        random = _random.Random().random
    elif not callable(random):
        raise TypeError(f"random must be a callable returning a float, not {random!r}")
    if on_event is not None and not callable(on_event):
        raise TypeError(f"on_event must be a callable taking an inturn.Event, not {on_event!r}")
    if journal is None:
        journal = MemoryJournal()
    elif not all(
        callable(getattr(journal, name, None)) for name in ("open", "write", "load", "aclose")
    ):
        raise TypeError(f"journal must be an inturn.Journal, not {journal!r}")

    recovery = await journal.open()
    try:
        core = Core(
            retry,
            on_discard,
            window=window,
            max_buffered=max_buffered,
            max_concurrency=max_concurrency,
            max_snoozes=max_snoozes,
            batch=batch or 1,
            fleet=getattr(journal, "fleet", False) is True,
        )
        lanes = core.restore(recovery, clock=trio.current_time(), wall=time.time())
        del recovery  # its rows and counts, O(keys): this frame lives as long as the supervisor
        runtime = Runtime(
            core=core,
            journal=journal,
            codec=codec,
            handler=handler,
            random=random,
            idle_timeout=idle_timeout,
            job_timeout=job_timeout,
            max_restarts=max_restarts,
            restart_window=restart_window,
            max_payload=max_payload,
            batch=batch,
        )
        if on_event is not None:
            runtime.log = EventTee(runtime.log, on_event)
            runtime.debug = not debug_is_off(runtime.log)
        errors: list[BaseException] = []
        try:
            async with trio.open_nursery() as nursery:
                fleet = None
                if core.fleet:
                    fleet = runtime.fleet = Fleet(
                        runtime,
                        cast(FleetJournal, journal),
                        capacity=capacity_for(max_concurrency),
                        page=min(window, 50),
                        # Its starts marked in the claim, unless a slot could keep one waiting.
                        mark_below=retry.max_attempts if max_concurrency is None else None,
                    )
                    start_task(nursery, fleet.run, name="inturn.fleet")
                runtime.start(nursery, lanes)
                supervisor = Supervisor(runtime, fleet)
                if fleet is None and callable(getattr(journal, "commands", None)):
                    start_task(nursery, supervisor.serve_commands, name="inturn.commands")
                start_task(nursery, supervisor.run_schedule, name="inturn.schedule")
                yield supervisor
                await runtime.wait_idle()
                runtime.close()
                nursery.cancel_scope.cancel()  # only the reaper and the schedule are left
        except BaseExceptionGroup as group:
            errors.extend(group.exceptions)
        finally:
            runtime.close()
            runtime.actors.clear()  # their tasks are gone with the nursery
            runtime.lingering.clear()
            await runtime.give_back_marks()
        if runtime.escalated is not None:
            errors.append(runtime.escalated)
        if errors:
            _raise_unwrapped(errors)
    finally:
        with trio.CancelScope(shield=True):
            await journal.aclose()


_T = TypeVar("_T")


def _given(value: _T | None) -> _T:
    if value is None:
        raise ValueError("the command lacks an argument its verb needs")
    return value


def _plain(args: tuple[object, ...]) -> tuple[str | int | float | None, ...]:
    """An error's arguments as the journal can store them."""
    return tuple(arg if isinstance(arg, str | int | float | None) else str(arg) for arg in args)


def _raise_unwrapped(errors: list[BaseException]) -> NoReturn:
    """Raise the one real error bare; several as a group; else a Cancelled."""
    real = [error for error in errors if not isinstance(error, trio.Cancelled)]
    if len(real) > 1:
        raise BaseExceptionGroup("several errors stopped the inturn supervisor", real)
    error = real[0] if real else errors[0]
    # Keep the error's own context and cause, not the group's (as trio does).
    context, cause, suppress = error.__context__, error.__cause__, error.__suppress_context__
    try:
        raise error
    finally:
        error.__context__, error.__cause__ = context, cause
        error.__suppress_context__ = suppress
        del error
