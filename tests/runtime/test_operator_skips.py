"""Two operators skip one job at once: no lock orders them, the core and the journal do.

The core counts the skips under way (`Core.skip`) and the journal discards
the job once (each change to a job is a compare-and-set): the other skip
hears its discard superseded and raises.  The job keeps its skip mark until
the last skip is answered, so a refused skip heard first never lets it start
while the other's discard is on its way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import attrs
import structlog.testing
import trio
import trio.testing

import inturn
from inturn.info import JobInfo
from inturn.journal import Change, Discard, Due
from inturn.testing import FaultyJournal

GUARD = 60.0


@attrs.define(eq=False)
class HeldDiscard(FaultyJournal):
    """Two reads of a job wait for each other (two skips both find it unfinished); the
    first discard is journaled, and its answer held until *let_answer* is set."""

    written: trio.Event = attrs.field(factory=trio.Event)
    let_answer: trio.Event = attrs.field(factory=trio.Event)
    reads: int = 0
    both_read: trio.Event = attrs.field(factory=trio.Event)

    async def job(self, job_id: int) -> JobInfo | None:
        info = await super().job(job_id)
        self.reads += 1
        if self.reads == 2:
            self.both_read.set()
        await self.both_read.wait()
        return info

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        superseded = await super().write(changes, now=now)
        if any(isinstance(change, Discard) for change in changes) and not self.written.is_set():
            self.written.set()
            await self.let_answer.wait()
        return superseded


async def test_two_skips_of_one_job_at_once_discard_it_once_and_it_never_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The second skip's discard is superseded and heard first: it raises, the job stays
    marked (its key's running job ends meanwhile, and the job does not start), and the
    first skip's answer then forgets it."""
    release = trio.Event()
    ran: list[int] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.id)
        await release.wait()

    journal = HeldDiscard(inturn.MemoryJournal())
    outcomes: list[str] = []
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            first = await sup.send("k", 1)
            skipped = await sup.send("k", 2)
            await trio.testing.wait_all_tasks_blocked()
            assert ran == [first]

            async def skip() -> None:
                try:
                    await sup.skip(skipped)
                except inturn.JobStateError as exc:
                    outcomes.append(f"refused: {exc.state}")
                else:
                    outcomes.append("skipped")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(skip)
                nursery.start_soon(skip)
                await journal.written.wait()
                await trio.testing.wait_all_tasks_blocked()
                release.set()  # the key's running job ends: the skipped one must not start
                await trio.testing.wait_all_tasks_blocked()
                assert ran == [first]
                journal.let_answer.set()
            assert sorted(outcomes) == ["refused: dead", "skipped"]
            await sup.wait_idle()
            assert ran == [first]
            info = await sup.job(skipped)
            assert info is not None
            assert (info.state, info.last_error) == ("dead", "skipped by operator")
            stats = sup.stats()
            assert (stats.completed, stats.discarded, stats.queued) == (1, 1, 0)
    # Its start was never written to be superseded: it stayed marked throughout.
    events = [log["event"] for log in logs if log.get("job_id") == skipped]
    assert events.count("job.discarded") == 1
    assert "job.superseded" not in events, events


# -- a skip of a scheduled job, as the scheduler promotes it -------------------------
#
# No lock keeps the two apart: the core knows which scheduled jobs a skip is
# discarding (the scheduler leaves them be), which are being promoted (a skip
# waits for the answer, then skips the job in its key), and which were promoted
# while a skip read (it reads again).


@attrs.define(eq=False)
class Gates(FaultyJournal):
    """Holds, while armed, a write with a change of *kind* (before it is applied), or a
    read of a job (after it is read: the answer is stale by the time it is heard)."""

    kind: type | None = None
    hold_reads: bool = False
    held: trio.Event = attrs.field(factory=trio.Event)
    go: trio.Event = attrs.field(factory=trio.Event)

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        if self.kind is not None and any(isinstance(change, self.kind) for change in changes):
            self.kind = None
            self.held.set()
            await self.go.wait()
        return await super().write(changes, now=now)

    async def job(self, job_id: int) -> JobInfo | None:
        info = await super().job(job_id)
        if self.hold_reads:
            self.hold_reads = False
            self.held.set()
            await self.go.wait()
        return info


async def scheduled_behind_a_running_job(
    journal: Gates, body: Callable[[inturn.Supervisor, int], Awaitable[None]]
) -> None:
    """Run *body* with a job scheduled in 5 s on a key whose first job runs until *body*
    returns; then check the scheduled job was skipped, never ran, and left no count."""
    release = trio.Event()
    ran: list[int] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.id)
        await release.wait()

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            first = await sup.send("k", 1)
            later = await sup.send("k", 2, delay=5)
            await trio.testing.wait_all_tasks_blocked()
            await body(sup, later)
            release.set()
            await sup.wait_idle()
            assert ran == [first]
            info = await sup.job(later)
            assert info is not None
            assert (info.state, info.last_error) == ("dead", "skipped by operator")
            stats = sup.stats()
            assert (stats.completed, stats.discarded, stats.queued, stats.scheduled) == (
                1,
                1,
                0,
                0,
            )


async def test_the_scheduler_leaves_a_due_job_be_while_a_skip_discards_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Gates(inturn.MemoryJournal(), kind=Discard)

    async def body(sup: inturn.Supervisor, later: int) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.skip, later)
            await journal.held.wait()  # the discard is on its way
            await trio.sleep(10)  # due: the scheduler reads it, and waits for the skip
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().scheduled == 1
            journal.go.set()

    await scheduled_behind_a_running_job(journal, body)


async def test_a_skip_of_a_job_being_promoted_waits_and_skips_it_in_its_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Gates(inturn.MemoryJournal(), kind=Due)

    async def body(sup: inturn.Supervisor, later: int) -> None:
        await trio.sleep(10)
        await journal.held.wait()  # its Due is on its way
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.skip, later)
            await trio.testing.wait_all_tasks_blocked()
            journal.go.set()

    await scheduled_behind_a_running_job(journal, body)


async def test_a_skip_that_read_a_job_scheduled_before_it_was_promoted_reads_it_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Gates(inturn.MemoryJournal(), hold_reads=True)

    async def body(sup: inturn.Supervisor, later: int) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.skip, later)
            await journal.held.wait()  # it read the job scheduled
            await trio.sleep(10)  # promoted meanwhile
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().scheduled == 0
            journal.go.set()

    await scheduled_behind_a_running_job(journal, body)
