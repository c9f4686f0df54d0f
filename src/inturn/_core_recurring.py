"""Recurring schedules' rules: what a schedule is, when it ticks, and what a late tick fires (pure).

Theory of operation
-------------------
A schedule is a row in the journal (`inturn.journal.ScheduleSet`): a name,
the job it sends (key, payload, dedup window), its recurrence (a cron
expression in a time zone, or a fixed interval in seconds) and a *cursor*,
``next_at``: the Unix time of the first tick not yet fired.  Firing the
ticks due (`plan`) is one journal change (`inturn.journal.Fire`): it moves
the cursor from the time it read to the next tick after now, and appends
the ticks' jobs, in one transaction.  The journal applies it only while the
cursor is still where the writer read it (a compare-and-set on
(schedule, tick time)), so a tick fires once, whatever restarts, crashes or
fleet members race: the one that moves the cursor creates the jobs, and
any other finds the cursor moved and creates nothing.

Time zones come from `zoneinfo`, cron expressions from cronsim, which
follows Debian's cron across daylight-saving changes: a time the clocks
skip (02:30 on a spring-forward night) fires once, at the first minute that
exists after it; a time that occurs twice (02:30 on a fall-back night)
fires once, at its first occurrence.  An interval (``every``) is counted
in elapsed seconds from ``start``, untouched by wall clocks.

Nothing here reads a clock: callers pass ``now`` (Unix time, from the
runtime's clock, so ticks elapse in virtual time under trio's mock clock).
"""

from __future__ import annotations

import datetime
import math
import zoneinfo
from collections.abc import Iterator, Sequence
from typing import Final, Literal, TypeAlias

import attrs
from cronsim import CronSim, CronSimError

from ._checks import MAX_UNIQUE_FOR, check_number
from .errors import InvalidSchedule
from .info import ScheduleInfo
from .journal.records import Append, Fire, ScheduleDrop, SchedulePause, ScheduleSet

__all__ = [
    "CATCH_UP",
    "Firing",
    "GRACE",
    "MAX_NAME",
    "MISFIRES",
    "Misfire",
    "Plan",
    "Recurrence",
    "fires",
    "unique_of",
    "new_schedule",
    "dropped",
    "paused",
    "plan",
    "recurrence_of",
    "resumed",
]

Misfire: TypeAlias = Literal["skip", "one", "all"]
MISFIRES: Final = ("skip", "one", "all")

MAX_NAME: Final = 200
"""The longest schedule name, in characters."""

CATCH_UP: Final = 100
"""The most jobs one firing of a schedule creates under ``misfire="all"``: the newest
ticks missed, so a schedule every second back after a week's outage queues 100 jobs,
not 604,800.  Older missed ticks are dropped (`Plan.dropped` counts them)."""

GRACE: Final = 60.0
"""Seconds a tick may fire late and still be on time: later than that, or overtaken by
the tick after it, it was *missed*, and ``misfire`` decides."""

_LATEST: Final = 253_402_300_799.0  # 9999-12-31T23:59:59Z


@attrs.frozen
class Recurrence:
    """When a schedule ticks: a cron expression in a time zone, or every so many seconds."""

    cron: str | None
    every: float | None
    tz: str
    start: float
    """Unix time of the first possible tick: ticks are at or after it."""

    def first(self, after: float) -> float:
        """The first tick at or after *start* and strictly after *after*."""
        if self.every is not None:
            if after < self.start:
                return self.start
            count = math.floor((after - self.start) / self.every) + 1
            while self.start + count * self.every <= after:  # a quotient rounded down
                count += 1
            while count > 1 and self.start + (count - 1) * self.every > after:  # or up
                count -= 1
            return self.start + count * self.every
        return next(self.ticks(max(after, self.start - 1e-6)))

    def ticks(self, after: float) -> Iterator[float]:
        """The ticks strictly after *after*, in order (at or after *start*)."""
        if self.every is not None:
            tick = self.first(after)
            while tick <= _LATEST:
                yield tick
                tick = self.first(tick)  # from start, not summed: no rounding piles up
            return
        assert self.cron is not None
        zone = zoneinfo.ZoneInfo(self.tz)
        base = max(after, self.start - 1e-6)
        # cronsim starts at the next whole second after a fractional time, and at the
        # time itself otherwise; so step past *after* exactly.
        moment = datetime.datetime.fromtimestamp(math.floor(base), zone)
        for when in CronSim(self.cron, moment):
            tick = when.timestamp()
            if tick > base:
                yield tick


def recurrence_of(stored: ScheduleInfo) -> Recurrence:
    return Recurrence(stored.cron, stored.every, stored.tz, stored.start)


@attrs.frozen
class Plan:
    """What firing schedule *name* does now: the jobs for *ticks*, the cursor moved to *next_at*."""

    stored: ScheduleInfo
    ticks: tuple[float, ...]
    """The ticks that get a job (none: the cursor moves all the same)."""
    last_tick: float
    """The newest tick due: the newest this firing passes."""
    next_at: float
    """The first tick after now: the cursor's new place."""
    dropped: int
    """Missed ticks that get no job (``misfire``), up to what was counted."""


def new_schedule(
    name: object,
    key: str | None,
    data: bytes,
    *,
    cron: object,
    every: object,
    tz: object,
    start: object,
    misfire: object,
    unique_for: object,
    now: float,
    last_tick: float | None = None,
) -> ScheduleSet:
    """The change that creates or replaces schedule *name*, checked; its first tick at or
    after *start* (None: now; for *every*, one interval from now), and after *last_tick*
    (the tick the schedule it replaces fired last: never fired twice).

    *key* is validated by the caller (None: keyless jobs).

    Raises:
        InvalidSchedule: a name that is not 1 to 200 characters; both or neither of
            *cron* and *every*; an invalid cron expression; an unknown time zone;
            *every* not > 0; an unknown *misfire*; *unique_for* not > 0 and at most
            ten years; *start* not an aware datetime or a Unix time.
    """
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isprintable():
        raise InvalidSchedule(
            f"a schedule's name must be a printable str of 1 to {MAX_NAME} characters, not {name!r}"
        )
    if (cron is None) == (every is None):
        raise InvalidSchedule("give cron or every, exactly one of them")
    if not isinstance(tz, str):
        raise InvalidSchedule(f"tz must be a time zone's name (a str), not {tz!r}")
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown time zone {tz!r}") from None
    if cron is not None:
        if not isinstance(cron, str):
            raise InvalidSchedule(f"cron must be a str, not {cron!r}")
        try:
            CronSim(cron, datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
        except CronSimError as exc:
            raise InvalidSchedule(f"invalid cron expression {cron!r}: {exc}") from None
    interval: float | None = None
    if every is not None:
        try:
            check_number("every", every)
        except (TypeError, ValueError) as exc:
            raise InvalidSchedule(str(exc)) from None
        assert isinstance(every, int | float)
        if not 0 < every <= MAX_UNIQUE_FOR:
            raise InvalidSchedule(f"every must be > 0 seconds and at most ten years, not {every!r}")
        interval = float(every)
    if misfire not in MISFIRES:
        raise InvalidSchedule(f"misfire must be 'skip', 'one' or 'all', not {misfire!r}")
    window: float | None = None
    if unique_for is not None:
        try:
            check_number("unique_for", unique_for)
        except (TypeError, ValueError) as exc:
            raise InvalidSchedule(str(exc)) from None
        assert isinstance(unique_for, int | float)
        if not 0 < unique_for <= MAX_UNIQUE_FOR:
            raise InvalidSchedule(
                f"unique_for must be > 0 and at most ten years, not {unique_for!r}"
            )
        if misfire == "all":
            raise InvalidSchedule(
                "unique_for lets one tick's job at a time exist: not with misfire='all'"
            )
        window = float(unique_for)
    first = _start_time(start, now)
    if start is None and interval is not None:
        first += interval  # every: the first tick one interval from now
    recurrence = Recurrence(cron if isinstance(cron, str) else None, interval, tz, first)
    after = first - 1e-6 if last_tick is None else max(first - 1e-6, last_tick)
    try:
        next_at = recurrence.first(after)
    except StopIteration:
        raise InvalidSchedule(f"cron expression {cron!r} never ticks after {first!r}") from None
    return ScheduleSet(
        name=name,
        key=key,
        data=data,
        cron=recurrence.cron,
        every=interval,
        tz=tz,
        start=first,
        misfire=str(misfire),
        unique_for=window,
        next_at=next_at,
    )


def dropped(name: str) -> ScheduleDrop:
    """The change that deletes schedule *name*."""
    return ScheduleDrop(name)


def paused(name: str) -> SchedulePause:
    """The change that pauses schedule *name*."""
    return SchedulePause(name, None)


def resumed(stored: ScheduleInfo, now: float) -> SchedulePause:
    """The change that resumes paused schedule *stored* at its first tick after *now*, and
    after its last tick: the ticks it was paused through are gone, not missed."""
    change = new_schedule(
        stored.name,
        stored.key,
        stored.data,
        cron=stored.cron,
        every=stored.every,
        tz=stored.tz,
        start=stored.start,
        misfire=stored.misfire,
        unique_for=stored.unique_for,
        now=now,
        last_tick=now if stored.last_tick is None else max(now, stored.last_tick),
    )
    return SchedulePause(stored.name, change.next_at)


def _start_time(start: object, now: float) -> float:
    if start is None:
        return now
    if isinstance(start, datetime.datetime):
        if start.tzinfo is None:
            raise InvalidSchedule(
                "start must be an aware datetime (with a tzinfo), not a naive one"
            )
        return start.timestamp()
    try:
        check_number("start", start)
    except (TypeError, ValueError) as exc:
        raise InvalidSchedule(str(exc)) from None
    assert isinstance(start, int | float)
    if not 0 <= start <= _LATEST:
        raise InvalidSchedule(f"start must be a Unix time up to 9999-12-31, not {start!r}")
    return float(start)


def plan(stored: ScheduleInfo, now: float) -> Plan:
    """What firing *stored* (its cursor at or before *now*) does, by its ``misfire``.

    Its ticks due are the cursor and every tick after it up to *now*.  A tick
    is *missed* if another tick came due after it, or it is more than `GRACE`
    seconds late; the newest tick due, if not missed, always gets its job.
    ``skip``: missed ticks get none; ``one``: if any tick was missed, the
    newest tick due gets one job for all of them; ``all``: each tick due gets
    a job, the newest `CATCH_UP` of them.
    """
    assert stored.next_at is not None, "a paused schedule does not fire"
    recurrence = recurrence_of(stored)
    due: list[float] = [stored.next_at]
    counted = 1
    next_at = after = stored.next_at
    if recurrence.every is not None and now - after > (CATCH_UP + 1) * recurrence.every:
        # An interval back after a long gap: count the ticks no job can get, not walk them
        # (a week of every second is 604,800); the newest CATCH_UP + 1 are walked below.
        skip_to = now - (CATCH_UP + 1) * recurrence.every
        counted += math.floor((skip_to - after) / recurrence.every)
        after = skip_to
    for tick in recurrence.ticks(after):
        if tick > now:
            next_at = tick
            break
        counted += 1
        due.append(tick)
        if len(due) > CATCH_UP:
            del due[0]
    else:
        next_at = math.inf
    if next_at <= stored.next_at:  # never ticks again (a cron past 9999): park the cursor
        next_at = math.inf
    newest = due[-1]
    on_time = now - newest <= GRACE
    missed = counted - 1 + (not on_time)
    ticks: tuple[float, ...]
    if stored.misfire == "all":
        ticks = tuple(due)
    elif stored.misfire == "one" or on_time:
        ticks = (newest,)
    else:
        ticks = ()
    return Plan(stored, ticks, newest, next_at, counted - len(ticks) if missed else 0)


@attrs.frozen
class Firing:
    """The schedules due fire: *changes*, one `Fire` each, to journal in one write."""

    changes: tuple[Fire, ...]
    plans: tuple[Plan, ...]
    jobs: int
    """The ticks' jobs the changes append, all told."""


def unique_of(stored: ScheduleInfo) -> str | None:
    """The unique key a tick's job of *stored* holds: ``schedule:<name>``, with a window."""
    return None if stored.unique_for is None else f"schedule:{stored.name}"


def fires(plans: Sequence[Plan], ids: Iterator[int], *, scheduled: bool) -> list[Fire]:
    """The changes that carry out *plans*, each tick's job's id the next of *ids*, holding
    `unique_of` its schedule: a job in its key's sequence at its id, or (*scheduled*) a
    scheduled job due at its tick."""
    changes: list[Fire] = []
    for each in plans:
        stored = each.stored
        unique = unique_of(stored)
        jobs = tuple(
            Append(
                next(ids),
                stored.key,
                stored.data,
                unique,
                stored.unique_for,
                tick if scheduled else None,
            )
            for tick in each.ticks
        )
        assert stored.next_at is not None
        changes.append(Fire(stored.name, stored.next_at, each.next_at, each.last_tick, jobs))
    return changes
