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

The nursery's exception groups are unwrapped: an exception from the body, or
an escalated runtime error, comes out bare when it is the only one; two or
more (the body failed *and* the runtime escalated) as an `ExceptionGroup`.

``send`` follows one shape: validate -> encode -> reserve in the core
(synchronous: id, FIFO place) -> journal (the one await; the journal alone
enforces unique keys; a job that will start next, with a slot, has its start
journaled in the same write) -> commit (synchronous: the gate may open).  A
failure before the commit retracts the reservation, so a rejected ``send``
changes nothing.  ``send_many`` is the same shape for a whole batch, with one
write.

Operators' fixes (``skip``, ``requeue``, ...) are `Supervisor` methods, in its
base `inturn._operating` (the journaling all paths share is in
`inturn._journaling`): `inturn.operate` and the ``inturn`` command call them, or
leave a `Command` in the journal for `serve_commands` to carry out.
"""

from __future__ import annotations

import datetime
import random as _random
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Literal, NoReturn, cast, final

import attrs
import trio

from ._checks import MAX_COUNT, MAX_PAYLOAD, check_count, check_float, check_handler
from ._entries import NewJob
from ._fixes import (
    check_job_id,
    check_limit,
    schedule_point,
)
from ._operating import Operating
from ._runtime import BatchHandler, Handler, Runtime, Waiter
from ._sending import new_job, new_jobs
from ._tasks import start_task
from .actors import Actor
from .codec import Codec, check_codec
from .core import Core
from .errors import (
    JobDiscarded,
    SupervisorClosed,
)
from .events import Event, EventTee, debug_is_off
from .fleet import Fleet, FleetJournal, capacity_for
from .info import JobInfo, KeyFilter, KeyInfo, Overview
from .jobs import Item, Stats
from .journal import (
    Journal,
    MemoryJournal,
)
from .keys import validate_key
from .retry import Retry
from .tracing import Tracing, observer_for

__all__ = ["Supervisor", "open_supervisor"]


@final
class Supervisor(Operating):
    """Accepts jobs and runs them: one at a time, in order, per key.

    Made by `open_supervisor`; valid inside its ``async with`` block.
    """

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
        batch = new_jobs(jobs, encode=self._encode, now=self._runtime.unix_now())
        if not batch:
            await trio.lowlevel.checkpoint()
            return []
        ids = await self._accept_new(batch)
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
        grace = check_float("grace", grace, minimum=0)
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

    def stats(self) -> Stats:
        """A snapshot of the supervisor's counters."""
        runtime = self._runtime
        # A lingering key counts as one actor: its deadline stands for it.
        actors = len(runtime.actors) + len(runtime.lingering)
        return runtime.core.stats(actors=actors, running=runtime.running)

    @property
    def journal(self) -> Journal:
        """The journal it holds: read it beside the supervisor (an embedded dashboard,
        `inturn.web.serve`, does); change it only through the supervisor's methods."""
        return self._runtime.journal

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

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
    ) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted, by key in code-point order: pages for a dashboard.

        Only keys above *after* (the last key of the page before), only keys
        that start with *prefix* (plain text: ``%`` and ``_`` are characters
        like any other), only those *state* passes (`KeyFilter`); each
        `KeyInfo` as `keys` gives it.  Cheap on a journal of many keys: the
        journal reads a page from indexes.

        Raises:
            TypeError, ValueError: an argument is invalid.
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        limit = check_limit(limit)
        now, found = self._runtime.unix_now(), list[KeyInfo]()
        while True:
            page = await self._runtime.journal.keys_by_name(
                state=state, prefix=prefix, after=after, limit=limit, now=now
            )
            live = map(self._live_key, page)
            # as `keys` says: a recovered head still waiting to run again is not running
            found += (info for info in live if state != "running" or info.head_state == "running")
            if len(found) >= limit or len(page) < limit:
                await schedule_point()
                return found[:limit]
            after = page[-1].key

    async def overview(self) -> Overview:
        """The journal at a glance (`Overview`): keys by state, jobs waiting and scheduled,
        dead letters, the oldest due job's age, jobs finished in each of the last 15 minutes.

        Raises:
            SupervisorClosed: the supervisor has stopped.
        """
        self._check_open()
        found = await self._runtime.journal.overview(now=self._runtime.unix_now())
        await schedule_point()
        return found

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
        job = new_job(
            key, payload, unique, unique_for, delay, at, encode=self._encode, now=runtime.unix_now()
        )
        if runtime.observer is None:
            return await self._accept_one(job, None)
        with runtime.observer.sending([key]) as sending:
            job_id = await self._accept_one(job, sending.trace)
            sending.accepted([job_id])
        if self._fleet is None:
            runtime.observer.accepted([job_id])
        return job_id

    async def _accept_one(self, job: NewJob, trace: str | None) -> int:
        """Journal *job*, sent in the context *trace*; its id."""
        runtime = self._runtime
        if self._fleet is not None:  # the journal places it; its key's owner runs it
            [job_id] = await self._fleet.new_ids(1)
            appends = runtime.core.appends([job_id], [job], trace)
            await self._fleet.append(appends, now=runtime.unix_now())
            return job_id
        accepting = runtime.core.accept([job], trace)
        await self._journal_new(accepting)
        return accepting.ids[0]


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
    tracing: bool | Tracing = False,
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
        tracing: OpenTelemetry spans and metrics (``pip install 'inturn[otel]'``):
            True reports through the global providers, an `inturn.Tracing` through
            those it names; False (the default) imports no OpenTelemetry module.
            Every job keeps the trace context it was sent in, in the journal,
            and each attempt's span links to it (docs/observability.md).

    Raises:
        TypeError, ValueError: an argument is invalid (before anything starts);
            a handler that is not an ``async def`` function is a TypeError.
        ImportError: *tracing* is on and ``opentelemetry-api`` is not installed.

    Exceptions from the ``async with`` body, and a runtime error escalated
    beyond the restart budget, come out as themselves, not wrapped in an
    exception group, unless there are several.
    """
    check_handler(handler)
    if retry is None:
        retry = Retry()
    elif not isinstance(retry, Retry):
        raise TypeError(f"retry must be an inturn.Retry, not {type(retry).__name__}")
    idle_timeout = check_float("idle_timeout", idle_timeout, minimum=0)
    if job_timeout is not None:
        job_timeout = check_float("job_timeout", job_timeout, minimum=0, inclusive=False)
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
    restart_window = check_float("restart_window", restart_window, minimum=0, inclusive=False)
    codec = check_codec(codec)
    if random is None:
        random = _random.Random().random
    elif not callable(random):
        raise TypeError(f"random must be a callable returning a float, not {random!r}")
    if on_event is not None and not callable(on_event):
        raise TypeError(f"on_event must be a callable taking an inturn.Event, not {on_event!r}")
    observer = observer_for(tracing)
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
            linger=idle_timeout > 0,
        )
        lanes = core.restore(recovery, clock=trio.current_time(), wall=time.time())
        del recovery  # its rows and counts, O(keys): this frame lives as long as the supervisor
        runtime = Runtime(
            core=core,
            journal=journal,
            codec=codec,
            handler=handler,
            make_actor=Actor,
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
        if observer is not None:
            runtime.observe(observer)
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
                start_task(nursery, supervisor.run_recurring, name="inturn.recurring")
                yield supervisor
                await runtime.wait_idle()
                runtime.close()
                nursery.cancel_scope.cancel()  # only the reaper and the schedules are left
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
