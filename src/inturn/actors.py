"""Actors: one per active lane, run in a pool of worker tasks, carrying out the core's decisions.

Theory of operation
-------------------
What every actor shares (the core, the journal, the codec, the handler,
the options, the supervision of actor tasks) is `inturn._runtime.Runtime`,
which makes an `Actor` for a lane when the core says the lane needs one and
runs it in a spare `Worker` task.  The actor loops:

1. under ``max_concurrency``, take a slot, or end and leave the lane in the
   core's ready queue (`Core.take_slot`);
2. page in the next jobs from the journal if the core asks (``Core.page``:
   the lane's FIFO ran low and its backlog waits on disk);
3. ask the core for the lane's head (``Core.start``), and with ``batch`` the
   jobs that join it (``Core.followers``); run it if the gate allows: wait
   out what is left of a backoff it was recovered in, mark the attempt in
   the journal (unless ``Entry.marked`` says it went with the job's
   acceptance or the last completion), ask the core again whether it may
   still run (``Core.may_run``: a pause or skip that landed during those
   awaits wins, and the start is taken back), decode, call the handler;
4. carry out the outcome: journal ``Complete``/``Discard`` and then tell the
   core, or back off (sleep on trio's clock, without a slot) with the head
   in place;
5. with nothing to start, give up its slot (unless its head's start is
   marked) and *linger* (`Runtime.linger`): the actor ends, its worker goes
   back to the pool at once, and a lane left with nothing leaves the core
   (``Core.try_retire``, synchronous, so no ``send`` can slip between the
   check and the exit): it keeps nothing but its deadline here.  A ``send``
   gets it an actor and a task again (`Runtime.spawn`, `Runtime.wake`), and
   when `IdleReaper` (one timer for all lingering lanes and spare workers)
   says ``idle_timeout`` passed, it is gone (`Runtime.retire`).

The journal decides races with other writers: a change it *superseded*
(another writer, an operator, finished the job first; or a start on a key it
halted) comes back from ``write``, and the actor lets the job go
(``Core.superseded``) or takes the start back instead of failing.

Fairness: the memory journal does not yield, and a handler need not, so an
actor with a backlog yields between two jobs itself (a schedule point,
`trio.lowlevel.cancel_shielded_checkpoint`).  One that waited for work has
yielded already.  It cannot tell whether the handler yielded: trio counts a
task's schedule points, but only in private attributes, which inturn does not
read.

The journal is written *before* the core is told, so a failed write leaves
the job unfinished in both: the actor crashes, `Runtime` restarts it (the job
runs again) within the restart budget, and escalates beyond it.

Exceptions from the handler are failed attempts.  Everything else that
escapes the actor (`trio.Cancelled`, `KeyboardInterrupt`) propagates, after
giving back the attempt the handler did not finish.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar, assert_never

import attrs
import trio

from ._runtime import Runtime, key_of
from .core import Backoff, Discarding, Entry, Lane, Outcome
from .errors import BatchError, DecodeError, PermanentError
from .jobs import Job, new_job

_T = TypeVar("_T")


def decode_failure(exc: Exception) -> DecodeError:
    """*exc*, raised by a codec's ``decode``, as the `DecodeError` the job fails with.

    Its text may quote the bytes: it names the type only, and its cause keeps the rest.
    """
    if isinstance(exc, DecodeError):
        return exc
    error = DecodeError(f"cannot decode payload: the codec raised {type(exc).__qualname__}")
    error.__cause__ = exc  # as ``raise ... from exc``
    return error


@attrs.define(eq=False)
class Actor:
    """Runs one lane's jobs, one at a time, in order, in a `Worker`'s task.

    With nothing to run it ends and its lane *lingers* for ``idle_timeout``
    with no actor, no task and (left with nothing) no state in the core
    (`Runtime.linger`): a send gets it a new actor (`Runtime.spawn`, or
    `Runtime.wake`), or `IdleReaper` ends its linger.  Resuming a parked
    task only for it to retire cost a task step per key seen once, which the
    bare design, whose task exits when its channel is empty, never takes.
    """

    runtime: Runtime
    lane: Lane
    interruptible: trio.CancelScope | None = attrs.field(default=None, init=False)
    """Around everything the actor does while it has a task (its `Worker`'s scope)."""
    backing_off: bool = attrs.field(default=False, init=False)
    """Sleeping until its head's next attempt."""
    interrupted: bool = attrs.field(default=False, init=False)
    """An operator cancelled `interruptible` (`Supervisor._interrupt`).  A handler
    that ran on, deaf to it, has done its work: the cancel, still pending, must
    not cut the outcome's writes short (`_written`), and ends the attempt once
    they are done."""

    @property
    def key(self) -> str | None:
        return key_of(self.lane)

    async def supervise(self, crash: Exception) -> None:
        """It crashed with *crash*: its runtime restarts it, or escalates (`Runtime.supervise`)."""
        await self.runtime.supervise(self, crash)

    async def run(self) -> None:
        """Serve the lane until the core lets the actor retire, in `interruptible`.

        An operator cancels that scope to cut a running attempt short
        (`Supervisor.skip`) or a backoff (`Supervisor.retry_now`); the
        `Worker` then runs the actor again in a fresh one.
        """
        runtime, core = self.runtime, self.runtime.core
        yielded = True  # spawned or woken: other tasks ran since the lane's last job
        while True:
            if not core.take_slot(self.lane):
                del runtime.actors[self.lane]
                runtime.log.debug("actor.queued", key=self.key)
                return  # a worker serves the lane when a slot frees
            page = core.page(self.lane)
            if page is not None:
                core.paged(page, await runtime.journal.load(page.key, page.after, page.limit))
            entry = core.start(self.lane)
            if entry is None:
                if await self._rest():
                    return
                yielded = True
                continue
            if not yielded:  # however fast the handler, let other tasks run between jobs
                await trio.lowlevel.cancel_shielded_checkpoint()
            if runtime.batch is None:
                await self._attempt(entry, checked=yielded)
            else:
                await self._attempt_batch(entry)
            yielded = False
            if core.ready:  # others wait for a slot: take turns
                runtime.start_holding(core.pass_slot(self.lane))

    async def _rest(self) -> bool:
        """The lane has nothing to start: True if the actor ends; False to look again.

        It gives its slot up, and takes back a start marked early that
        something overtook; then it lingers, lets the fleet have its key,
        or retires, as the lane allows.
        """
        runtime, core = self.runtime, self.runtime.core
        overtaken = core.take_back_mark(self.lane)  # before the slot goes
        runtime.give_slot(self.lane)
        if overtaken is not None:
            await runtime.give_back([overtaken])
            return False  # a resume may have landed meanwhile, its wake-up missed
        match core.resting(self.lane):
            case "linger":
                runtime.linger(self, runtime.idle_timeout)
                return True  # its worker goes back to the pool: a send gets it a new actor
            case "let go":
                return await runtime.let_go(self)  # False: jobs came meanwhile, to page in
            case "retired":
                runtime.retired(self)
                return True
            case "wait":
                runtime.linger(self)  # the head is still being journaled: its send wakes it
                return True
            case "again":
                return False  # a send landed meanwhile: serve it

    async def _attempt(self, entry: Entry, *, checked: bool) -> None:
        """Run started *entry*'s attempt and carry out its outcome.

        *checked*: nothing was awaited since the core started it.
        """
        runtime = self.runtime
        try:
            job = await self._prepare(entry, checked=checked)
            if job is None:
                return
            result: object = None
            try:
                result = await runtime.call_handler(job, (entry,))
            except Exception as exc:
                failed: Exception | None = exc
            except BaseException:
                if entry.skipped:
                    raise  # an operator cut it short: the attempt was made
                # Shutdown is not the job's fault: give the attempt back
                # (shielded, since we are being cancelled) so a restart
                # runs it as the same one.
                await runtime.give_back([entry])
                raise
            else:
                failed = None
            finally:
                runtime.steps.ended(entry.id)
            if failed is None:
                await self._complete([entry], [result])
            else:
                await self._carry_out(self._failed(entry, failed))
            if self.interrupted:  # the operator's cancel ends the attempt
                await trio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            if entry.running:
                runtime.core.interrupt(entry)
                runtime.check_idle()  # paused while it ran: parked now
            raise
        finally:
            if runtime.stop_waiters:  # a skip waits for the attempt to stop
                runtime.stopped.unpark_all()

    async def _prepare(self, entry: Entry, *, checked: bool = False) -> Job | None:
        """Everything started *entry*'s attempt awaits before its handler; its `Job`.

        None if the attempt ended here: discarded (out of attempts, or its
        payload does not decode), sleeping out a backoff it was recovered
        in, or given back (paused or skipped meanwhile, or superseded).
        *checked*: nothing was awaited since the core started it, so no
        pause or skip can have landed (else `Core.may_run` is asked).
        """
        runtime, core = self.runtime, self.runtime.core
        if entry.exhausted:
            await self._carry_out(core.given_up(entry))
            return None
        at = core.recovered_wait(entry, runtime.now())
        if at is not None:  # recovered in a backoff: wait out what is left of it first
            runtime.give_slot(self.lane)
            runtime.log.debug(
                "job.retry_scheduled",
                key=entry.key,
                job_id=entry.id,
                attempt=entry.attempt - 1,
                at=at,
                error=entry.last_error,
                recovered=True,
            )
            await self._back_off(at)
            return None
        marks = core.start_marks([entry])
        if marks:
            checked = False
            if core.marks_written([entry], await runtime.journal.write(marks)):
                await self._start_superseded(entry)
                return None
        elif core.fleet:
            # Marked by an earlier write: a member that may have stalled past
            # its heartbeat since renews it first, or stops (LeaseLost).
            checked = False
            await runtime.renew_lease()
        if not checked and not core.may_run(entry):  # paused or skipped meanwhile
            await self._take_back(entry)
            return None
        try:
            payload = runtime.codec.decode(entry.data)
        except Exception as exc:
            await self._carry_out(self._failed(entry, decode_failure(exc)))
            return None
        return self._handed(entry, payload)

    def _handed(self, entry: Entry, payload: object) -> Job:
        """The `Job` *entry*'s handler gets, with its decoded *payload*."""
        runtime = self.runtime
        job = new_job(
            entry.id,
            entry.key,
            payload,
            entry.attempt,
            entry.unique,
            runtime.core.epoch(entry.lane),
            runtime.steps,
        )
        if runtime.debug:
            runtime.log.debug("job.started", key=entry.key, job_id=entry.id, attempt=entry.attempt)
        return job

    async def _back_off(self, at: float) -> None:
        """Sleep until *at*, the head's next attempt; `retry_now` and `skip` may cut it short."""
        self.backing_off = True
        try:
            await trio.sleep_until(at)
        finally:
            self.backing_off = False

    async def _take_back(self, *entries: Entry) -> None:
        """*entries* were started but must not run now: give their marked attempts back."""
        runtime = self.runtime
        for entry in entries:
            runtime.core.interrupt(entry)
        runtime.check_idle()
        await runtime.give_back(list(entries))

    async def _start_superseded(self, entry: Entry) -> None:
        """The journal refused *entry*'s start: another writer finished it, or halted its key."""
        runtime = self.runtime
        core = runtime.core
        if not core.is_halted(entry.lane):
            info = await runtime.journal.job(entry.id)
            if info is None or info.state == "dead":
                self._superseded(entry, "job.superseded")
                return
            assert entry.key is not None, "only a key can be halted"
            core.halt(entry.key)  # halted by another writer: honour it
        core.interrupt(entry)
        runtime.check_idle()

    def _superseded(self, entry: Entry, event: str) -> None:
        """Another writer finished *entry* first: it is gone from here too."""
        self.runtime.core.superseded(entry)
        self._let_go(entry, event)

    def _let_go(self, entry: Entry, event: str) -> None:
        """The core forgot *entry*, which another writer finished first: say so."""
        runtime = self.runtime
        runtime.log.info(event, key=entry.key, job_id=entry.id)
        runtime.finished(entry.id, error=PermanentError("finished by another writer"))

    def _failed(self, entry: Entry, error: BaseException) -> Outcome:
        runtime = self.runtime
        return runtime.core.failed(entry, error, now=runtime.now(), random=runtime.random)

    # -- batches (``open_supervisor(..., batch=N)``) ---------------------------

    async def _attempt_batch(self, head: Entry) -> None:
        """Run started *head* and the jobs behind it that join it (`Core.followers`) as one batch."""
        runtime, core = self.runtime, self.runtime.core
        joined = core.batch_of(head, runtime.now())
        batch = [head] if joined is None else joined
        try:
            if joined is None:  # it is discarded, or waits out a backoff: alone
                await self._prepare(head)
                return
            if not await self._mark(batch):
                return
            if not core.may_run_batch(batch):  # paused or skipped meanwhile
                await self._take_back(*batch)
                return
            await self._run_batch(batch)
            if self.interrupted:
                await trio.lowlevel.checkpoint_if_cancelled()  # the operator's cancel (see `run`)
        except BaseException:
            for entry in batch:
                if entry.running:
                    core.interrupt(entry)
            runtime.check_idle()  # paused while it ran: parked now
            raise
        finally:
            if runtime.stop_waiters:  # an operator's skip waits for the attempt to stop
                runtime.stopped.unpark_all()

    async def _mark(self, batch: list[Entry]) -> bool:
        """Journal the start of each job of *batch* not marked yet, in one write.

        False if the journal refused one (another writer finished it, or
        halted the key): then none of them runs now.
        """
        runtime, core = self.runtime, self.runtime.core
        marks = core.start_marks(batch)
        if not marks:
            if core.fleet:  # see `_prepare`
                await runtime.renew_lease()
            return True
        refused = core.marks_written(batch, await runtime.journal.write(marks))
        if not refused:
            return True
        await self._take_back(*[entry for entry in batch if entry.marked])
        for entry in batch:
            if entry.running and entry not in refused:
                runtime.core.interrupt(entry)
        for entry in refused:
            await self._start_superseded(entry)
        return False

    async def _run_batch(self, batch: list[Entry]) -> None:
        """Call the handler with *batch*'s jobs and carry out what it leads to."""
        runtime = self.runtime
        jobs, undecodable = self._jobs(batch)
        if undecodable is not None:
            # The jobs before it run as a batch of their own; it fails alone, at its turn.
            index, error = undecodable
            await self._take_back(*batch[max(index, 1) :])
            if index == 0:
                await self._carry_out(self._failed(batch[0], error))
                return
            del batch[index:]
        if runtime.debug:
            for entry in batch:
                runtime.log.debug(
                    "job.started", key=entry.key, job_id=entry.id, attempt=entry.attempt
                )
        try:
            returned = await runtime.call_handler(jobs, batch)
        except Exception as exc:
            await self._batch_failed(batch, exc)
            return
        except BaseException:
            # Cut short by an operator's skip (the skipped job's attempt was made)
            # or by shutdown: the other jobs' attempts are given back.
            await runtime.give_back([entry for entry in batch if not entry.skipped])
            raise
        finally:
            runtime.steps.ended(*[entry.id for entry in batch])
        if returned is None:
            await self._complete(batch, [None] * len(batch))
        elif isinstance(returned, list | tuple) and len(returned) == len(batch):
            await self._complete(batch, list(returned))
        else:
            wrong = TypeError(
                "a batch handler returns None or a list of one result per job,"
                f" not {type(returned).__qualname__}"
                + (f" of {len(returned)}" if isinstance(returned, list | tuple) else "")
            )
            await self._batch_failed(batch, wrong)

    def _jobs(self, batch: list[Entry]) -> tuple[list[Job], tuple[int, DecodeError] | None]:
        """`_job` for each of *batch* in one loop, up to the first whose payload cannot be
        decoded: with that one's position and error."""
        runtime = self.runtime
        decode, steps = runtime.codec.decode, runtime.steps
        epoch = runtime.core.epoch(batch[0].lane)  # one lane's jobs
        jobs: list[Job] = []
        for index, entry in enumerate(batch):
            try:
                payload = decode(entry.data)
            except Exception as exc:
                return jobs, (index, decode_failure(exc))
            jobs.append(
                new_job(entry.id, entry.key, payload, entry.attempt, entry.unique, epoch, steps)
            )
        return jobs, None

    async def _complete(
        self, batch: list[Entry], results: list[object], *, then_start: bool = True
    ) -> None:
        """Journal the completion of *batch* (one job, or a batch's first jobs) in one write.

        The job behind may start the moment they are complete, so its start
        is journaled in the same write (unless not *then_start*: the batch's
        next job is the one that failed, and runs again).
        """
        runtime, core = self.runtime, self.runtime.core
        if not batch:
            return
        completion = core.completion(batch, then_start=then_start)
        now = runtime.unix_now()
        if completion.release is not None:
            # A fleet member hands the key back in the same transaction,
            # unless a job came for it meanwhile.
            written = runtime.complete_last(completion.changes, completion.release, now)
        else:
            written = runtime.journal.write(completion.changes, now=now)
        done, gone = core.completed(completion, await self._written(written))
        for entry in gone:  # another writer finished it first
            self._let_go(entry, "job.superseded")
        if runtime.debug:
            for entry in done:
                runtime.log.debug(
                    "job.completed", key=entry.key, job_id=entry.id, attempt=entry.attempt
                )
        if runtime.waiters:
            for entry, result in zip(batch, results, strict=True):
                if entry in done:
                    runtime.answer(entry.id, result)
        runtime.check_idle()

    async def _batch_failed(self, batch: list[Entry], error: Exception) -> None:
        """The handler raised *error* for *batch*: one job failed (`BatchError`), or all of it."""
        runtime, core = self.runtime, self.runtime.core
        if isinstance(error, BatchError) and error.done < len(batch):
            done = error.done
            results = error.results
            if results is None or len(results) != done:  # checked when built, changed since
                results = [None] * done
            await self._complete(batch[:done], results, then_start=False)
            await self._take_back(*batch[done + 1 :])
            await self._carry_out(self._failed(batch[done], error.error))
            return
        if isinstance(error, BatchError):
            error = ValueError(
                f"BatchError.done={error.done} is not below the batch's {len(batch)} jobs"
            )
        head, rest = batch[0], batch[1:]
        outcome, fate = core.failed_batch(batch, error, now=runtime.now(), random=runtime.random)
        if fate == "returned":
            await self._take_back(*rest)
        elif fate == "spent":
            for entry in rest:
                core.spent(entry, outcome.text)
        await self._carry_out(outcome)
        if fate == "discarded":
            for entry in rest:
                await self._carry_out(core.follower_discarded(entry, error))
        assert head is outcome.entry

    def _written(self, written: Awaitable[_T]) -> Awaitable[_T]:
        """*written*, an attempt's outcome on its way to the journal, to await: shielded once
        `interrupted` (an operator's cancel, still pending, must not cut it short)."""
        return _shielded(written) if self.interrupted else written

    async def _carry_out(self, outcome: Outcome) -> None:
        runtime, core = self.runtime, self.runtime.core
        match outcome:
            case Backoff(entry=entry, at=at, text=text, changes=changes, snooze=snooze):
                # Journaled first: an operator reading the journal sees why the
                # key waits, and until when.
                if await runtime.journal.write(changes, now=runtime.unix_now()):
                    self._superseded(entry, "job.superseded")
                    return
                core.backoff(entry, snooze=snooze)
                runtime.check_idle()  # paused while it ran: parked now
                runtime.give_slot(self.lane)  # a slot is for running, not for waiting
                runtime.log.debug(
                    "job.snoozed" if snooze else "job.retry_scheduled",
                    key=entry.key,
                    job_id=entry.id,
                    attempt=entry.attempt,
                    at=at,
                    error=text,
                )
                await self._back_off(at)
            case Discarding(entry=entry, error=error, halt=halt, text=text, changes=changes):
                # A halting discard waits for a resume of its key being journaled
                # (`Runtime.halt_writes`), shielded: a skip's cancel landing then is
                # for the attempt, which has ended; `_written` decides on the write.
                halting = entry.key if halt else None
                async with runtime.writing_halt(halting, shield=True):
                    written = runtime.journal.write(changes, now=runtime.unix_now())
                    if await self._written(written):
                        self._superseded(entry, "job.superseded")
                        return
                    core.discard(entry, halt=halt)
                runtime.log.warning(
                    "job.discarded",
                    key=entry.key,
                    job_id=entry.id,
                    attempt=entry.attempt,
                    error=text,
                    halt=halt,
                )
                if halt:
                    runtime.log.warning("key.halted", key=entry.key, job_id=entry.id)
                runtime.finished(entry.id, error=error)
            case _:
                assert_never(outcome)


async def _shielded(written: Awaitable[_T]) -> _T:
    with trio.CancelScope(shield=True):
        result = await written
    return result
