"""Recurring schedules in the journal: the kit's tests of `ScheduleSet`, `SchedulePause`,
`ScheduleDrop` and `Fire`.

The journal holds each schedule's cursor and decides every race on it: a
`Fire` applies only from the cursor its writer read (so a tick fires once),
a replacement never moves the cursor back over a tick fired, and a tick's
job whose unique key is reserved is left out while the cursor moves on.
Mixed into `JournalConformance`.
"""

from __future__ import annotations

from ._conformance import _expect, _raises, _session
from .errors import JournalError
from .journal import (
    Append,
    Complete,
    Fire,
    Journal,
    ScheduleDrop,
    SchedulePause,
    ScheduleSet,
)

__all__ = ["RecurringConformance"]


def _set(name: str = "s", next_at: float = 100.0, key: str | None = "k") -> ScheduleSet:
    return ScheduleSet(
        name=name,
        key=key,
        data=b"tick",
        cron=None,
        every=60.0,
        tz="UTC",
        start=40.0,
        misfire="one",
        unique_for=None,
        next_at=next_at,
    )


def _tick(job_id: int, due_at: float, unique: str | None = None) -> Append:
    window = None if unique is None else 30.0
    return Append(
        job_id=job_id, key="k", data=b"tick", unique=unique, unique_for=window, due_at=due_at
    )


class RecurringConformance:
    """Schedules: kept, listed, fired once per tick, paused, replaced and dropped."""

    async def test_a_schedule_is_kept_and_listed(self, journal: Journal) -> None:
        """schedules() lists them by name, with name= one; due_schedules() the running ones,
        the earliest cursor first; all survive a reopen."""
        async with _session(journal) as session:
            await session.open()
            superseded = await journal.write([_set("b", 300.0), _set("a", 200.0, key=None)])
            await journal.write([_set("c", 100.0)])
            await journal.write([SchedulePause("c", None)])
            await session.reopen()
            listed = await journal.schedules()
            after = await journal.schedules(after="a", limit=1)
            one = await journal.schedules(name="b")
            none = await journal.schedules(name="z")
            due = await journal.due_schedules(limit=10)
        _expect(list(superseded), [], "superseded")
        _expect(
            [(s.name, s.key, s.next_at) for s in listed],
            [("a", None, 200.0), ("b", "k", 300.0), ("c", "k", None)],
            "schedules()",
        )
        _expect([s.name for s in after], ["b"], "schedules(after='a', limit=1)")
        _expect(
            one and (one[0].data, one[0].every, one[0].tz, one[0].start, one[0].misfire),
            (b"tick", 60.0, "UTC", 40.0, "one"),
            "schedules(name='b')",
        )
        _expect(none, [], "schedules(name='z')")
        _expect([s.name for s in due], ["a", "b"], "due_schedules(): running, earliest first")

    async def test_a_fire_moves_the_cursor_once_and_appends_its_ticks_jobs(
        self, journal: Journal
    ) -> None:
        """Fire from the cursor read applies, its jobs scheduled at their ticks; a second Fire
        from the same cursor is superseded, jobs and all."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_set(next_at=100.0)])
            first = Fire("s", 100.0, 220.0, 160.0, (_tick(1, 100.0), _tick(2, 160.0)))
            again = Fire("s", 100.0, 220.0, 160.0, (_tick(3, 100.0),))
            answered = list(await journal.write([first]))
            lost = list(await journal.write([again]))
            recovery = await session.reopen()
            scheduled = await journal.scheduled()
            [stored] = await journal.schedules()
        _expect(answered, [], "the first Fire superseded")
        _expect(lost, [again], "the second Fire from the same cursor")
        _expect([(job.id, job.due_at) for job in scheduled], [(1, 100.0), (2, 160.0)], "jobs")
        _expect((stored.next_at, stored.last_tick), (220.0, 160.0), "the cursor, the last tick")
        _expect(recovery.scheduled, 2, "Recovery.scheduled")

    async def test_a_fire_of_a_paused_or_dropped_schedule_is_superseded(
        self, journal: Journal
    ) -> None:
        """Paused, or gone: the Fire changes nothing. Pausing twice, resuming a running one,
        dropping or pausing what is not there: superseded."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_set("p"), _set("d")])
            pause = SchedulePause("p", None)
            _expect(list(await journal.write([pause])), [], "pause")
            _expect(list(await journal.write([pause])), [pause], "pause again")
            fire_p = Fire("p", 100.0, 160.0, 100.0, (_tick(1, 100.0),))
            _expect(list(await journal.write([fire_p])), [fire_p], "a paused one's Fire")
            drop = ScheduleDrop("d")
            _expect(list(await journal.write([drop])), [], "drop")
            _expect(list(await journal.write([drop])), [drop], "drop again")
            fire_d = Fire("d", 100.0, 160.0, 100.0, (_tick(2, 100.0),))
            _expect(list(await journal.write([fire_d])), [fire_d], "a dropped one's Fire")
            resume = SchedulePause("p", 400.0)
            _expect(list(await journal.write([resume])), [], "resume")
            _expect(list(await journal.write([resume])), [resume], "resume a running one")
            missing = SchedulePause("nothing", None)
            _expect(list(await journal.write([missing])), [missing], "pause of none")
            scheduled = await journal.scheduled()
            [stored] = await journal.schedules()
        _expect(scheduled, [], "jobs of superseded Fires")
        _expect((stored.name, stored.next_at), ("p", 400.0), "the resumed cursor")

    async def test_a_replacement_never_moves_the_cursor_back_over_a_fired_tick(
        self, journal: Journal
    ) -> None:
        """ScheduleSet of a schedule that fired up to tick T: superseded unless its cursor is
        after T; a resume likewise."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_set(next_at=100.0)])
            await journal.write([Fire("s", 100.0, 160.0, 100.0, (_tick(1, 100.0),))])
            back = _set(next_at=100.0)
            _expect(list(await journal.write([back])), [back], "a cursor at the tick fired")
            on = _set(next_at=130.0)
            _expect(list(await journal.write([on])), [], "a cursor after it")
            await journal.write([SchedulePause("s", None)])
            early = SchedulePause("s", 90.0)
            _expect(list(await journal.write([early])), [early], "a resume before it")
            [stored] = await journal.schedules()
        _expect((stored.next_at, stored.last_tick), (None, 100.0), "paused, its last tick kept")

    async def test_a_ticks_job_whose_unique_key_is_reserved_is_left_out(
        self, journal: Journal
    ) -> None:
        """The Fire applies and its cursor moves; the job whose unique key another job holds,
        or reserves within its window, is superseded (the rest of its jobs are appended)."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_set(next_at=100.0)])
            await journal.write([Append(job_id=1, key="k", data=b"", unique="u", unique_for=30.0)])
            held = _tick(2, 100.0, unique="u")
            fire = Fire("s", 100.0, 160.0, 100.0, (held,))
            _expect(list(await journal.write([fire], now=50.0)), [held], "held by job 1")
            await journal.write([Complete(1)], now=60.0)  # reserved until 90
            within = _tick(3, 160.0, unique="u")
            fire = Fire("s", 160.0, 220.0, 160.0, (within,))
            _expect(list(await journal.write([fire], now=80.0)), [within], "within its window")
            free = _tick(4, 220.0, unique="u")
            fire = Fire("s", 220.0, 280.0, 220.0, (free,))
            _expect(list(await journal.write([fire], now=95.0)), [], "after the window")
            scheduled = await journal.scheduled()
            [stored] = await journal.schedules()
        _expect([job.id for job in scheduled], [4], "the ticks' jobs appended")
        _expect(stored.next_at, 280.0, "the cursor moved every time")

    async def test_a_ticks_job_with_an_id_used_before_refuses_the_batch(
        self, journal: Journal
    ) -> None:
        """Ids are the writer's, as for any Append: one used before is a broken rule, and the
        Fire changes nothing."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_set(next_at=100.0)])  # (schedule changes come alone)
            await journal.write([Append(job_id=5, key="k", data=b"")])
            await _raises(
                JournalError, journal.write([Fire("s", 100.0, 160.0, 100.0, (_tick(3, 100.0),))])
            )
            [stored] = await journal.schedules()
        _expect(stored.next_at, 100.0, "the cursor, after a refused Fire")
