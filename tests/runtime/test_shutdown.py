"""Graceful shutdown (issue 12, part 7): accept nothing, start nothing, let running handlers finish, give back what is cut short."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import Append
from tests.conftest import MakeJournal
from tests.gating import GatingJournal, any_of


async def test_running_handlers_finish_within_the_grace_and_nothing_else_starts(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """shutdown waits for the running handler (released within the grace), which completes; the jobs queued behind it and on other keys never start and keep their attempts."""
    started: list[int] = []
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        started.append(int(str(job.payload)))
        await release.wait()

    journal = make_journal()
    stopped = trio.Event()
    async with inturn.open_supervisor(handler, journal=journal, max_concurrency=1) as sup:
        first = await sup.send("a", 1)
        await sup.send("a", 2)
        await sup.send("b", 3)
        while not started:  # noqa: ASYNC110 (virtual time)
            await trio.sleep(0.1)

        async def stop() -> None:
            await sup.shutdown(grace=10)
            stopped.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop)
            await trio.sleep(1)
            assert not stopped.is_set()  # the handler still runs, within its grace
            with pytest.raises(inturn.SupervisorClosed):
                await sup.send("a", 4)  # and nothing new is accepted
            release.set()
        assert stopped.is_set()
    assert started == [1]
    recovery = await journal.open()
    await journal.aclose()
    left = {job.id: job.attempts for job in recovery.jobs}
    assert first not in left  # it completed
    assert list(left.values()) == [0] * len(left)  # nothing else used an attempt
    assert len(left) + sum(b.count for b in recovery.backlog.values()) == 2


async def test_a_handler_past_the_grace_is_cancelled_and_its_attempt_given_back(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """After the grace, the running handler is cancelled; the journal shows no attempt used, and the next supervisor runs it as attempt 1."""
    attempts: list[int] = []
    cancelled = trio.Event()

    async def slow(job: inturn.Job) -> None:
        attempts.append(job.attempt)
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            cancelled.set()
            raise

    journal = make_journal()
    async with inturn.open_supervisor(slow, journal=journal) as sup:
        job_id = await sup.send("k", 1)
        while not attempts:  # noqa: ASYNC110 (virtual time)
            await trio.sleep(0.1)
        before = trio.current_time()
        await sup.shutdown(grace=2)
        assert trio.current_time() - before == pytest.approx(2, abs=0.2)
        assert cancelled.is_set()
    recovery = await journal.open()
    await journal.aclose()
    assert [(job.id, job.attempts) for job in recovery.jobs] == [(job_id, 0)]  # given back

    async def quick(job: inturn.Job) -> None:
        attempts.append(job.attempt)

    async with inturn.open_supervisor(quick, journal=journal) as sup:
        await sup.wait_idle()
    assert attempts == [1, 1]


async def test_shutdown_with_nothing_running_returns_at_once_and_asks_are_told(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No handler runs: shutdown returns without waiting; an ask waiting for a queued job raises SupervisorClosed."""
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await gate.wait()

    async with inturn.open_supervisor(handler) as sup:
        async with trio.open_nursery() as nursery:
            await sup.send("k", "blocker")
            outcome: list[BaseException] = []

            async def ask() -> None:
                try:
                    await sup.ask("k", "behind")
                except inturn.SupervisorClosed as exc:
                    outcome.append(exc)

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()  # the blocker completes; "behind" would start, but:
            await sup.shutdown(grace=0)
        assert len(outcome) == 1


@pytest.mark.parametrize("grace", [-1, float("nan"), "5"])
async def test_a_bad_grace_is_refused_and_changes_nothing(grace: object) -> None:
    """grace must be a finite number >= 0; a bad one raises before anything stops."""

    async def handler(job: inturn.Job) -> None:
        pass

    async with inturn.open_supervisor(handler) as sup:
        with pytest.raises((TypeError, ValueError)):
            await sup.shutdown(grace=grace)  # type: ignore[arg-type]
        await sup.send("k", 1)  # still open
        await sup.wait_idle()


async def test_a_recovered_job_is_not_started_once_stopping(make_journal: MakeJournal) -> None:
    """Shutdown first thing in the body: a job found in the journal never starts, and keeps its attempts."""
    journal = make_journal()
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    await journal.aclose()
    ran: list[int] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.id)

    async with inturn.open_supervisor(handler, journal=journal) as sup:
        await sup.shutdown()
    assert ran == []
    recovery = await journal.open()
    await journal.aclose()
    assert [(job.id, job.attempts) for job in recovery.jobs] == [(1, 0)]


async def test_a_send_journaled_as_the_supervisor_stops_gives_its_start_back() -> None:
    """Regression: a send whose write (the job and its start) returned after shutdown began raised SupervisorClosed and left the start journaled, an attempt the next supervisor counted as cut short."""
    journal = GatingJournal(inturn.MemoryJournal())
    appends = journal.hold_writes(any_of(Append))

    async def handler(job: inturn.Job) -> None:
        pass  # pragma: no cover (it never runs)

    refused: list[BaseException] = []
    async with inturn.open_supervisor(handler, journal=journal) as sup:

        async def send() -> None:
            try:
                await sup.send("k", 1)
            except inturn.SupervisorClosed as exc:
                refused.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await appends.wait_held()  # the Append and its MarkAttempt are in flight
            await sup.shutdown(grace=0)
            appends.release()
    assert len(refused) == 1  # accepted all the same: it runs when the journal reopens
    recovery = await journal.open()
    await journal.aclose()
    assert [(job.id, job.attempts) for job in recovery.jobs] == [(1, 0)]
