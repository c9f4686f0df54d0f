"""ask: send a job and wait for its outcome."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import inturn
from inturn.testing import Recorder


class Boom(Exception):
    """A handler failure."""


async def double(job: inturn.Job) -> object:
    """Take one second, then return a value built from the payload."""
    await trio.sleep(1)
    assert isinstance(job.payload, int)
    return {"doubled": job.payload * 2, "attempt": job.attempt}


async def test_ask_returns_what_the_handler_returned(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ask returns the handler's return value once the job has completed."""
    async with inturn.open_supervisor(double) as sup:
        assert await sup.ask("k", 21) == {"doubled": 42, "attempt": 1}
        assert trio.current_time() == 1.0
        assert sup.stats().completed == 1


async def test_ask_returns_the_handlers_object_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The result is handed back as is, not round-tripped through the codec."""
    result = object()

    async def handler(job: inturn.Job) -> object:
        await trio.lowlevel.checkpoint()
        return result

    async with inturn.open_supervisor(handler) as sup:
        assert result is await sup.ask("k", None)


async def test_ask_gets_the_outcome_of_a_handler_that_never_yields(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ask is answered even when the handler returns or raises without a checkpoint."""

    async def instant(job: inturn.Job) -> object:
        if job.payload == "bad":
            raise inturn.PermanentError("refused at once")
        return job.payload

    async with inturn.open_supervisor(instant) as sup:
        # The job may run the moment send yields; try both outcomes on many fresh keys.
        for n in range(20):
            with trio.fail_after(1):  # a lost answer fails here instead of hanging
                assert await sup.ask(f"ok-{n}", "good") == "good"
                with pytest.raises(inturn.JobDiscarded):
                    await sup.ask(f"bad-{n}", "bad")


async def test_ask_waits_for_the_jobs_before_it_on_its_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask behind other jobs of its key returns after they, and its own job, complete."""
    recorder = Recorder(double)
    async with inturn.open_supervisor(recorder) as sup:
        for n in range(3):
            await sup.send("k", n)
        assert await sup.ask("k", 3) == {"doubled": 6, "attempt": 1}
        assert trio.current_time() == 4.0
    recorder.assert_sequential()


async def test_ask_returns_the_result_of_a_retry_that_succeeded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ask waits through failed attempts and their backoff, and returns the successful result."""

    async def flaky(job: inturn.Job) -> object:
        if job.attempt < 3:
            raise Boom("not yet")
        return await double(job)

    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(flaky, retry=retry) as sup:
        assert await sup.ask("k", 1) == {"doubled": 2, "attempt": 3}
        assert trio.current_time() == 4.0  # attempts at 0, 1, 3; done at 4


async def test_ask_raises_job_discarded_caused_by_the_last_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A discarded job makes ask raise JobDiscarded with its id, caused by the final attempt's error."""
    raised: list[tuple[int, Boom]] = []

    async def handler(job: inturn.Job) -> None:
        error = Boom(f"attempt {job.attempt}")
        raised.append((job.id, error))
        raise error

    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(handler, retry=retry) as sup:
        await sup.send("k", "before")  # so the asked job's id is not 1
        with pytest.raises(inturn.JobDiscarded) as exc_info:
            await sup.ask("k", "asked")
        assert sup.stats().discarded == 2

    job_id, last = raised[-1]
    assert (job_id, len([1 for n, _ in raised if n == job_id])) == (2, 3)
    assert job_id == exc_info.value.job_id
    assert exc_info.value.__cause__ is last


async def test_ask_raises_job_discarded_for_a_permanent_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A PermanentError ends the ask at once with JobDiscarded caused by that error."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.PermanentError("never")

    async with inturn.open_supervisor(handler, retry=inturn.Retry(initial_delay=60.0)) as sup:
        with pytest.raises(inturn.JobDiscarded) as exc_info, trio.fail_after(1):
            await sup.ask("k", None)
        assert trio.current_time() == 0.0

    assert isinstance(exc_info.value.__cause__, inturn.PermanentError)


async def test_ask_raises_job_discarded_when_its_job_halts_the_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under on_discard="halt", the ask of the job that halted its key raises JobDiscarded."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.PermanentError("never")

    async with inturn.open_supervisor(handler, on_discard="halt") as sup:
        with pytest.raises(inturn.JobDiscarded), trio.fail_after(1):
            await sup.ask("k", None)
        assert frozenset({"k"}) == sup.stats().halted_keys


async def test_ask_for_a_parked_job_returns_once_its_key_is_resumed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask queued on a halted key waits through the halt and returns after resume."""

    async def handler(job: inturn.Job) -> object:
        if job.payload == "bad":
            raise inturn.PermanentError("bad")
        await trio.lowlevel.checkpoint()
        return job.payload

    answers: list[object] = []
    async with inturn.open_supervisor(handler, on_discard="halt") as sup:
        await sup.send("k", "bad")
        async with trio.open_nursery() as nursery:

            async def asker() -> None:
                answers.append(await sup.ask("k", "parked"))

            nursery.start_soon(asker)
            await trio.sleep(10)
            assert answers == []
            await sup.resume("k")

    assert answers == ["parked"]
    assert trio.current_time() == 10.0


async def test_ask_raises_supervisor_closed_if_the_supervisor_is_cancelled_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask from outside the supervisor raises SupervisorClosed when the supervisor is cancelled."""
    journal = inturn.MemoryJournal()
    outcome: list[BaseException] = []

    async def handler(job: inturn.Job) -> None:
        await trio.sleep_forever()

    async def asker(sup: inturn.Supervisor) -> None:
        try:
            await sup.ask("k", "stuck")
        except inturn.SupervisorClosed as exc:
            outcome.append(exc)

    async with trio.open_nursery() as outer:
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(handler, journal=journal) as sup:
                outer.start_soon(asker, sup)
                await trio.testing.wait_all_tasks_blocked()
                assert sup.stats().running == 1
                scope.cancel()

    assert len(outcome) == 1
    assert [job.id for job in journal.unfinished()] == [1]  # it runs again on the next open


async def test_ask_raises_supervisor_closed_when_the_body_ends_with_its_job_parked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Leaving the body with the asked job parked on a halted key ends the ask with SupervisorClosed."""
    outcome: list[BaseException] = []

    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            raise inturn.PermanentError("bad")

    async def asker(sup: inturn.Supervisor) -> None:
        try:
            await sup.ask("k", "parked")
        except inturn.SupervisorClosed as exc:
            outcome.append(exc)

    async with (
        trio.open_nursery() as outer,
        inturn.open_supervisor(handler, on_discard="halt") as sup,
    ):
        await sup.send("k", "bad")
        outer.start_soon(asker, sup)
        await trio.testing.wait_all_tasks_blocked()

    assert len(outcome) == 1


async def test_ask_after_the_supervisor_stopped_raises_supervisor_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask made after the async with block has ended is refused with SupervisorClosed."""
    async with inturn.open_supervisor(double) as sup:
        pass
    with pytest.raises(inturn.SupervisorClosed):
        await sup.ask("k", 1)


async def test_a_cancelled_ask_leaves_its_job_to_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelling the caller of ask does not cancel the job: it was accepted and completes."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(double)
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        with trio.move_on_after(0.5) as scope:
            await sup.ask("k", 1)
        assert scope.cancelled_caught
        assert sup.stats().running == 1
        await sup.wait_idle()
        assert trio.current_time() == 1.0
        assert (sup.stats().completed, sup.stats().discarded) == (1, 0)

    assert [(call.job.id, call.end) for call in recorder.calls] == [(1, 1.0)]
    assert journal.unfinished() == []
