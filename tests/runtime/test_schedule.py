"""Scheduled jobs (issue 12, part 2): accepted now, in their key's sequence when due."""

from __future__ import annotations

import contextlib
import datetime
import gc
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Append, Change, Discard, Due, SQLiteReader
from inturn.testing import FaultyJournal
from tests.conftest import MakeJournal


def sup_unix(clock: float) -> float:
    """The Unix time a supervisor opened now gives trio clock reading *clock* (roughly)."""
    return time.time() + (clock - trio.current_time())


class Timeline:
    """A handler that records (payload, virtual time) and takes *busy* seconds per job."""

    def __init__(self, busy: dict[object, float] | None = None) -> None:
        self.ran: list[tuple[object, float]] = []
        self.busy = busy or {}

    async def __call__(self, job: inturn.Job) -> object:
        self.ran.append((job.payload, trio.current_time()))
        await trio.sleep(self.busy.get(job.payload, 0.0))
        return job.payload

    @property
    def order(self) -> list[object]:
        return [payload for payload, _ in self.ran]

    def at(self, payload: object) -> float:
        return next(when for seen, when in self.ran if seen == payload)


async def test_a_scheduled_job_joins_behind_what_its_key_holds_when_due(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Sent first with a delay, it blocks nothing until due, then runs behind the jobs queued then, before those sent later."""
    handler = Timeline(busy={"b": 15.0})
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        start = trio.current_time()
        await sup.send("k", "later", delay=10)
        await sup.send("k", "b")  # runs at once, for 15 s
        await sup.send("k", "c")  # queued behind b when "later" falls due
        await trio.sleep(20)
        await sup.send("k", "d")  # sent after it fell due: behind it
    assert handler.order == ["b", "c", "later", "d"]
    assert handler.at("b") == start
    assert handler.at("later") == start + 15


async def test_a_scheduled_job_runs_at_its_due_time_in_virtual_time(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """delay= and at= (a Unix time or an aware datetime) elapse on trio's clock; the id is returned at once."""
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        start = trio.current_time()
        first = await sup.send("k", "delay", delay=30)
        info = await sup.job(first)
        assert info is not None
        assert (info.state, info.place) == ("scheduled", None)
        assert info.due_at is not None
        await sup.send("j", "at", at=info.due_at + 10)
        when = datetime.datetime.fromtimestamp(info.due_at + 20, tz=datetime.UTC)
        await sup.submit("datetime", at=when)
        assert sup.stats().scheduled == 3
        assert trio.current_time() == start  # nothing waited
    assert [(payload, round(when - start)) for payload, when in handler.ran] == [
        ("delay", 30),
        ("at", 40),
        ("datetime", 50),
    ]


async def test_a_due_time_in_the_past_or_a_zero_delay_is_due_at_once(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        start = trio.current_time()
        await sup.send("k", "zero", delay=0)
        await sup.send("k", "past", at=0.0)
        assert await sup.ask("j", "asked", delay=0) == "asked"
    assert sorted(map(str, handler.order)) == ["asked", "past", "zero"]
    assert all(when == start for _, when in handler.ran)


async def test_a_scheduled_job_holds_its_unique_key(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        held = await sup.send("k", "later", unique="evt-1", delay=60)
        with pytest.raises(inturn.DuplicateError) as raised:
            await sup.send("k", "again", unique="evt-1")
        assert raised.value.job_id == held
    assert handler.order == ["later"]


async def test_skipping_a_scheduled_job_makes_it_a_dead_letter_that_never_runs(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancelling before it is due is an operator's skip: a dead letter, its unique key free, and wait_idle returns."""
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        doomed = await sup.send("k", "doomed", unique="u", delay=60)
        await sup.send("k", "kept", delay=30)
        await sup.skip(doomed)
        assert sup.stats().scheduled == 1
        with pytest.raises(inturn.JobStateError):
            await sup.skip(doomed)
        [dead] = await sup.dead_letters()
        assert (dead.id, dead.state, dead.last_error) == (doomed, "dead", "skipped by operator")
        await sup.send("k", "same unique", unique="u")
        await sup.wait_idle()
        assert sup.stats().discarded == 1
    assert handler.order == ["same unique", "kept"]


async def test_skip_and_promotion_racing_end_the_job_once(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """A skip landing as its job falls due cancels it while scheduled, skips it in its key, or finds it done: one outcome."""
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        job_id = await sup.send("k", "doomed", delay=5)
        await trio.sleep(5)  # due now: the scheduler and the skip race
        with contextlib.suppress(inturn.JobNotFound):  # it ran (and completed) first
            await sup.skip(job_id)
        await sup.wait_idle()
        stats = sup.stats()
        dead = await sup.dead_letters()
    assert stats.scheduled == 0
    assert stats.completed + stats.discarded == 1
    if stats.completed:
        assert (handler.order, dead) == (["doomed"], [])
    else:
        assert [(info.id, info.last_error) for info in dead] == [(job_id, "skipped by operator")]


async def test_wait_idle_waits_for_scheduled_jobs(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        start = trio.current_time()
        await sup.send("k", "later", delay=60)
        await sup.wait_idle()
        assert handler.order == ["later"]
        assert trio.current_time() == start + 60
        assert sup.stats().scheduled == 0


async def test_more_scheduled_jobs_than_one_read_all_run_in_due_order(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The scheduler reads 100 at a time; 250 jobs on one key, sent in reverse due order, run earliest due first."""
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        # One write: while a write waits for its thread, the mock clock runs on.
        await sup.send_many(  # three share each due time: then by id
            [inturn.Item("k", n, delay=1 + n // 3) for n in reversed(range(250))]
        )
    expected = sorted(range(250), key=lambda n: (n // 3, -n))
    assert handler.order == expected


async def test_scheduled_jobs_survive_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Durable: a supervisor cancelled before the due time leaves the job scheduled; the next one runs it when due."""
    path = tmp_path / "jobs.db"
    handler = Timeline()
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            job_id = await sup.send("k", "later", delay=60, unique="u")
            await trio.sleep(10)
            scope.cancel()
    assert handler.order == []
    reader = SQLiteReader(path)
    [info] = reader.scheduled()
    assert (info.id, info.state, info.unique) == (job_id, "scheduled", "u")
    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
        reopened, wall = trio.current_time(), time.time()
        assert sup.stats().scheduled == 1
        with pytest.raises(inturn.DuplicateError):
            await sup.send("k", "again", unique="u")
    assert handler.order == ["later"]
    # Due by the wall clock: the 10 s of virtual time before the restart do not count,
    # only the real time that passed (however long a loaded machine took).
    assert info.due_at is not None
    assert handler.at("later") >= reopened + (info.due_at - wall) - 1e-3


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"delay": 1, "at": 1.0}, ValueError, "not both"),
        ({"delay": -1}, ValueError, "delay must be from 0"),
        ({"delay": math.nan}, ValueError, "finite"),
        ({"delay": math.inf}, ValueError, "finite"),
        ({"delay": 10**12}, ValueError, "delay must be from 0"),
        ({"delay": "5"}, TypeError, "delay must be"),
        ({"delay": True}, TypeError, "delay must be"),
        ({"at": "tomorrow"}, TypeError, "at must be"),
        ({"at": datetime.datetime(2030, 1, 1)}, ValueError, "aware datetime"),
        ({"at": 1e12}, ValueError, "up to"),
    ],
)
async def test_bad_due_times_are_refused_and_journal_nothing(
    options: dict[str, object], error: type[Exception], message: str
) -> None:
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Timeline(), journal=journal) as sup:
        sends: list[Callable[[], Awaitable[object]]] = [
            lambda: sup.send("k", "x", **options),  # type: ignore[arg-type]
            lambda: sup.submit("x", **options),  # type: ignore[arg-type]
            lambda: sup.ask("k", "x", **options),  # type: ignore[arg-type]
        ]
        for send in sends:
            with pytest.raises(error, match=message):
                await send()
        assert journal.unfinished() == []
        assert sup.stats().scheduled == 0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(0, 20), st.none() | st.integers(0, 20)),
        max_size=25,
    )
)
def test_each_key_runs_its_jobs_in_the_order_they_joined_it(
    sends: list[tuple[str, int, int | None]],
) -> None:
    """Property: a job joins its key when sent, or when due; per key, jobs run in the order they joined (due ties by id)."""
    joined: dict[str, list[tuple[float, int, int]]] = {"a": [], "b": []}
    handler = Timeline()

    async def main() -> None:
        async with inturn.open_supervisor(handler) as sup:
            start = trio.current_time()
            for n, (key, at, delay) in enumerate(sorted(sends, key=lambda send: send[1])):
                await trio.sleep_until(start + at)
                # a due time is half a second off every send time: no ties between the two
                job_id = await sup.send(key, n, delay=None if delay is None else delay + 0.5)
                join = at if delay is None else at + delay + 0.5
                joined[key].append((join, job_id, n))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    for key, jobs in joined.items():
        ran = [payload for payload in handler.order if any(n == payload for _, _, n in jobs)]
        assert ran == [n for _, _, n in sorted(jobs)], key


async def test_a_job_that_fell_due_while_no_supervisor_ran_runs_at_once(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Reopened after its due time, its key runs it first: it joins the key at the open."""
    journal = make_journal()
    await journal.open()
    await journal.write(
        [
            Append(job_id=1, key="k", data=b'"overdue"', due_at=time.time() - 5),
            Append(job_id=2, key="k", data=b'"queued"'),
        ]
    )
    await journal.aclose()
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=journal):
        start = trio.current_time()
    assert handler.order == ["queued", "overdue"]  # it joined behind what the key held
    assert handler.at("overdue") == start


async def test_shutdown_leaves_scheduled_jobs_in_the_journal(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A graceful stop does not wait for jobs due later: they stay scheduled for the next open."""
    path = tmp_path / "jobs.db"
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
        start = trio.current_time()
        await sup.send("k", "tomorrow", delay=86400)
        await sup.shutdown(grace=5)
    assert trio.current_time() == start
    assert [info.state for info in SQLiteReader(path).scheduled()] == ["scheduled"]


async def test_a_due_job_on_a_key_whose_backlog_waits_in_the_journal_keeps_its_place(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """With a window of 2 the key's backlog is paged in by place: the due job comes after the 30 queued before it, before those after."""
    handler = Timeline(busy={0: 10.0})
    journal = make_journal()
    async with inturn.open_supervisor(handler, journal=journal, window=2, max_buffered=4) as sup:
        await sup.send("k", "due", delay=5)
        for n in range(30):
            await sup.send("k", n)
        await trio.sleep(6)  # due, while job 0 runs and 29 wait, most in the journal
        for n in range(30, 40):
            await sup.send("k", n)
    assert handler.order == [*range(30), "due", *range(30, 40)]


async def test_a_restart_replays_a_due_job_in_its_place(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Its place is durable: a supervisor stopped after the due job joined finds it behind the jobs queued before it."""
    path = tmp_path / "jobs.db"
    handler = Timeline(busy={0: 100.0})
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            await sup.send("k", "due", delay=5)
            for n in range(3):
                await sup.send("k", n)
            await trio.sleep(10)
            assert [info.id for info in await sup.jobs("k")] == [2, 3, 4, 1]
            scope.cancel()
    handler.busy.clear()
    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)):
        pass
    assert handler.order == [0, 0, 1, 2, "due"]


async def test_send_many_schedules_items_with_a_due_time_in_the_same_write(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Item(delay=, at=) items are journaled with the rest, all or none; ids rise in the order given."""
    handler = Timeline()
    journal = make_journal()
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        start = trio.current_time()
        ids = await sup.send_many(
            [
                inturn.Item("k", "later", delay=10, unique="u"),
                ("k", "now"),
                inturn.Item("j", "at", at=sup_unix(start) + 5),
                ("k", "also now"),
            ]
        )
        assert ids == sorted(ids)
        assert sup.stats().scheduled == 2
        with pytest.raises(inturn.DuplicateError):  # all or none: the batch with it is refused
            await sup.send_many([("x", "never"), inturn.Item("x", "dup", unique="u", delay=1)])
        with pytest.raises(ValueError, match="not both"):
            await sup.send_many([inturn.Item("x", "bad", delay=1, at=1.0)])
        assert [info.id for info in await sup.scheduled()] == [ids[2], ids[0]]
    assert handler.order == ["now", "also now", "at", "later"]
    # at= came from the real wall clock, a few microseconds off the supervisor's
    assert (round(handler.at("at") - start, 2), handler.at("later") - start) == (5, 10)


async def test_a_job_due_on_a_halted_key_waits_parked_until_resume(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """It joins the key when due, like any job sent then, and runs once the key is resumed."""
    handler = Timeline()
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        await sup.send("k", "first")
        await sup.wait_idle()
        await sup.send("k", "parked", delay=10)
        await sup.send("k", "blocker", delay=5)
        await sup.pause("k")
        await sup.wait_idle()  # both fell due and are parked: idle
        assert [info.id for info in await sup.jobs("k")] == [3, 2]
        assert sup.stats().scheduled == 0
        await sup.resume("k")
    assert handler.order == ["first", "blocker", "parked"]


async def test_scheduled_jobs_under_max_concurrency_take_their_turn(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Due jobs of many keys wait for a slot like any other; at most 2 handlers run at once."""
    running = 0
    most = 0

    async def handler(job: inturn.Job) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await trio.sleep(1)
        running -= 1

    async with inturn.open_supervisor(handler, journal=make_journal(), max_concurrency=2) as sup:
        start = trio.current_time()
        for n in range(6):
            await sup.send(f"key-{n}", n, delay=3)
        await sup.wait_idle()
        assert trio.current_time() == start + 3 + 3  # due at 3, then 3 rounds of 2
    assert most == 2


class OtherWriterFirst(FaultyJournal):
    """Another process's writer discards a scheduled job just before this supervisor's write."""

    def __init__(self, inner: inturn.Journal, before: type) -> None:
        super().__init__(inner)
        self.before = before
        self.raced: list[int] = []

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        for change in changes:
            if (
                isinstance(change, Due | Discard)
                and isinstance(change, self.before)
                and not self.raced
            ):
                self.raced.append(change.job_id)
                await self.inner.write([Discard(change.job_id, "skipped elsewhere")])
        return await self.inner.write(changes, now=now)


@pytest.mark.parametrize("before", [Due, Discard])
async def test_a_scheduled_job_another_writer_finished_first_is_let_go(
    before: type, autojump_clock: trio.testing.MockClock
) -> None:
    """Its promotion (Due) or its skip (Discard) is superseded: the job never runs, and idle is reached."""
    handler = Timeline()
    journal = OtherWriterFirst(inturn.MemoryJournal(), before)
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        job_id = await sup.send("k", "doomed", delay=5)
        if before is Discard:
            with pytest.raises(inturn.JobStateError, match="dead letter already"):
                await sup.skip(job_id)
        await sup.wait_idle()
        assert sup.stats().scheduled == 0
        [dead] = await sup.dead_letters()
    assert journal.raced == [job_id]
    assert (dead.id, dead.last_error) == (job_id, "skipped elsewhere")
    assert handler.order == []


async def test_the_scheduler_keeps_no_job_it_read_while_it_waits_for_the_earliest() -> None:
    """Waiting, perhaps for days, for the first scheduled job to fall due, it holds that due
    time alone: not the jobs it read, whose payloads may be large."""

    def kept() -> int:  # this test's jobs only: another test's may live on
        gc.collect()
        return sum(
            isinstance(thing, inturn.JobInfo) and (thing.key or "").startswith("later-")
            for thing in gc.get_objects()
        )

    handler = Timeline()
    async with inturn.open_supervisor(handler) as sup:
        for n in range(3):
            await sup.send(f"later-{n}", "x" * 100_000, delay=86_400)
        await trio.testing.wait_all_tasks_blocked()  # the scheduler read them, and waits
        assert sup.stats().scheduled == 3
        assert kept() == 0
        await sup.shutdown(grace=0)
