"""Fairness: an actor with a backlog lets other tasks run between its jobs.

The memory journal never yields, so a handler that never yields either
would hold the run for a whole backlog: the actor yields between two jobs
itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import inturn

JOBS = 50


async def count_steps(steps: list[int]) -> None:
    """Count this task's steps, one per schedule point, forever."""
    while True:
        steps[0] += 1
        await trio.lowlevel.checkpoint()


async def test_a_handler_that_never_yields_still_lets_other_tasks_run_between_jobs() -> None:
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


async def test_two_keys_backlogs_take_turns_one_job_each() -> None:
    """Two keys' backlogs, each handler awaiting one checkpoint: neither key runs ahead of
    the other by more than a job, and each key's jobs run in order."""
    order: list[tuple[str, object]] = []

    async def handler(job: inturn.Job) -> None:
        order.append((job.key or "", job.payload))
        await trio.lowlevel.checkpoint()

    async with inturn.open_supervisor(handler) as sup:
        await sup.send_many([(key, n) for n in range(JOBS) for key in ("a", "b")])
        await sup.wait_idle()

    assert [n for key, n in order if key == "a"] == list(range(JOBS))
    assert [n for key, n in order if key == "b"] == list(range(JOBS))
    ran = {"a": 0, "b": 0}
    for key, _ in order:
        ran[key] += 1
        assert abs(ran["a"] - ran["b"]) <= 1


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
async def test_accepting_a_job_is_a_checkpoint_on_any_journal(
    any_journal: inturn.Journal, call: str
) -> None:
    """As every trio function that may block: a cancellation point and a schedule point,
    whether the journal's write parks (a durable one's does) or not (the memory one's)."""
    steps = [0]
    async with (
        trio.open_nursery() as nursery,
        inturn.open_supervisor(yields, journal=any_journal) as sup,
    ):
        nursery.start_soon(count_steps, steps)
        before = steps[0]
        for n in range(3):
            with trio.testing.assert_checkpoints():
                await accept(sup, call, n)
        # Each scheduler batch runs every runnable task once, in either order: three
        # schedule points let the other task run at least twice.
        assert steps[0] - before >= 2
        await sup.wait_idle()
        nursery.cancel_scope.cancel()
        assert sup.stats().completed == (6 if call == "send_many" else 3)


@pytest.mark.parametrize("call", ["send", "submit", "send_many"])
async def test_accepting_in_a_cancelled_scope_raises_cancelled_and_accepts_nothing(
    any_journal: inturn.Journal, call: str
) -> None:
    """Accepting is a cancellation point before anything is accepted: cancelled, it
    journals nothing."""
    async with inturn.open_supervisor(yields, journal=any_journal) as sup:
        await sup.send("k", 0)
        with trio.CancelScope() as scope:
            scope.cancel()
            await accept(sup, call, 1)
        assert scope.cancelled_caught
        await sup.wait_idle()
        assert sup.stats().completed == 1
        assert await any_journal.job(2) is None  # no id was journaled after the first job's
