"""Recurring schedules in the shell: `Supervisor.schedule` and its kin, and the task that fires them.

The journal holds every schedule (`inturn.journal.ScheduleSet`); the shell
keeps none in memory.  One task, `run_recurring`, reads the running
schedules the earliest cursor first (a page at a time), asks the core what
firing the due ones does (`Core.plan_firing`, `Core.fire`: the misfire
policy, the next ticks, the changes), journals that in one write, and
sleeps until the first cursor of the rest, or until a `schedule` or
`resume_schedule` makes an earlier one (`Schedule.noticed`).  So ten
thousand schedules cost one timer and a read and a write per due batch.

A tick's job joins its key's sequence in the write that fires it, behind
whatever the key holds then (the core reserves it, as it reserves a sent
job, and commits it once the journal took the `Fire`), and retries, halts
and holds a unique key as any job does.  A fleet member's are scheduled jobs
due at their ticks, which the members' schedulers promote and the keys'
owners run.
"""

from __future__ import annotations

import datetime
import math
from typing import Final

import trio

from ._core_recurring import dropped, new_schedule, paused, resumed
from ._fixes import schedule_point
from ._journaling import Journaling
from .errors import ScheduleNotFound, describe
from .events import exception_text
from .info import ScheduleInfo
from .journal import Change, ScheduleSet
from .journal._reads import set_schedule_info
from .keys import validate_key

__all__ = ["FIRE_PAGE", "Scheduling"]

FIRE_PAGE: Final = 1000
"""Schedules read (and fired, in one write) at a time: ten times the scheduled jobs' page
(`PAGE`), so that ten thousand schedules due at one second are ten reads and ten writes
(a hundred of each kept the firing a second behind, bench/schedules.py)."""


class Scheduling(Journaling):
    """Recurring schedules of `Supervisor` (a base of its operators' fixes)."""

    async def schedule(
        self,
        name: str,
        key: str | None,
        payload: object,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str = "UTC",
        start: float | datetime.datetime | None = None,
        misfire: str = "one",
        unique_for: float | None = None,
    ) -> ScheduleInfo:
        """Create, or replace, the recurring schedule *name*: durable, in the journal.

        Each tick sends *payload* to *key* (None: a keyless job) as an
        ordinary job: it queues behind the key's work, retries and halts as
        any job.  Give exactly one of *cron* (a five-field cron expression,
        or six with seconds first, in time zone *tz*) or *every* (seconds).
        Ticks come at or after *start* (a Unix time or an aware datetime;
        None: now), measured on the supervisor's clock (virtual under trio's
        mock clock).  *misfire* says what ticks missed while nothing ran
        give: ``"skip"`` none, ``"one"`` a single job, ``"all"`` one each (the
        newest 100, `inturn._core_recurring.CATCH_UP`).  With *unique_for*, each
        tick's job holds the unique key ``schedule:<name>`` for that many
        seconds after it finishes: a tick while the last one's job is
        unfinished, or within that window, sends nothing.

        A tick fires once, whatever restarts, crashes or fleet members race
        (see `inturn.journal.Fire`).  Replacing a schedule never fires a tick
        it fired already.  Returns the schedule as the journal holds it.

        Raises:
            InvalidSchedule: a bad name, cron expression, time zone, interval,
                start, misfire policy or window; both or neither of *cron* and
                *every*.  Nothing is stored.
            InvalidKey: *key* breaks a key rule.
            EncodeError: the codec cannot round-trip *payload*.
            SupervisorClosed: the supervisor has stopped.
            JournalError: the journal could not store it.
        """
        self._check_open()
        runtime = self._runtime
        if key is not None:
            key = validate_key(key)

        def build(data: bytes, last_tick: float | None) -> ScheduleSet:
            return new_schedule(
                name,
                key,
                data,
                cron=cron,
                every=every,
                tz=tz,
                start=start,
                misfire=misfire,
                unique_for=unique_for,
                now=runtime.unix_now(),
                last_tick=last_tick,
            )

        change = build(b"", None)  # checked before anything is encoded or read
        data = self._encode(payload)
        while True:
            found = await runtime.journal.schedules(name=change.name)
            last_tick = found[0].last_tick if found else None
            change = build(data, last_tick)
            if not await self._write_schedule(change):
                break  # else it fired meanwhile: read its last tick again
        runtime.recurring.noticed(runtime.core.clock_time(change.next_at))
        runtime.log.info("schedule.set", schedule=change.name, key=key, next_at=change.next_at)
        await schedule_point()
        return set_schedule_info(change, last_tick)

    async def schedules(self, *, after: str = "", limit: int = 100) -> list[ScheduleInfo]:
        """The recurring schedules by name (those after *after*); at most *limit*."""
        found = await self._runtime.journal.schedules(after=after, limit=limit)
        await schedule_point()
        return found

    async def unschedule(self, name: str) -> None:
        """Delete schedule *name*: it fires no more (its jobs already sent stay).

        Raises:
            ScheduleNotFound: there is no such schedule.
        """
        if await self._write_schedule(dropped(_named(name))):
            raise ScheduleNotFound(name)
        await schedule_point()

    async def pause_schedule(self, name: str) -> None:
        """Pause schedule *name*: it fires nothing until `resume_schedule`; ticks meanwhile are
        not missed, they are skipped.  Pausing a paused schedule changes nothing.

        Raises:
            ScheduleNotFound: there is no such schedule.
        """
        await self._found(name)
        await self._write_schedule(paused(name))
        await schedule_point()

    async def resume_schedule(self, name: str) -> None:
        """Let paused schedule *name* fire again, from its first tick after now.  Resuming a
        running schedule changes nothing.

        Raises:
            ScheduleNotFound: there is no such schedule.
        """
        runtime = self._runtime
        found = await self._found(name)
        if found.next_at is None:
            change = resumed(found, runtime.unix_now())
            if not await self._write_schedule(change):
                assert change.next_at is not None
                runtime.recurring.noticed(runtime.core.clock_time(change.next_at))
        await schedule_point()

    async def _found(self, name: str) -> ScheduleInfo:
        found = await self._runtime.journal.schedules(name=_named(name))
        if not found:
            raise ScheduleNotFound(name)
        return found[0]

    async def _write_schedule(self, change: Change) -> bool:
        """Journal *change*; whether it was superseded."""
        self._check_open()
        runtime = self._runtime
        if self._fleet is not None:
            superseded = await self._fleet.fix([change])
        else:
            superseded = await runtime.journal.write([change], now=runtime.unix_now())
        return bool(superseded)

    async def run_recurring(self) -> None:
        """Fire the recurring schedules as their ticks come, for as long as the supervisor runs.

        A journal failing to read or write them is logged and asked again a
        second later; their cursors stay meanwhile, so the ticks are late,
        never lost (``misfire`` decides what late ticks give).
        """
        runtime = self._runtime
        waiting, core = runtime.recurring, runtime.core
        while not core.stopping:
            waiting.reading()
            try:
                found = await runtime.journal.due_schedules(limit=FIRE_PAGE)
                now = runtime.unix_now()
                due = [each for each in found if each.next_at is not None and each.next_at <= now]
                if due:
                    await self._fire(due, now)
            except Exception as exc:
                runtime.log.error(
                    "schedule.fire_failed", error=describe(exc), exception=exception_text(exc)
                )
                await trio.sleep(1.0)
                continue
            if due:
                await schedule_point()
                continue
            first = found[0].next_at if found else None
            deadline = math.inf if first is None else core.clock_time(first)
            if self._fleet is not None:  # a lease another member holds may expire
                deadline = min(deadline, runtime.now() + self._fleet.poll_interval)
            await waiting.wait(deadline)

    async def _fire(self, due: list[ScheduleInfo], now: float) -> None:
        """Fire schedules *due* in one write (`Core.fire`): their ticks' jobs join their keys
        (a fleet member's are scheduled, due, and its scheduler is woken for them)."""
        runtime = self._runtime
        core = runtime.core
        plans = core.plan_firing(due, now)
        fleet = self._fleet
        if fleet is not None:
            count = sum(len(each.ticks) for each in plans)
            firing = core.fire_scheduled(plans, await fleet.new_ids(count) if count else [])
            superseded = await fleet.journal.write(list(firing.changes), now=now)
            if firing.jobs:
                runtime.schedule.noticed(-math.inf)  # its jobs are due: promote them
        else:
            firing, entries = core.fire(plans)
            try:
                superseded = await runtime.journal.write(firing.changes, now=now)
            except BaseException:
                for entry in reversed(entries):
                    runtime.start_holding(core.retract(entry))
                    runtime.wake(entry.lane)  # its actor may be waiting on this head
                runtime.check_idle()
                raise
            for entry, there in zip(entries, core.fired(entries, superseded), strict=True):
                if there:
                    self._commit(entry)
                else:
                    runtime.start_holding(core.retract(entry))
            runtime.check_idle()
        for change, each in zip(firing.changes, firing.plans, strict=True):
            if change in superseded:
                continue
            if each.dropped:
                runtime.log.info(
                    "schedule.missed",
                    schedule=change.name,
                    dropped=each.dropped,
                    misfire=each.stored.misfire,
                )
            if runtime.debug:
                runtime.log.debug(
                    "schedule.fired",
                    schedule=change.name,
                    ticks=len(change.jobs),
                    next_at=change.next_at,
                )


def _named(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a schedule's name must be a str, not {type(name).__name__}")
    return name
