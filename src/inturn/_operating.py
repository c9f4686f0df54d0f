"""Operators' fixes: `Supervisor.skip`, `requeue`, `pause`, `resume`, `retry_now`, `purge_dead`.

Each is "decide, write, report the answer": the core decides for the jobs
this process holds, the journal arbitrates what another writer may race for
(a fix from another process, the job's own completion).  `serve_commands`
carries out the fixes other processes leave in the journal's inbox, and the
jobs they send (`accept_sent`: a producer that runs nothing, `inturn.operate`).

The audit trail: an operator's fix, whichever way it comes (`inturn.operate`
on a journal nobody holds, or on a fleet; a `Command` through the inbox), is
carried out by `carry_out`, which journals one `Audit` of it once it has its
outcome: the place that learns the outcome is the one that carries the fix
out, and the caller's name (``who``) travels to it in the `Command`.  The
methods called straight from the application's own code (``await
supervisor.skip(...)``) are the application's policy, not an operator's fix,
and are not audited: a program that skips many jobs would push the
operators' entries out of the bounded trail.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TypeVar

import trio

from ._core_audit import FIX_VERBS, audited, check_actor
from ._fixes import (
    FIXING,
    Fixing,
    check_fix,
    check_job_id,
    default_actor,
    lost_race,
    purge_dead,
    requeue_check,
    schedule_point,
    skip_check,
)
from ._scheduling import Scheduling
from ._sending import received_jobs
from ._tasks import start_task
from .core import Entry, Lane, Skipping
from .errors import (
    InturnError,
    JobStateError,
    KeyNotFound,
    PermanentError,
    SupervisorClosed,
    describe,
)
from .events import exception_text
from .info import JobInfo
from .journal import Answer, Audit, Command, SentJob, StoredJob
from .keys import validate_key

_T = TypeVar("_T")


class Operating(Scheduling):
    """The operators' fixes of `Supervisor` (its base)."""

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
            await self._fleet.fix(runtime.core.resume_elsewhere(key).changes)
            runtime.log.info("key.resumed", key=key)
            await schedule_point()
            return
        async with self._changing_halt(key):
            resuming = runtime.core.resuming(key)
            if resuming is None:
                await trio.lowlevel.checkpoint()
                return
            async with runtime.writing_halt(key):
                await runtime.journal.write(resuming.changes, now=runtime.unix_now())
                if runtime.core.resume(key):
                    runtime.spawn(key)
        runtime.log.info("key.resumed", key=key)
        runtime.check_idle()
        await schedule_point()

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
        entry.trace = info.trace  # the journal's `Requeue` keeps it too
        if not await self._journal([entry], requeue_of=info.id):
            lost_race()
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
            job_id = info.id
            fix = self._runtime.core.requeue_elsewhere(info.id, info.key, None)
        else:
            [job_id] = await fleet.new_ids(1)
            fix = self._runtime.core.requeue_elsewhere(info.id, info.key, job_id)
        if await fleet.fix(fix.changes):
            lost_race()
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
        while runtime.core.skips_under_way(info.id):
            await self._until_answered()
        reviving = runtime.core.requeuing_head(info.id, info.key)
        async with contextlib.AsyncExitStack() as halt_written:
            try:
                if reviving.resume:  # heard in journal order with a halting discard
                    await halt_written.enter_async_context(runtime.writing_halt(info.key))
                superseded = await runtime.journal.write(reviving.changes, now=runtime.unix_now())
            except BaseException:
                runtime.core.revive_refused(info.id)
                self._answer_skips()
                raise
            stored = StoredJob(
                id=info.id, key=info.key, data=info.data, unique=info.unique, trace=info.trace
            )
            needs_actor = runtime.core.revived(reviving, stored, superseded)
            if needs_actor is not None and reviving.resume:
                runtime.log.info("key.resumed", key=info.key)
        self._answer_skips()
        if needs_actor is None:
            lost_race()
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

    async def _skip_scheduled(self, info: JobInfo, *, promoted: bool) -> bool:
        """Skip *info*, which the journal showed scheduled (and *promoted* since, as the
        core says): the scheduler may promote it meanwhile, and the core decides
        (`Core.skipping_scheduled`).

        Returns False if it may be in its key's sequence now: read it again.
        """
        runtime, core = self._runtime, self._runtime.core
        skipping = core.skipping_scheduled(info.id, info.key, promoted=promoted)
        if skipping is None:
            while core.promoting(info.id):
                await self._until_answered()
            return False
        try:
            superseded = await runtime.journal.write(skipping.changes, now=runtime.unix_now())
        except BaseException:
            core.unskip(info.id, info.key)
            raise
        if not core.scheduled_skip_answered(skipping, superseded):
            lost_race()
            runtime.check_idle()
            await skip_check(runtime.journal, info.id)  # say what it is now
            raise JobStateError(info.id, "dead", "another writer discarded it first")
        self._discarded(skipping)
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
        try:
            info, promoted = await self._skip_read(checked)
            if self._fleet is not None and (
                info.state == "scheduled"  # in no key's sequence: nobody's
                or not self._fleet.owns(info.id if info.key is None else info.key)
            ):
                await self._fleet_skip(info)
                return
            while info.state == "scheduled":
                if await self._skip_scheduled(info, promoted=promoted):
                    return
                info, promoted = await self._skip_read(checked)  # promoted meanwhile, perhaps
        finally:
            self._answer_skips()  # the scheduler may wait for this skip's answer
        # Another operator's skip of the job may be under way: the core counts both,
        # the journal discards it once, and the other skip hears it superseded.
        try:
            if await self._skip(info):
                return
            lost_race()  # unless the job is unfinished again, and this skip gets it
            # Its attempt finished first (its outcome was being journaled, or the
            # handler shielded itself): it keeps that outcome, and the caller learns
            # which from the error a skip of it raises now.  Unless it is unfinished
            # again (a dead letter another operator requeued at its head meanwhile):
            # then this skip, still under way, is of the job as it is now.
            while True:
                try:
                    info = await skip_check(runtime.journal, checked)
                except BaseException:
                    runtime.core.unskip(info.id, info.key)  # this skip ends here
                    raise
                if await self._skip(info, again=True):
                    return
        finally:
            self._answer_skips()  # a requeue of it may wait for this skip's answer

    async def _skip_read(self, job_id: int) -> tuple[JobInfo, bool]:
        """The job to skip as the journal has it now (`skip_check`), and whether the core
        promoted it meanwhile, if it was scheduled."""
        core = self._runtime.core
        core.skip_reading()
        try:
            info = await skip_check(self._runtime.journal, job_id)
        finally:
            promoted = core.skip_read(job_id)
        return info, promoted

    async def _fleet_skip(self, info: JobInfo) -> None:
        """`skip` of a job this fleet member does not own: its discard, straight to the journal.

        The owner, if any, finds its start or its completion superseded; a
        running attempt is not cut short, as it is on the key's own member.
        """
        runtime = self._runtime
        assert self._fleet is not None
        skipping = runtime.core.skipping_elsewhere(info.id, info.key)
        if await self._fleet.fix(skipping.changes):
            lost_race()
            await skip_check(runtime.journal, info.id)  # say what it is now
            raise JobStateError(info.id, "dead", "another writer discarded it first")
        runtime.log.warning("job.discarded", key=info.key, job_id=info.id, error=skipping.text)

    async def _skip(self, info: JobInfo, *, again: bool = False) -> bool:
        """Skip *info*, a job in its key's sequence (*again*: this skip is under way already,
        the core counts it); False if its attempt finished first: the skip is still under
        way, and the caller looks the job up again."""
        runtime, core = self._runtime, self._runtime.core
        lane: Lane = info.id if info.key is None else info.key
        place = info.id if info.place is None else info.place
        # From here on, it never starts.
        running = core.skip_again(info.id, info.key) if again else core.skip(info.id, info.key)
        runtime.log.info("job.skipped", key=info.key, job_id=info.id)
        if running is not None:
            self._interrupt(lane)
        try:
            await self._until_skippable(info, place, running)
            if running is None and (running := core.skip_again(info.id, info.key)) is not None:
                # Revived meanwhile with no skip to mark it, and started: cut it short.
                self._interrupt(lane)
                await self._until_skippable(info, place, running)
        except BaseException:  # the skip is called off: the job may run again
            core.unskip(info.id, info.key)
            runtime.wake(lane)
            raise
        if running is not None and not core.holds(running):
            return False
        skipping = core.skipping(info.id, info.key, place)
        try:
            superseded = await runtime.journal.write(skipping.changes, now=runtime.unix_now())
        except BaseException:
            core.unskip(info.id, info.key)
            runtime.wake(lane)
            raise
        if not core.skip_answered(skipping, superseded):
            # Another writer finished it first: it keeps that outcome.
            lost_race()
            runtime.wake(lane)  # a head that waited for this discard: its start is superseded
            await skip_check(runtime.journal, info.id)
            raise JobStateError(info.id, "dead", "another writer discarded it first")
        self._discarded(skipping)
        if skipping.cut_backoff:
            self._interrupt(lane, backing_off=True)  # cut its backoff short
        runtime.wake(lane)  # the actor goes on to the next job
        return True

    def _discarded(self, skipping: Skipping) -> None:
        """The journal discarded the job *skipping* names: say so, and tell its ``ask``."""
        runtime = self._runtime
        runtime.log.warning(
            "job.discarded", key=skipping.key, job_id=skipping.job_id, error=skipping.text
        )
        runtime.finished(skipping.job_id, error=PermanentError(skipping.text))

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
            await self._until_answered()
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
            await self._fleet.fix(runtime.core.pause_elsewhere(key).changes)
            runtime.log.info("key.paused", key=key)
            await schedule_point()
            return
        if not runtime.core.is_known(key) and not await runtime.journal.scheduled(key=key, limit=1):
            await trio.lowlevel.checkpoint()
            raise KeyNotFound(key)
        async with self._changing_halt(key):
            # Halted in the core first, so nothing starts while the Halt is being
            # journaled; a start already under way takes itself back (Core.may_run).
            pausing = runtime.core.pausing(key)
            if pausing is None:  # halted already
                await trio.lowlevel.checkpoint()
                return
            try:
                await runtime.journal.write(pausing.changes, now=runtime.unix_now())
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

    async def accept_sent(self, jobs: Sequence[SentJob], trace: str | None = None) -> list[int]:
        """Accept *jobs*, sent encoded from elsewhere (`inturn.Operator.send`) in the context
        *trace*, all or none.

        Each is checked again as `send_many` checks its items, and its payload
        decoded once with this supervisor's codec (`received_jobs`): what fails
        is refused with nothing journaled.

        Returns:
            Their ids, in the order given.
        """
        self._check_open()
        runtime = self._runtime
        batch = received_jobs(
            jobs, codec=runtime.codec, max_payload=runtime.max_payload, now=runtime.unix_now()
        )
        ids = await self._accept_new(batch, parent=trace)
        await schedule_point()
        return ids

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

    async def carry_out(self, command: Command) -> int | bool | list[int] | None:
        """Run *command* with the method its verb names; return that method's result.

        A fix (every verb but ``send``) is audited: once it is done, or raised,
        the journal keeps who asked (``command.actor``, else this process's
        ``user@host:pid``), when, what, and the outcome (`Journal.audit`).
        A command whose arguments are bad is refused (TypeError, ValueError)
        before anything is done or audited.
        """
        if command.verb not in FIX_VERBS:
            return await self._carry_out(command)
        check_fix(command)
        actor = default_actor() if command.actor is None else check_actor(command.actor)
        observer = self._runtime.observer
        if observer is None:
            return await self._fix(command, actor)
        with observer.fixing(command.verb, command.job_id, command.key) as span:
            fixing = Fixing()
            result = await self._fix(command, actor, fixing)
            observer.fixed(span, key=fixing.key, trace_text=fixing.trace, outcome="done")
        return result

    async def _fix(
        self, command: Command, actor: str, fixing: Fixing | None = None
    ) -> int | bool | list[int] | None:
        """`carry_out` of fix *command*, audited (what it learns on its way in *fixing*)."""
        fixing = Fixing() if fixing is None else fixing
        token = FIXING.set(fixing)
        try:
            result = await self._carry_out(command)
        except Exception as exc:
            await self._audit(
                audited(
                    command,
                    actor=actor,
                    error=exc,
                    superseded=fixing.superseded,
                    key=fixing.key,
                )
            )
            raise
        finally:
            FIXING.reset(token)
        await self._audit(audited(command, actor=actor, result=result, key=fixing.key))
        return result

    async def _audit(self, entry: Audit) -> None:
        """Journal *entry*, shielded: a fix carried out is recorded even as its caller is
        cancelled.  A journal that refuses it is logged, and the fix's answer stands: it
        was carried out (or refused) whatever the trail says."""
        runtime = self._runtime
        with trio.CancelScope(shield=True):
            try:
                if self._fleet is not None:
                    await self._fleet.fix([entry])
                else:
                    await runtime.journal.write([entry], now=runtime.unix_now())
            except Exception as exc:
                runtime.log.error(
                    "audit.not_recorded",
                    verb=entry.verb,
                    outcome=entry.outcome,
                    error=describe(exc),
                    exception=exception_text(exc),
                )

    async def _carry_out(self, command: Command) -> int | bool | list[int] | None:
        match command.verb:
            case "send":
                return await self.accept_sent(command.jobs, command.trace)
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
            case "unschedule" | "pause_schedule" | "resume_schedule":  # the name in key
                await getattr(self, command.verb)(_given(command.key))
                return None
        raise ValueError(f"not an operator's command: {command.verb!r}")


def _given(value: _T | None) -> _T:
    if value is None:
        raise ValueError("the command lacks an argument its verb needs")
    return value


def _plain(args: tuple[object, ...]) -> tuple[str | int | float | None, ...]:
    """An error's arguments as the journal can store them."""
    return tuple(arg if isinstance(arg, str | int | float | None) else str(arg) for arg in args)
