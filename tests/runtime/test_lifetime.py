"""Structured lifetime: the supervisor's jobs live and die with its ``async with`` block."""

from __future__ import annotations

import pytest
import structlog
import trio
import trio.testing

import inturn
import inturn.journal
from inturn.testing import FaultyJournal, Recorder
from tests.gating import GatingJournal

from .helpers import dead_letters


async def test_leaving_the_body_waits_for_every_job(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Leaving the body normally returns once every job is terminal, retries included."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(1)
        if job.payload == "flaky" and job.attempt < 3:
            raise ValueError("flaky")
        if job.payload == "bad":
            raise inturn.PermanentError("bad")

    journal = inturn.MemoryJournal()
    recorder = Recorder(handler)
    retry = inturn.Retry(max_attempts=3, initial_delay=10.0, multiplier=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
        await sup.send("a", "flaky")
        await sup.send("a", "ok")
        await sup.send("b", "bad")
        await sup.submit("ok")

    # "a": 3 attempts of 1 s with two 10 s backoffs, then one more job
    assert trio.current_time() == 1 + 10 + 1 + 10 + 1 + 1
    assert sup.stats().completed == 3
    assert sup.stats().discarded == 1
    assert journal.unfinished() == []


async def test_leaving_the_body_does_not_wait_for_idle_actors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once idle, leaving the body stops lingering actors at once, not after idle_timeout."""
    async with inturn.open_supervisor(Recorder(), idle_timeout=100.0) as sup:
        await sup.send("k", 1)
        await sup.wait_idle()
        assert sup.stats().actors == 1
    assert trio.current_time() == 0.0


async def test_leaving_the_body_leaves_a_halted_key_parked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Jobs parked on a halted key do not hold up leaving the body; they stay journaled."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.PermanentError("no")

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(handler, journal=journal, on_discard="halt") as sup:
        await sup.send("k", 1)
        await sup.send("k", 2)
    assert [job.id for job in journal.unfinished()] == [2]


async def test_cancelling_the_enclosing_scope_stops_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancellation stops at once: handlers see Cancelled, nothing fails, jobs stay journaled."""
    cancelled: list[tuple[object, int, float]] = []

    async def handler(job: inturn.Job) -> None:
        if job.payload == "a1" and job.attempt == 1:
            await trio.sleep(1)
            raise ValueError("first try fails")
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append((job.payload, job.attempt, trio.current_time()))
            raise

    journal = inturn.MemoryJournal()
    retry = inturn.Retry(initial_delay=1.0, jitter=0.0)
    with structlog.testing.capture_logs() as logs, trio.move_on_after(5) as scope:
        async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
            await sup.send("a", "a1")
            await sup.send("a", "a2")
            await sup.send("b", "b1")
            await sup.submit("c1")
            await sup.wait_idle()

    assert scope.cancelled_caught
    assert trio.current_time() == 5.0
    assert {("a1", 2, 5.0), ("b1", 1, 5.0), ("c1", 1, 5.0)} == set(cancelled)
    assert sup.stats().discarded == 0
    assert await dead_letters(journal) == []
    assert [e for e in logs if e["event"] in ("job.discarded", "actor.crashed")] == []
    # each attempt cut short is given back: a1 had failed once, the rest never
    assert [(job.id, job.attempts) for job in journal.unfinished()] == [
        (1, 1),
        (2, 0),
        (3, 0),
        (4, 0),
    ]


async def test_cancelled_while_backing_off_keeps_the_failed_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job cancelled during its backoff keeps its failed attempts in the journal."""

    async def handler(job: inturn.Job) -> None:
        raise ValueError("fails")

    journal = inturn.MemoryJournal()
    retry = inturn.Retry(initial_delay=10.0, multiplier=1.0, jitter=0.0)
    with trio.move_on_after(15):
        async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()
    assert [(job.id, job.attempts) for job in journal.unfinished()] == [(1, 2)]


@pytest.mark.parametrize("cancelled", [False, True])
async def test_no_actor_is_reported_live_after_stop(
    autojump_clock: trio.testing.MockClock, cancelled: bool
) -> None:
    """After a stop, normal or cancelled, stats() counts no live actors."""

    async def handler(job: inturn.Job) -> None:
        if job.payload == "forever":
            await trio.sleep_forever()

    with trio.move_on_after(10):
        async with inturn.open_supervisor(handler, idle_timeout=100.0) as sup:
            await sup.send("k", 1)
            await sup.send("other", "forever" if cancelled else 2)
            await sup.submit("forever" if cancelled else 3)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().actors >= 2
    assert sup.stats().actors == 0


async def test_send_after_stop_raises_supervisor_closed() -> None:
    """Every way to add work after a normal stop raises SupervisorClosed."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        await sup.send("k", 1)

    with pytest.raises(inturn.SupervisorClosed):
        await sup.send("k", 2)
    with pytest.raises(inturn.SupervisorClosed):
        await sup.submit(2)
    with pytest.raises(inturn.SupervisorClosed):
        await sup.ask("k", 2)
    assert journal.unfinished() == []
    assert sup.stats().completed == 1
    await sup.wait_idle()  # nothing was left unfinished


async def test_send_after_cancelled_stop_raises_supervisor_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After a cancelled stop, send raises SupervisorClosed and journals nothing."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep_forever()

    journal = inturn.MemoryJournal()
    with trio.move_on_after(1):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            await sup.send("k", 1)
            await trio.sleep_forever()

    with pytest.raises(inturn.SupervisorClosed):
        await sup.send("k", 2)
    assert [job.id for job in journal.unfinished()] == [1]


async def test_wait_idle_after_a_cancelled_stop_raises_supervisor_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """wait_idle after a stop that left jobs unfinished raises SupervisorClosed."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep_forever()

    with trio.move_on_after(1):
        async with inturn.open_supervisor(handler) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()

    with pytest.raises(inturn.SupervisorClosed):
        await sup.wait_idle()


async def test_pending_wait_idle_is_told_when_the_supervisor_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A wait_idle in a task outside the supervisor raises SupervisorClosed when it is cancelled."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep_forever()

    outcome: list[BaseException] = []

    async def wait_for(sup: inturn.Supervisor) -> None:
        try:
            await sup.wait_idle()
        except inturn.SupervisorClosed as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        with trio.move_on_after(1):
            async with inturn.open_supervisor(handler) as sup:
                await sup.send("k", 1)
                nursery.start_soon(wait_for, sup)
                await trio.sleep_forever()

    assert len(outcome) == 1
    assert trio.current_time() == 1.0


async def test_resume_after_stop_raises_supervisor_closed() -> None:
    """resume() on a stopped supervisor raises SupervisorClosed."""
    async with inturn.open_supervisor(Recorder()) as sup:
        pass
    with pytest.raises(inturn.SupervisorClosed):
        await sup.resume("k")


@pytest.mark.parametrize("many", [False, True], ids=["send", "send_many"])
async def test_send_journaled_as_the_supervisor_stops_raises_but_keeps_the_job(
    many: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """A send whose write completes after a cancelled stop raises SupervisorClosed; the job stays
    journaled, and the start journaled with it is given back (no attempt counted)."""
    memory = inturn.MemoryJournal()
    journal = GatingJournal(memory, closes=False)  # the held write lands after the stop
    outcome: list[BaseException] = []

    async def sender(sup: inturn.Supervisor) -> None:
        try:
            if many:
                await sup.send_many([("k", "late")])
            else:
                await sup.send("k", "late")
        except inturn.SupervisorClosed as exc:
            outcome.append(exc)

    async with trio.open_nursery() as outer:
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
                writes = journal.hold_writes()
                outer.start_soon(sender, sup)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        writes.release()

    assert len(outcome) == 1
    assert "journaled" in str(outcome[0])
    assert [(job.key, job.data, job.attempts) for job in memory.unfinished()] == [
        ("k", b'"late"', 0)
    ]


async def test_an_attempt_that_cannot_be_given_back_is_logged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """If giving an attempt back fails at shutdown, a warning says so and the stop stays a cancellation."""
    inner = inturn.MemoryJournal()

    def gives_back(changes: object) -> bool:
        return any(
            isinstance(change, inturn.journal.MarkAttempt) and change.attempt == 0
            for change in changes  # type: ignore[attr-defined]
        )

    journal = FaultyJournal(inner, fail=gives_back)
    started = trio.Event()

    async def handler(job: inturn.Job) -> None:
        started.set()
        await trio.sleep_forever()

    with structlog.testing.capture_logs() as logs, trio.move_on_after(5):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            await sup.send("k", 1)
            await started.wait()

    assert journal.failures == 1
    [event] = [log for log in logs if log["event"] == "job.attempt_not_returned"]
    assert event["log_level"] == "warning"
    assert [job.attempts for job in inner.unfinished()] == [1]
