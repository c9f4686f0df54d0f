"""Limits: no backlog limit per key, ``max_concurrency`` across keys, ``job_timeout`` per attempt."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import inturn
from inturn.testing import Recorder

from .helpers import Concurrency, dead_letters, sleep_payload

NO_RETRY = inturn.Retry(max_attempts=1)


# -- unbounded backlog ---------------------------------------------------------


async def test_sending_ten_thousand_jobs_to_a_blocked_key_never_blocks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every send to a key whose first job is stuck returns at once: the backlog has no limit."""
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == 0:
            await release.wait()

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder) as sup:
        # If a send waited for the key, the clock would autojump to this deadline.
        with trio.fail_after(1):
            ids = [await sup.send("k", n) for n in range(10_000)]
        await trio.testing.wait_all_tasks_blocked()

        assert trio.current_time() == 0.0
        assert [call.job.id for call in recorder.calls] == [1]  # the first job is still running
        stats = sup.stats()
        assert (stats.running, stats.queued, stats.completed) == (1, 9_999, 0)

        release.set()
        await sup.wait_idle()

    assert ids == [call.job.id for call in recorder.calls]
    recorder.assert_sequential()


# -- max_concurrency -----------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3, 7])
async def test_max_concurrency_caps_handlers_running_at_once_across_keys(
    autojump_clock: trio.testing.MockClock, limit: int
) -> None:
    """With max_concurrency=N, exactly N handlers run at once at the peak, never more."""
    concurrency = Concurrency()

    async def handler(job: inturn.Job) -> None:
        concurrency.enter()
        try:
            await trio.sleep(1)
        finally:
            concurrency.exit()

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder, max_concurrency=limit) as sup:
        for n in range(10):
            await sup.submit(n)
        for key in range(20):
            for n in range(5):
                await sup.send(f"key-{key}", n)
        await sup.wait_idle()
        finished_at = trio.current_time()
        assert sup.stats().completed == 110

    assert limit == concurrency.peak
    assert -(-110 // limit) == finished_at  # the slots never sat idle
    recorder.assert_sequential()


async def test_stats_count_jobs_holding_a_slot_as_running_and_waiting_ones_as_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """stats() counts handlers holding a slot as running and those waiting for one as queued.

    Keys waiting for a slot are a queue entry, not a parked task: only the two
    running keys have actor tasks."""
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await release.wait()

    async with inturn.open_supervisor(handler, max_concurrency=2) as sup:
        for n in range(5):
            await sup.send(f"key-{n}", n)
        await trio.testing.wait_all_tasks_blocked()
        stats = sup.stats()
        assert (stats.running, stats.queued, stats.actors) == (2, 3, 2)
        release.set()


async def test_max_concurrency_grants_slots_in_the_order_jobs_asked_for_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Jobs waiting for a slot get it first come, first served, whatever their key."""
    recorder = Recorder(sleep_payload)
    async with inturn.open_supervisor(recorder, max_concurrency=1) as sup:
        await sup.send("first", 1)
        # Quiescence after each send puts each key's actor in line before the next
        # key's, so the order across keys is fixed here, not left to the scheduler.
        for n in range(10):
            await trio.testing.wait_all_tasks_blocked()
            await sup.send(f"key-{n}", 1)
        await sup.wait_idle()

    assert [float(n) for n in range(11)] == [call.start for call in recorder.calls]
    assert ["first", *(f"key-{n}" for n in range(10))] == [call.job.key for call in recorder.calls]


async def test_max_concurrency_does_not_let_a_long_backlog_starve_other_keys(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A key with many queued jobs gives up its slot to a waiting key after each job."""
    recorder = Recorder(sleep_payload)
    async with inturn.open_supervisor(recorder, max_concurrency=1) as sup:
        for _ in range(5):
            await sup.send("hog", 1)
        await trio.testing.wait_all_tasks_blocked()  # hog's first job holds the slot
        await sup.send("other", 1)
        await sup.wait_idle()

    calls = recorder.by_key()
    assert [(call.start, call.end) for call in calls["other"]] == [(1.0, 2.0)]
    assert [call.start for call in calls["hog"]] == [0.0, 2.0, 3.0, 4.0, 5.0]


async def test_max_concurrency_does_not_let_a_long_backlog_starve_other_keys_in_batches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With a batch handler too, a key with a backlog gives up its slot after each batch."""
    batches: list[tuple[float, str, list[object]]] = []

    async def handler(jobs: list[inturn.Job]) -> None:
        batches.append((trio.current_time(), str(jobs[0].key), [job.payload for job in jobs]))
        await trio.sleep(1)

    async with inturn.open_supervisor(handler, max_concurrency=1, batch=2) as sup:
        await sup.send("hog", 0)
        await trio.testing.wait_all_tasks_blocked()  # hog's first batch holds the slot
        for n in range(1, 5):
            await sup.send("hog", n)
        await sup.send("other", 0)
        await sup.wait_idle()

    assert batches == [
        (0.0, "hog", [0]),
        (1.0, "other", [0]),
        (2.0, "hog", [1, 2]),
        (3.0, "hog", [3, 4]),
    ]


async def test_a_job_in_backoff_does_not_hold_a_concurrency_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """While a failed job waits for its retry, other keys use the only slot."""
    recorder = Recorder(sleep_payload)

    async def handler(job: inturn.Job) -> object:
        if job.key == "flaky" and job.attempt == 1:
            raise ValueError("try again")
        return await recorder(job)

    retry = inturn.Retry(max_attempts=2, initial_delay=10.0, jitter=0.0)
    async with inturn.open_supervisor(handler, retry=retry, max_concurrency=1) as sup:
        await sup.send("flaky", 1)
        await trio.testing.wait_all_tasks_blocked()  # failed at 0.0, backing off until 10.0
        for _ in range(3):
            await sup.send("other", 1)
        await sup.wait_idle()

    calls = recorder.by_key()
    assert [call.start for call in calls["other"]] == [0.0, 1.0, 2.0]
    assert [(call.job.attempt, call.start) for call in calls["flaky"]] == [(2, 10.0)]


# -- job_timeout ---------------------------------------------------------------


async def test_an_attempt_within_job_timeout_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An attempt that ends before job_timeout completes with its result."""
    async with inturn.open_supervisor(sleep_payload, job_timeout=5.0, retry=NO_RETRY) as sup:
        assert await sup.ask("k", 4.9) == 4.9
        assert trio.current_time() == 4.9
        assert (sup.stats().completed, sup.stats().discarded) == (1, 0)


async def test_an_attempt_over_job_timeout_is_cancelled_and_fails_with_timeout_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A handler running past job_timeout is cancelled at the limit and the job fails."""
    cancelled_at: list[float] = []

    async def handler(job: inturn.Job) -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled_at.append(trio.current_time())
            raise

    async with inturn.open_supervisor(handler, job_timeout=5.0, retry=NO_RETRY) as sup:
        with pytest.raises(inturn.JobDiscarded) as exc_info:
            await sup.ask("k", None)
        assert trio.current_time() == 5.0

    assert cancelled_at == [5.0]
    assert isinstance(exc_info.value.__cause__, TimeoutError)


async def test_timed_out_attempts_are_retried_then_discarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each attempt gets its own job_timeout; after max_attempts timeouts the job is a dead letter."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(sleep_payload)
    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, multiplier=2.0, jitter=0.0)
    async with inturn.open_supervisor(
        recorder, journal=journal, retry=retry, job_timeout=5.0
    ) as sup:
        job_id = await sup.send("k", 100)
        after = await sup.send("k", 1)
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (1, 1)

    calls = recorder.by_key()["k"]
    # attempts at 0, 5+1, 11+2; the next job starts when the third times out
    assert [(job_id, 1, 0.0), (job_id, 2, 6.0), (job_id, 3, 13.0), (after, 1, 18.0)] == [
        (call.job.id, call.job.attempt, call.start) for call in calls
    ]
    assert [call.end for call in calls] == [None, None, None, 19.0]  # cut short, never ended
    [dead] = await dead_letters(journal)
    assert (job_id, 3) == (dead.id, dead.attempts)
    assert (dead.last_error or "").startswith("TimeoutError")


async def test_a_job_that_times_out_once_completes_on_its_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A timeout fails only that attempt: a faster retry completes the job."""

    async def handler(job: inturn.Job) -> object:
        await trio.sleep(10 if job.attempt == 1 else 1)
        return job.attempt

    retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(handler, retry=retry, job_timeout=5.0) as sup:
        assert await sup.ask("k", None) == 2
        assert trio.current_time() == 7.0  # timed out at 5, retried at 6, done at 7


async def test_waiting_for_a_concurrency_slot_does_not_count_against_job_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """job_timeout limits the handler's run, not the time its job waited for a slot."""
    recorder = Recorder(sleep_payload)
    async with inturn.open_supervisor(
        recorder, max_concurrency=1, job_timeout=5.0, retry=NO_RETRY
    ) as sup:
        for n in range(3):
            await sup.send(f"key-{n}", 4)
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (3, 0)

    assert sorted(call.start for call in recorder.calls) == [0.0, 4.0, 8.0]
