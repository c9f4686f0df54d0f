"""Recurring schedules (issue 49): cron and intervals in the journal, fired once per tick, on the mock clock."""

from __future__ import annotations

import datetime
import types
import zoneinfo

import pytest
import trio
import trio.testing

import inturn
import inturn.supervisor
from tests.conftest import MakeJournal

PARIS = zoneinfo.ZoneInfo("Europe/Paris")


@pytest.fixture
def make(make_journal: MakeJournal) -> MakeJournal:
    """The journal of each kind, its operators' inbox looked at hourly: a durable journal's
    poll each quarter second would cost a million turns over days of virtual time."""

    def made() -> inturn.Journal:
        journal = make_journal()
        if hasattr(journal, "poll_interval"):
            journal.poll_interval = 3600.0
        return journal

    return made


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The supervisor's Unix time starts from ``wall[0]`` at trio time 0 and runs virtual, so
    a test starts on the date it needs (a daylight-saving night, say)."""
    start = [datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC).timestamp()]
    monkeypatch.setattr(
        inturn.supervisor,
        "time",
        types.SimpleNamespace(time=lambda: start[0] + trio.current_time()),
    )
    return start


class Ticks:
    """A handler that records (payload, the supervisor's Unix time) of each job it runs."""

    def __init__(self, wall: list[float], busy: float = 0.0) -> None:
        self.wall = wall
        self.busy = busy
        self.ran: list[tuple[object, float]] = []

    async def __call__(self, job: inturn.Job) -> None:
        self.ran.append((job.payload, self.wall[0] + trio.current_time()))
        await trio.sleep(self.busy)

    def times(self, payload: object = "tick") -> list[float]:
        return [when for seen, when in self.ran if seen == payload]


def local(when: float, zone: datetime.tzinfo = PARIS) -> str:
    return datetime.datetime.fromtimestamp(when, zone).isoformat()


async def test_an_interval_ticks_in_virtual_time_over_days(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """every=3600 for three days: 72 jobs, each at its tick, on the mock clock."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        info = await sup.schedule("hourly", "k", "tick", every=3600)
        assert info.next_at == wall[0] + 3600  # one interval from now
        await trio.sleep(3 * 86400 + 1)
        await sup.unschedule("hourly")
    assert handler.times() == [wall[0] + 3600 * n for n in range(1, 73)]


async def test_a_cron_schedule_ticks_at_its_times_over_days(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """ "0 9 * * 1-5" in New York for two weeks: ten jobs, at 09:00 local on weekdays."""
    york = zoneinfo.ZoneInfo("America/New_York")
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("weekdays", None, "tick", cron="0 9 * * 1-5", tz="America/New_York")
        await trio.sleep(14 * 86400)
        await sup.unschedule("weekdays")
    seen = [datetime.datetime.fromtimestamp(when, york) for when in handler.times()]
    assert len(seen) == 10
    assert {(when.hour, when.minute, when.second) for when in seen} == {(9, 0, 0)}
    assert all(when.weekday() < 5 for when in seen)
    assert len({when.date() for when in seen}) == 10  # once a day


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        # spring forward: 02:00 -> 03:00 on 29 March; the skipped 02:30 fires once, at 03:00
        (
            datetime.datetime(2026, 3, 28, 12, tzinfo=PARIS),
            [
                "2026-03-29T03:00:00+02:00",
                "2026-03-30T02:30:00+02:00",
            ],
        ),
        # fall back: 03:00 -> 02:00 on 25 October; the twice-seen 02:30 fires once, the first
        (
            datetime.datetime(2026, 10, 24, 12, tzinfo=PARIS),
            [
                "2026-10-25T02:30:00+02:00",
                "2026-10-26T02:30:00+01:00",
            ],
        ),
    ],
)
async def test_a_daylight_saving_night_fires_a_local_time_once(
    make: MakeJournal,
    wall: list[float],
    autojump_clock: trio.testing.MockClock,
    first: datetime.datetime,
    expected: list[str],
) -> None:
    """A 02:30 Europe/Paris job runs once on the spring-forward night and once on the fall-back one."""
    wall[0] = first.timestamp()
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("night", "k", "tick", cron="30 2 * * *", tz="Europe/Paris")
        await trio.sleep(2 * 86400)
        await sup.unschedule("night")
    assert [local(when) for when in handler.times()] == expected


@pytest.mark.parametrize(("misfire", "caught_up"), [("skip", 0), ("one", 1), ("all", 3)])
async def test_ticks_missed_while_nothing_ran_follow_the_misfire_policy(
    make: MakeJournal,
    wall: list[float],
    autojump_clock: trio.testing.MockClock,
    misfire: str,
    caught_up: int,
) -> None:
    """every=300 s, the service down from 10 s to 1,000 s: the ticks at 300, 600 and 900 were
    missed; "skip" sends none, "one" one, "all" three; then ticks come as before."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("s", "k", "tick", every=300, misfire=misfire)
        await trio.sleep(10)
    assert handler.ran == []
    await trio.sleep(990)  # down
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await trio.lowlevel.checkpoint()
        await trio.sleep(1)
        assert len(handler.times()) == caught_up
        assert all(when == wall[0] + 1000 for when in handler.times())
        await trio.sleep(250)  # the tick at 1,200 s
        await sup.unschedule("s")
    assert handler.times()[caught_up:] == [wall[0] + 1200]
    if misfire == "all":
        assert len(handler.times()) == 4


async def test_a_tick_queues_behind_the_jobs_its_key_holds(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """A tick's job joins its key behind what is queued then, and before what is sent later."""
    handler = Ticks(wall, busy=50.0)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("s", "k", "tick", every=60)
        await sup.send("k", "first")  # runs 0..50
        await sup.send("k", "second")  # runs 50..100; the tick comes at 60
        await trio.sleep(70)
        await sup.send("k", "third")
        await trio.sleep(300)
        await sup.pause_schedule("s")
    order = [payload for payload, _ in handler.ran]
    assert order[:4] == ["first", "second", "tick", "third"]


async def test_replacing_a_schedule_changes_what_comes_next_and_fires_no_tick_twice(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """Replaced after two ticks (with start in the past), it sends its new payload at its new
    times, and none of the ticks fired before again."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("s", "k", "old", every=100)
        await trio.sleep(250)
        info = await sup.schedule("s", "k", "new", every=100, start=wall[0], misfire="all")
        assert info.last_tick == wall[0] + 200
        assert info.next_at == wall[0] + 300  # not 0, 100 or 200 again
        await trio.sleep(100)
        [listed] = await sup.schedules()
        assert (listed.name, listed.every, listed.last_tick) == ("s", 100.0, wall[0] + 300)
        await sup.unschedule("s")
    assert handler.ran == [
        ("old", wall[0] + 100),
        ("old", wall[0] + 200),
        ("new", wall[0] + 300),
    ]


async def test_a_paused_schedule_fires_nothing_and_resumes_after_now(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """Paused, its ticks pass by (not missed: gone); resumed, it fires from its next tick."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("s", None, "tick", every=100, misfire="all")
        await trio.sleep(150)
        await sup.pause_schedule("s")
        await sup.pause_schedule("s")  # again: nothing changes
        [paused] = await sup.schedules()
        assert paused.next_at is None
        await trio.sleep(500)
        await sup.resume_schedule("s")
        await sup.resume_schedule("s")  # again: nothing changes
        await trio.sleep(60)
        await sup.unschedule("s")
    assert handler.times() == [wall[0] + 100, wall[0] + 700]


async def test_a_tick_whose_last_job_holds_the_unique_key_sends_nothing(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """With unique_for, a tick's job holds ``schedule:<name>``: ticks while the last one runs
    (150 s, ticks every 60 s) or within its window send nothing."""
    handler = Ticks(wall, busy=150.0)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("s", "k", "tick", every=60, unique_for=1)
        await trio.sleep(400)
        await sup.unschedule("s")
    # 60 runs to 210; 120 and 180 find it running; 240 runs to 390; 300, 360 find it running
    assert handler.times() == [wall[0] + 60, wall[0] + 240]


@pytest.mark.parametrize(
    "options",
    [
        {"cron": "61 * * * *"},
        {"cron": "not cron"},
        {"cron": "* * * * *", "tz": "Mars/Olympus_Mons"},
        {"every": 0},
        {"every": -5},
        {"every": float("nan")},
        {"cron": "* * * * *", "every": 60},
        {},
        {"every": 60, "misfire": "some"},
        {"every": 60, "unique_for": 0},
        {"every": 60, "unique_for": 10, "misfire": "all"},
        {"every": 60, "start": datetime.datetime(2026, 1, 1)},  # naive
    ],
)
async def test_a_bad_schedule_is_refused_at_the_call_and_nothing_is_stored(
    journal: inturn.Journal, options: dict[str, object]
) -> None:
    async def handler(job: inturn.Job) -> None:
        raise AssertionError("nothing runs")

    async with inturn.open_supervisor(handler, journal=journal) as sup:
        with pytest.raises(inturn.InvalidSchedule):
            await sup.schedule("s", "k", "tick", **options)  # type: ignore[arg-type]
        assert await sup.schedules() == []


@pytest.mark.parametrize("name", ["", "x" * 201, "a\nb", 7, None])
async def test_a_bad_name_is_refused(journal: inturn.Journal, name: object) -> None:
    async def handler(job: inturn.Job) -> None:
        raise AssertionError("nothing runs")

    async with inturn.open_supervisor(handler, journal=journal) as sup:
        with pytest.raises(inturn.InvalidSchedule):
            await sup.schedule(name, "k", "tick", every=60)  # type: ignore[arg-type]
        assert await sup.schedules() == []
        with pytest.raises(inturn.ScheduleNotFound):
            await sup.unschedule("nothing")
        with pytest.raises(inturn.ScheduleNotFound):
            await sup.pause_schedule("nothing")
        with pytest.raises(inturn.ScheduleNotFound):
            await sup.resume_schedule("nothing")


async def test_a_schedule_outlives_its_supervisor(
    make: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """Schedules live in the journal: the next supervisor fires them, and a job fired once is
    not fired again."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await sup.schedule("s", "k", "tick", every=100)
        await trio.sleep(150)
    async with inturn.open_supervisor(handler, journal=make()) as sup:
        await trio.sleep(100)
        await sup.unschedule("s")
    assert handler.times() == [wall[0] + 100, wall[0] + 200]


async def test_an_operator_changes_schedules_through_the_supervisor_that_holds_them(
    make_journal: MakeJournal, wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """inturn.operate on a held journal: its pause, resume and unschedule are carried out by
    the supervisor (a command through the journal), as its reads see them."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        await sup.schedule("s", "k", "tick", every=100)
        async with inturn.operate(make_journal()) as operator:
            assert operator.live
            await operator.pause_schedule("s")
            [paused] = await operator.schedules()
            assert paused.next_at is None
            await trio.sleep(250)
            await operator.resume_schedule("s")
            await trio.sleep(100)
            await operator.unschedule("s")
            assert await operator.schedules() == []
            with pytest.raises(inturn.ScheduleNotFound):
                await operator.unschedule("s")
            trail = await operator.audit()
    assert handler.times() == [wall[0] + 300]
    assert [(entry.verb, entry.key, entry.outcome) for entry in reversed(trail)] == [
        ("pause_schedule", "s", "done"),
        ("resume_schedule", "s", "done"),
        ("unschedule", "s", "done"),
        ("unschedule", "s", "not found"),
    ]


def tasks_below(task: trio.lowlevel.Task) -> int:
    return sum(
        1 + tasks_below(child) for nursery in task.child_nurseries for child in nursery.child_tasks
    )


async def test_a_thousand_schedules_cost_no_task_each(
    wall: list[float], autojump_clock: trio.testing.MockClock
) -> None:
    """1,000 schedules every minute: the supervisor runs as many tasks as with none (one task
    fires them all), and each tick of each schedule gets its job."""
    handler = Ticks(wall)
    async with inturn.open_supervisor(handler, idle_timeout=1.0) as sup:
        root = trio.lowlevel.current_root_task()
        assert root is not None
        before = tasks_below(root)
        assert before >= 3  # the supervisor's own (the schedules', the scheduled jobs', ...)
        for n in range(1000):
            await sup.schedule(f"s{n}", f"k{n}", "tick", every=60)
        assert tasks_below(root) == before
        await trio.sleep(150)  # two ticks; every key's actor lingers a second, then ends
        assert tasks_below(root) == before
        for n in range(1000):
            await sup.unschedule(f"s{n}")
    assert len(handler.times()) == 2000
