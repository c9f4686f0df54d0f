"""The gate: one job at a time per key, in acceptance order; keys run concurrently."""

from __future__ import annotations

import random
from itertools import accumulate

import trio
import trio.testing
from hypothesis import given, strategies as st

import inturn
from inturn.testing import Recorder

from .helpers import Concurrency, sleep_payload


async def test_jobs_of_one_key_run_one_at_a_time_in_acceptance_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Jobs sent for one key start in acceptance order, each after the one before ends."""
    recorder = Recorder(sleep_payload)
    async with inturn.open_supervisor(recorder) as sup:
        ids = [await sup.send("k", 1) for _ in range(5)]
        await sup.wait_idle()

    recorder.assert_sequential()
    assert ids == [call.job.id for call in recorder.calls]
    assert [call.start for call in recorder.calls] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [call.end for call in recorder.calls] == [1.0, 2.0, 3.0, 4.0, 5.0]


async def test_fifty_keys_of_two_hundred_jobs_keep_order_and_run_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With 50 keys x 200 jobs of random length, each key is sequential and exact, keys overlap."""
    rng = random.Random(7)
    keys = [f"key-{n}" for n in range(50)]
    sends = [(key, rng.randint(0, 9)) for key in keys for _ in range(200)]
    rng.shuffle(sends)  # interleave the keys in acceptance order
    concurrency = Concurrency()

    async def handler(job: inturn.Job) -> object:
        concurrency.enter()
        try:
            return await sleep_payload(job)
        finally:
            concurrency.exit()

    recorder = Recorder(handler)
    accepted: dict[str, list[int]] = {key: [] for key in keys}
    sleeps: dict[str, list[int]] = {key: [] for key in keys}
    async with inturn.open_supervisor(recorder) as sup:
        for key, seconds in sends:
            accepted[key].append(await sup.send(key, seconds))
            sleeps[key].append(seconds)
        assert trio.current_time() == 0.0  # sending never waited for a busy key
        await sup.wait_idle()
        finished_at = trio.current_time()

    recorder.assert_sequential()
    calls = recorder.by_key()
    for key in keys:
        assert accepted[key] == [call.job.id for call in calls[key]], key
        # Each job starts the instant the one before it ends: exact virtual times.
        ends = list(accumulate(sleeps[key]))
        assert [0, *ends[:-1]] == [call.start for call in calls[key]], key
        assert ends == [call.end for call in calls[key]], key
    assert max(sum(per_key) for per_key in sleeps.values()) == finished_at
    assert finished_at < sum(seconds for _, seconds in sends) / 25
    assert concurrency.peak == len(keys)  # at t=0 every key is running a job


async def test_keyless_jobs_run_concurrently_with_each_other_and_with_keyed_jobs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Jobs from submit start at once, alongside each other and alongside a busy key."""
    recorder = Recorder(sleep_payload)
    async with inturn.open_supervisor(recorder) as sup:
        keyed = [await sup.send("k", 10) for _ in range(3)]
        keyless = [await sup.submit(10) for _ in range(20)]
        await sup.wait_idle()
        assert trio.current_time() == 30.0

    calls = recorder.by_key()
    assert keyed == [call.job.id for call in calls["k"]]
    assert [(call.start, call.end) for call in calls["k"]] == [
        (0.0, 10.0),
        (10.0, 20.0),
        (20.0, 30.0),
    ]
    assert sorted(keyless) == sorted(call.job.id for call in calls[None])
    assert [(call.start, call.end) for call in calls[None]] == [(0.0, 10.0)] * 20


async def test_keyless_jobs_all_run_while_each_is_blocked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every submitted job is running at the same moment: none waits for another to end."""
    count = 10
    all_running = trio.Event()
    running = 0

    async def handler(job: inturn.Job) -> None:
        nonlocal running
        running += 1
        if running == count:
            all_running.set()
        await all_running.wait()

    async with inturn.open_supervisor(handler) as sup:
        for n in range(count):
            await sup.submit(n)
        with trio.fail_after(1):  # without concurrency, the first job would wait forever
            await sup.wait_idle()
        assert sup.stats().completed == count


async def test_a_job_waits_for_the_job_before_it_to_end_not_for_its_own_send(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job sent while its key is busy starts exactly when the busy job completes."""
    recorder = Recorder(sleep_payload)
    async with inturn.open_supervisor(recorder) as sup:
        await sup.send("k", 10)
        await trio.sleep(4)
        await sup.send("k", 1)  # accepted at 4.0 while the first job runs
        await trio.sleep(20)
        await sup.send("k", 1)  # accepted at 24.0, the key long idle
        await sup.wait_idle()

    assert [(call.start, call.end) for call in recorder.calls] == [
        (0.0, 10.0),
        (10.0, 11.0),
        (24.0, 25.0),
    ]


# -- property: arbitrary interleavings of sends and pauses --------------------

# A step is (key, seconds): send a job for key whose handler sleeps that long,
# or, with key None, pause the sender for that long.
steps = st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 3)), max_size=40)


@given(steps)
def test_any_interleaving_of_sends_runs_each_key_in_order_at_exact_times(
    script: list[tuple[str | None, int]],
) -> None:
    """For any interleaving of sends and pauses, a job starts at max(its send, previous end)."""
    recorder = Recorder(sleep_payload)
    accepted: dict[str, list[tuple[int, float, int]]] = {}  # key -> (id, sent at, seconds)

    async def main() -> None:
        # idle_timeout=1 lets actors exit and respawn between the sends.
        async with inturn.open_supervisor(recorder, idle_timeout=1.0) as sup:
            for key, seconds in script:
                if key is None:
                    await trio.sleep(seconds)
                    continue
                sent_at = trio.current_time()
                job_id = await sup.send(key, seconds)
                accepted.setdefault(key, []).append((job_id, sent_at, seconds))
            with trio.fail_after(1000):  # a lost job fails the example instead of hanging it
                await sup.wait_idle()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    recorder.assert_sequential()
    calls = recorder.by_key()
    assert set(accepted) == set(calls)
    for key, jobs in accepted.items():
        expected = []
        end = 0.0
        for job_id, sent_at, seconds in jobs:
            start = max(sent_at, end)
            end = start + seconds
            expected.append((job_id, start, end))
        assert expected == [(call.job.id, call.start, call.end) for call in calls[key]]


def test_a_job_sent_at_the_instant_its_idle_actor_times_out_starts_at_once() -> None:
    """A send landing exactly on the idle deadline of its key's actor is run at that instant."""

    async def main(recorder: Recorder) -> None:
        async with inturn.open_supervisor(recorder, idle_timeout=1.0) as sup:
            await sup.send("k", 2)  # runs 0..2, then idles until 3
            await trio.sleep(3)
            await sup.send("k", 0)
            with trio.fail_after(100):
                await sup.wait_idle()

    # Which of the two wakes at t=3 runs first is up to trio's randomized
    # scheduler, so run the race often enough to meet both orders.
    for _ in range(50):
        recorder = Recorder(sleep_payload)
        trio.run(main, recorder, clock=trio.testing.MockClock(autojump_threshold=0))
        assert [(call.job.id, call.start) for call in recorder.calls] == [(1, 0.0), (2, 3.0)]
