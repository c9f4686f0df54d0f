"""A member lets a key go only when its lane holds nothing it must see through.

Regressions for two ways the owner of a key crashed when the journal kept
the key (jobs waited) while its lane still held jobs:

- its running head was skipped, and the actor let the key go before the
  skip's dead letter was journaled (defect 2 of issue 45);
- it was paused, and resumed from another process before the owner's
  release (defect 6): the owner's memory said halted, the journal not.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

import inturn
from inturn.core import Core
from inturn.journal import Backlog, Change, Discard, Resume

from .test_members import member


def test_a_lane_holding_an_unstartable_job_is_not_let_go() -> None:
    core = Core(inturn.Retry(), fleet=True)
    core.owned("k", Backlog(count=0, last_id=0))
    assert core.may_let_go("k")  # holds nothing
    entry = core.reserve("k", b"1")
    core.commit(entry)
    assert not core.may_let_go("k")  # a job it must see through
    core.halt("k")
    assert core.may_let_go("k")  # halted: its jobs wait in the journal for the next owner


def test_a_halted_lane_the_journal_kept_lifts_its_halt_and_reads_its_jobs_again() -> None:
    core = Core(inturn.Retry(), fleet=True)
    for _ in range(2):
        core.commit(core.reserve("k", b"1"))
    core.halt("k")
    assert core.start("k") is None
    core.owned("k", Backlog(count=2, last_id=2))  # the journal: not halted, two jobs wait
    assert not core.is_halted("k")
    page = core.page("k")
    assert page is not None
    assert (page.key, page.after) == ("k", 0)  # read from the start of its sequence
    stats = core.stats(actors=0, running=0)
    assert (stats.queued, stats.halted_keys) == (2, frozenset())
    assert not core.idle


async def test_an_owner_skipping_its_running_head_sees_the_skip_through_before_letting_go(
    pg_dsn: str, pg_schema: str
) -> None:
    """Regression: the release committed before the skip's Discard; the journal kept the key
    for the skipped job, and the actor crashed on `assert not state.fifo` (a restart spent)."""
    ran: list[object] = []
    crashes: list[str | None] = []

    def crashed(event: inturn.Event) -> None:
        if event.name == "actor.crashed":
            crashes.append(event.error)

    started = trio.Event()
    releasing = trio.Event()
    discard_may_go = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "long":
            started.set()
            await trio.sleep_forever()
        ran.append(job.payload)

    journal = member(pg_dsn, pg_schema)
    real_write, real_release = journal.write, journal.release

    async def write(changes: Sequence[Change], *, now: float | None = None) -> list[Change]:
        if any(isinstance(change, Discard) for change in changes):
            await discard_may_go.wait()  # the skip's dead letter waits for the release
        return await real_write(changes, now=now)

    async def release(key: str) -> Backlog | None:
        releasing.set()
        return await real_release(key)

    journal.write = write  # type: ignore[method-assign]
    journal.release = release  # type: ignore[method-assign]
    with trio.fail_after(30):
        async with inturn.open_supervisor(
            handler,
            journal=journal,
            on_event=crashed,
        ) as sup:
            long = await sup.send("k", "long")
            await started.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.skip, long)
                with trio.move_on_after(1):  # the fixed actor waits for the skip instead
                    await releasing.wait()
                discard_may_go.set()
            await sup.send("k", "after")
            await sup.wait_idle()
            info = await sup.job(long)
            assert info is not None
            assert info.state == "dead"
    assert (ran, crashes) == (["after"], [])


async def test_an_owner_paused_then_resumed_elsewhere_before_its_release_runs_the_key_on(
    pg_dsn: str, pg_schema: str
) -> None:
    """Regression: the owner halted the key for a pause; a resume from another process
    committed before the owner's release, which the journal refused: the owner crashed (or,
    under ``python -O``, looped releasing) and the key's jobs never ran."""
    ran: list[object] = []
    first_runs = trio.Event()
    go_on = trio.Event()
    releasing = trio.Event()
    resumed = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == 0:
            first_runs.set()
            await go_on.wait()
        ran.append(job.payload)

    journal = member(pg_dsn, pg_schema)
    real_release = journal.release

    async def release(key: str) -> Backlog | None:
        releasing.set()
        await resumed.wait()  # the other process's resume commits first
        return await real_release(key)

    journal.release = release  # type: ignore[method-assign]
    operator = member(pg_dsn, pg_schema)
    with trio.fail_after(30):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            for n in range(3):
                await sup.send("k", n)
            await first_runs.wait()
            async with trio.open_nursery() as nursery:
                # The owner halts it: job 0 finishes, nothing else starts.
                nursery.start_soon(sup.pause, "k")
                go_on.set()
            await releasing.wait()
            await operator.open()
            try:
                await operator.fix([Resume("k")])
            finally:
                await operator.aclose()
            resumed.set()
            await sup.wait_idle()
    assert ran == [0, 1, 2]


async def test_an_owner_lets_a_paused_key_go_only_once_a_skip_of_its_job_is_answered(
    pg_dsn: str, pg_schema: str
) -> None:
    """A pauses k, which it owns, and an operator on A skips "x", queued on k; while the
    skip's discard is on its way, A's actor finishes "hold" and rests on the halted key.
    It keeps the key until the skip is answered: let go, the discard would be A's change
    to a key it no longer owns, refused (`LeaseLost`), and "x" would wait for the next
    owner.  The skip returns, "x" is a dead letter, and then A lets k go."""
    started, finish = trio.Event(), trio.Event()
    discarding, discard_may_go, released = trio.Event(), trio.Event(), trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "hold":
            started.set()
            await finish.wait()

    journal = member(pg_dsn, pg_schema)
    real_write, real_release = journal.write, journal.release

    async def write(changes: Sequence[Change], *, now: float | None = None) -> list[Change]:
        if any(isinstance(change, Discard) for change in changes):
            discarding.set()
            await discard_may_go.wait()  # the skip's discard waits for the release
        return await real_write(changes, now=now)

    async def release(key: str) -> Backlog | None:
        backlog = await real_release(key)
        released.set()
        return backlog

    journal.write = write  # type: ignore[method-assign]
    journal.release = release  # type: ignore[method-assign]
    skipped: list[object] = []
    with trio.fail_after(30):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            await sup.send("k", "hold")
            x = await sup.send("k", "x")
            await started.wait()
            await sup.pause("k")

            async def skip() -> None:
                try:
                    await sup.skip(x)
                except inturn.InturnError as exc:
                    skipped.append(exc)
                else:
                    skipped.append("skipped")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(skip)
                await discarding.wait()
                finish.set()
                while sup.stats().completed < 1:  # noqa: ASYNC110 ("hold"'s write is in a thread)
                    await trio.sleep(0.01)
                await trio.testing.wait_all_tasks_blocked()  # the actor rests on k
                assert not released.is_set()  # k stays A's while the discard is on its way
                discard_may_go.set()
            await released.wait()  # answered: now A lets the halted key go
            info = await sup.job(x)
    assert skipped == ["skipped"]
    assert info is not None
    assert info.state == "dead"


async def test_a_job_skipped_on_its_owner_while_the_key_goes_back_and_forth_never_runs(
    pg_dsn: str, pg_schema: str
) -> None:
    """A pauses k, which it owns; its actor, with nothing to start, lets k go.  While that
    release is on its way, an operator on A skips "x" (still A's key), and another process
    resumes k, so the journal keeps k for A, which pages "x" in.  "x" never runs, and the
    skip returns.  Today A forgets the skip when the journal keeps the key: "x" runs, and
    the skip raises a bare AssertionError."""
    started, finish, releasing, release_may_go = (trio.Event() for _ in range(4))
    discarding, discard_may_go, x_runs = trio.Event(), trio.Event(), trio.Event()
    ran: list[object] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.payload)
        if job.payload == "hold":
            started.set()
            await finish.wait()
        elif job.payload == "x":
            x_runs.set()

    journal = member(pg_dsn, pg_schema)
    real_write, real_release = journal.write, journal.release

    async def write(changes: Sequence[Change], *, now: float | None = None) -> list[Change]:
        if any(isinstance(change, Discard) for change in changes):
            discarding.set()
            await discard_may_go.wait()  # the skip's discard waits for the key to come back
        return await real_write(changes, now=now)

    async def release(key: str) -> Backlog | None:
        releasing.set()
        await release_may_go.wait()  # the skip lands, and the resume commits, first
        return await real_release(key)

    journal.write = write  # type: ignore[method-assign]
    journal.release = release  # type: ignore[method-assign]
    skipped: list[object] = []
    with trio.fail_after(30):
        async with inturn.open_supervisor(handler, journal=journal, window=1) as sup:
            await sup.send("k", "hold")
            x = await sup.send("k", "x")
            await started.wait()
            await sup.pause("k")
            finish.set()
            await releasing.wait()  # halted: the actor lets k go

            async def skip() -> None:
                try:
                    await sup.skip(x)
                except (inturn.InturnError, AssertionError) as exc:
                    skipped.append(exc)
                else:
                    skipped.append("skipped")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(skip)
                await discarding.wait()
                async with inturn.operate(member(pg_dsn, pg_schema)) as operator:
                    await operator.resume("k")
                release_may_go.set()
                with trio.move_on_after(2):  # long enough for "x" to run, if it does
                    await x_runs.wait()
                discard_may_go.set()
            await sup.wait_idle()
    assert (ran, skipped) == (["hold"], ["skipped"])
