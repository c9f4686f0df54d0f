"""What every path that journals new or returning jobs shares: the supervisor's base.

`Supervisor` accepts jobs (`send`, `send_many`, ...), its fixes
(`inturn._operating`) put jobs back (`requeue`), and `run_schedule` promotes
scheduled jobs as they fall due: each path reserves in the core, then
journals here (`_journal_new`, `_journal`), in one write, and commits what
the journal took.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import NoReturn

import trio

from ._claims import one_at_a_time
from ._fixes import schedule_point
from ._runtime import Runtime
from ._schedule import PAGE
from .codec import encode_checked
from .core import Accepting, Entry, Lane, NewJob
from .errors import SupervisorClosed, describe
from .events import exception_text
from .fleet import Fleet
from .info import JobInfo
from .journal import Append, Change, Due, MarkAttempt, Requeue, StoredJob


class Journaling:
    """The supervisor's state, and the journaling its paths share (`Supervisor`'s base)."""

    def __init__(self, runtime: Runtime, fleet: Fleet | None) -> None:
        self._runtime = runtime
        self._fleet = fleet
        """This supervisor's part of a fleet (``runtime.fleet`` too); None when it holds its
        journal alone."""
        self._halting: dict[str, trio.Event] = {}
        """Keys whose halt an operator's `Halt`, `Resume` or `Revive` being journaled may
        change (`_changing_halt`)."""
        self._valid_key: str | None = None
        """The last key `send` validated."""
        self._answered: trio.Event | None = None
        """Set when a write that accepts jobs, or an operator's skip, is answered; made only
        while an operator waits for one (`_until_answered`)."""

    def _check_open(self) -> None:
        if self._runtime.closed:
            raise SupervisorClosed("the supervisor has stopped")

    def _encode(self, payload: object) -> bytes:
        return encode_checked(self._runtime.codec, payload, self._runtime.max_payload)

    async def _accept_new(self, batch: Sequence[NewJob], parent: str | None = None) -> list[int]:
        """Journal the jobs of *batch*, checked, in one write, all or none; their ids.  Traced
        as sent in the current context, or in *parent*'s (another program's send).

        A fleet member only journals them (the journal places each, and its key's
        owner runs it); otherwise the core reserves their ids and places first.
        """
        observer = self._runtime.observer
        if observer is None:  # the jobs keep their sender's context all the same
            return await self._accept_traced(batch, parent)
        with observer.sending([key for key, *_ in batch], parent=parent) as sending:
            ids = await self._accept_traced(batch, sending.trace)
            sending.accepted(ids)
        if self._fleet is None:
            observer.accepted(ids)
        return ids

    async def _accept_traced(self, batch: Sequence[NewJob], trace: str | None) -> list[int]:
        """`_accept_new`, the jobs sent in the context *trace*."""
        runtime = self._runtime
        if self._fleet is not None:
            ids = await self._fleet.new_ids(len(batch))
            appends = runtime.core.appends(ids, batch, trace)
            await self._fleet.append(appends, now=runtime.unix_now())
            return ids
        accepting = runtime.core.accept(batch, trace)
        await self._journal_new(accepting)
        return list(accepting.ids)

    async def _journal_new(self, accepting: Accepting) -> None:
        """Journal new jobs in one write (`Core.accept`), then commit them; or retract them all."""
        runtime = self._runtime
        core = runtime.core
        try:
            superseded = await runtime.journal.write(accepting.changes, now=runtime.unix_now())
        except BaseException:
            for lane in core.refused(accepting):
                runtime.start_holding(lane)
            for run in accepting.runs:
                runtime.wake(run.lane)  # its actor may be waiting on this head
            runtime.check_idle()
            self._answer_skips()
            raise
        if runtime.closed:
            await self._closed_while_journaled(accepting.changes, accepting.starts, superseded)
        for append in accepting.later:
            assert append.due_at is not None
            runtime.schedule.noticed(core.clock_time(append.due_at))
            runtime.log.debug(
                "job.scheduled", key=append.key, job_id=append.job_id, due_at=append.due_at
            )
        accepted = core.accepted(accepting, superseded)
        for lane in accepted.holding:
            runtime.start_holding(lane)
        for lane in accepted.spawn:
            runtime.spawn(lane)
        for lane in accepted.wake:
            runtime.wake(lane)  # once per run of the lane's jobs
        self._answer_skips()
        if runtime.debug:
            for change in accepting.changes:
                if isinstance(change, Append) and change.due_at is None:
                    runtime.log.debug("job.accepted", key=change.key, job_id=change.job_id)
        if accepted.give_back:
            await runtime.give_back(list(accepted.give_back))

    async def _journal(self, entries: list[Entry], *, requeue_of: int | None = None) -> bool:
        """Journal reserved *entries*, jobs going back into their keys, in one write, then
        commit them; or retract them all.

        With *requeue_of*, the one entry is dead letter *requeue_of* going back
        (`Requeue`); False if the journal superseded that (it is no dead
        letter now), with the entry retracted.  Else the entries are
        scheduled jobs joining their keys (`Due`), which wait for their due
        time no more; one the journal superseded is retracted alone (another
        writer finished it: `Core.promote_due` passes by the jobs this
        supervisor's own skips discard).
        """
        runtime = self._runtime
        core = runtime.core
        due = requeue_of is None
        returning = core.returning(entries, requeue_of=requeue_of)
        changes, firsts, starting = returning.changes, returning.firsts, returning.starts
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
        holding, give_back = core.starts_answered(starting, superseded)
        for lane in holding:
            runtime.start_holding(lane)
        for entry, first in zip(entries, firsts, strict=True):
            if due:
                core.due_answered(entry)  # in its lane now, or finished by another writer
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
        changes: Sequence[Change],
        starting: Sequence[tuple[Entry, MarkAttempt]],
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
        """A write that accepts jobs, or a skip, was answered: wake the operators waiting for
        one (`_until_answered`)."""
        if self._answered is not None:
            self._answered.set()
            self._answered = None

    async def _until_answered(self) -> None:
        """Wait for the next answer to a write that accepts jobs, or to a skip: the operator
        asks the core again then (a skip, whether the job it skips is accepted; a requeue,
        whether a skip of its job is under way)."""
        if self._answered is None:
            self._answered = trio.Event()
        await self._answered.wait()

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

    def _changing_halt(self, key: str) -> AbstractAsyncContextManager[None]:
        """Within the block, only this operator's call may journal a change to *key*'s halt.

        The core halts a key before its `Halt` is journaled, and lifts the halt
        once its `Resume` (or `Revive`) is: two such writes in flight at once
        could leave the core's word on the key other than the journal's last
        (a `Resume` answered after a later `Halt` took effect), and a pause
        could return before its halt is in the journal.  Each waits for the
        one before, then decides on what the core holds now.

        A lock, not a number: the journals group concurrent writes into one
        commit in no promised order, so a per-key number the core gave each
        write could not tell it which the journal applied last.  Apart from
        `Runtime.halt_writes` (which an actor's halting discard takes): a
        head requeue waits here for a skip of its job under way, which may
        wait for an attempt whose failure for good takes that one; and a
        pause's `Halt` in flight does not hold such a discard back.
        """
        return one_at_a_time(self._halting, key)

    async def run_schedule(self) -> None:
        """Promote scheduled jobs as they fall due, the earliest first, for as long as the supervisor runs.

        A journal failing to read or promote them is logged and asked again a
        second later; the jobs stay scheduled meanwhile.
        """
        runtime = self._runtime
        schedule, core = runtime.schedule, runtime.core
        while not core.stopping:
            schedule.reading()
            core.schedule_reading()
            try:
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
        """Due scheduled jobs join their keys' sequences, in one write (`Core.promote_due`).

        One that an operator's skip is discarding is left scheduled: once
        that skip is answered, the scheduler reads again.
        """
        runtime = self._runtime
        promoting = runtime.core.promote_due(
            [
                StoredJob(
                    id=info.id,
                    key=info.key,
                    data=info.data,
                    unique=info.unique,
                    attempts=info.attempts,
                    trace=info.trace,
                )
                for info in due
            ]
        )
        if promoting.entries:
            await self._journal(list(promoting.entries))
            runtime.check_idle()
        elif promoting.held:
            await self._until_answered()


def _job_of(change: Change) -> int:
    """The job a change of a new job's batch names (an `Append` or a `MarkAttempt`)."""
    assert isinstance(change, Append | MarkAttempt | Requeue | Due)
    return change.job_id


class _Superseded(Exception):
    """A requeue lost to another writer (see `Supervisor._journal`)."""
