"""Fairness: an actor with a backlog lets other tasks run between its jobs.

The memory journal never yields, so a handler that never yields either
would hold the run for a whole backlog: the actor yields after such a job
itself.  A job that yielded (trio counted a schedule point of the actor's
task while it ran) needs no second schedule point.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
import inturn.actors

JOBS = 50


async def count_steps(steps: list[int]) -> None:
    """Count this task's steps, one per schedule point, forever."""
    while True:
        steps[0] += 1
        await trio.lowlevel.checkpoint()


@pytest.fixture(params=["counted", "not counted"])
def schedule_points(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """As with this trio; and as with one that does not count a task's schedule points."""
    if request.param == "not counted":
        monkeypatch.setattr(inturn.actors, "counts_schedule_points", lambda task: False)
    return str(request.param)


async def test_a_handler_that_never_yields_still_lets_other_tasks_run_between_jobs(
    schedule_points: str,
) -> None:
    steps = [0]
    seen: list[int] = []

    async def handler(job: inturn.Job) -> None:
        seen.append(steps[0])  # no checkpoint

    async with trio.open_nursery() as nursery:
        nursery.start_soon(count_steps, steps)
        async with inturn.open_supervisor(handler) as sup:
            await sup.send_many([("k", n) for n in range(JOBS)])
            await sup.wait_idle()
        nursery.cancel_scope.cancel()

    # Each scheduler batch runs every runnable task once, in either order:
    # a task that ran between two jobs may look as if it ran before both.
    assert len(seen) == JOBS
    assert all(seen[n + 2] > seen[n] for n in range(JOBS - 2))


async def test_a_job_that_yielded_is_not_followed_by_a_second_schedule_point() -> None:
    """Two keys' backlogs, each handler awaiting one checkpoint: about one scheduler
    batch per job of each key (a second yield per job would make it two)."""
    steps = [0]
    order: list[tuple[str, object]] = []

    async def handler(job: inturn.Job) -> None:
        order.append((job.key or "", job.payload))
        await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        async with inturn.open_supervisor(handler) as sup:
            await sup.send_many([(key, n) for n in range(JOBS) for key in ("a", "b")])
            nursery.start_soon(count_steps, steps)
            await sup.wait_idle()
        nursery.cancel_scope.cancel()

    assert [n for key, n in order if key == "a"] == list(range(JOBS))
    assert [n for key, n in order if key == "b"] == list(range(JOBS))
    assert steps[0] < 1.5 * JOBS


async def test_without_trio_s_count_every_job_is_followed_by_a_schedule_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(inturn.actors, "counts_schedule_points", lambda task: False)
    steps = [0]

    async def handler(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        async with inturn.open_supervisor(handler) as sup:
            await sup.send_many([("a", n) for n in range(JOBS)])
            nursery.start_soon(count_steps, steps)
            await sup.wait_idle()
        nursery.cancel_scope.cancel()

    assert steps[0] >= 2 * JOBS - 2


class OwnMemoryJournal(inturn.MemoryJournal):
    """A journal of the application's own whose writes never yield either."""


@pytest.fixture(params=["memory", "own", "sqlite"])
def any_journal(request: pytest.FixtureRequest, tmp_path: Path) -> inturn.Journal:
    """The memory journal, one of the application's own, and SQLite."""
    if request.param == "memory":
        return inturn.MemoryJournal()
    if request.param == "own":
        return OwnMemoryJournal()
    return inturn.SQLiteJournal(tmp_path / "j.db")


async def yields(job: inturn.Job) -> None:
    await trio.lowlevel.checkpoint()


async def accept(sup: inturn.Supervisor, call: str, n: int) -> None:
    """Accept payload *n* for key ``"k"`` by *call*: one job, or two in one `send_many`."""
    if call == "send":
        await sup.send("k", n)
    elif call == "submit":
        await sup.submit(n)
    else:
        await sup.send_many([("k", n), ("k", n)])


@pytest.mark.parametrize("call", ["send", "submit", "send_many"])
async def test_accepting_a_job_is_one_schedule_point_on_any_journal(
    any_journal: inturn.Journal, call: str, schedule_points: str
) -> None:
    """The memory journal never yields, so accepting yields after its write; a
    durable journal's write parks until committed, which is the schedule point
    already: a second one would cost every durable send a task step.  A journal
    the runtime does not know is asked by trio's count."""
    async with inturn.open_supervisor(yields, journal=any_journal) as sup:
        task = trio.lowlevel.current_task()
        for n in range(3):
            before = task._schedule_points
            with trio.testing.assert_checkpoints():
                await accept(sup, call, n)
            if schedule_points == "counted":
                assert task._schedule_points - before == 1
        await sup.wait_idle()
        assert sup.stats().completed == (6 if call == "send_many" else 3)


@pytest.mark.parametrize("call", ["send", "submit", "send_many"])
async def test_accepting_in_a_cancelled_scope_raises_cancelled_and_accepts_nothing(
    any_journal: inturn.Journal, call: str, schedule_points: str
) -> None:
    """Accepting is a cancellation point before anything is accepted: cancelled, it
    journals nothing, whether the runtime checks for the cancel itself or trio does."""
    async with inturn.open_supervisor(yields, journal=any_journal) as sup:
        await sup.send("k", 0)
        with trio.CancelScope() as scope:
            scope.cancel()
            await accept(sup, call, 1)
        assert scope.cancelled_caught
        await sup.wait_idle()
        assert sup.stats().completed == 1
        assert await any_journal.job(2) is None  # no id was journaled after the first job's
