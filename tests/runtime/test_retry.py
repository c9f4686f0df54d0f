"""Retries: a failing head backs off in place, holding up its own key and no other."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import inturn
from inturn.testing import Recorder

from .helpers import dead_letters


class Boom(Exception):
    """A handler failure that the default policy retries."""


async def fail_key_a(job: inturn.Job) -> None:
    """Fail every attempt of a job for key "a" with payload "bad"; succeed otherwise."""
    if job.key == "a" and job.payload == "bad":
        raise Boom(f"attempt {job.attempt}")
    await trio.lowlevel.checkpoint()


def timeline(recorder: Recorder, key: str | None) -> list[tuple[int, int, float]]:
    """(job id, attempt, start time) of every attempt made for *key*."""
    return [(call.job.id, call.job.attempt, call.start) for call in recorder.by_key().get(key, [])]


async def test_a_failing_head_backs_off_exponentially_and_holds_up_only_its_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Attempts of a failing head wait 1, 2, 4 s; the job behind it waits too, other keys don't."""
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(max_attempts=4, initial_delay=1.0, multiplier=2.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        bad = await sup.send("a", "bad")
        behind = await sup.send("a", "good")
        others = [await sup.send("b", "good") for _ in range(3)]
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (4, 1)

    assert [(bad, 1, 0.0), (bad, 2, 1.0), (bad, 3, 3.0), (bad, 4, 7.0), (behind, 1, 7.0)] == (
        timeline(recorder, "a")
    )
    assert [(job_id, 1, 0.0) for job_id in others] == timeline(recorder, "b")


async def test_a_key_sent_to_during_another_keys_backoff_runs_undelayed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job for another key sent while a head backs off starts the moment it is sent."""
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(max_attempts=2, initial_delay=60.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        await sup.send("a", "bad")
        await trio.sleep(10)
        await sup.send("b", "good")
        await sup.send("a", "good")  # queued behind the head in backoff
        await trio.testing.wait_all_tasks_blocked()
        stats = sup.stats()
        assert (stats.queued, stats.completed, stats.running) == (2, 1, 0)
        await sup.wait_idle()

    assert timeline(recorder, "a") == [(1, 1, 0.0), (1, 2, 60.0), (3, 1, 60.0)]
    assert timeline(recorder, "b") == [(2, 1, 10.0)]


async def test_backoff_is_capped_at_max_delay(autojump_clock: trio.testing.MockClock) -> None:
    """The delay grows by multiplier per attempt until max_delay, then stays there."""
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(
        max_attempts=5, initial_delay=1.0, multiplier=10.0, max_delay=30.0, jitter=0.0
    )
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        await sup.send("a", "bad")
        await sup.wait_idle()

    # delays 1, 10, then 100 and 1000 capped to 30
    assert [start for _, _, start in timeline(recorder, "a")] == [0.0, 1.0, 11.0, 41.0, 71.0]


@pytest.mark.parametrize(
    ("draw", "starts"),
    [
        (0.0, [0.0, 5.0, 15.0]),  # -50 %: 10 -> 5, 20 -> 10
        (0.5, [0.0, 10.0, 30.0]),  # the midpoint: no spread
        (0.75, [0.0, 12.5, 37.5]),  # +25 %: 10 -> 12.5, 20 -> 25
    ],
)
async def test_jitter_spreads_each_delay_by_the_injected_random_source(
    autojump_clock: trio.testing.MockClock, draw: float, starts: list[float]
) -> None:
    """Each delay is scaled by 1 + jitter * (2 * random() - 1), using the supervisor's random."""
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(max_attempts=3, initial_delay=10.0, multiplier=2.0, jitter=0.5)
    async with inturn.open_supervisor(recorder, retry=retry, random=lambda: draw) as sup:
        await sup.send("a", "bad")
        await sup.wait_idle()

    assert starts == [start for _, _, start in timeline(recorder, "a")]


async def test_a_retried_job_keeps_its_id_payload_and_counts_attempts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every attempt of a job sees the same id, key, payload and unique, and the next attempt number."""
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        job_id = await sup.send("a", "bad", unique="u")
        await sup.wait_idle()

    assert [
        inturn.Job(id=job_id, key="a", payload="bad", attempt=attempt, unique="u")
        for attempt in (1, 2, 3)
    ] == [call.job for call in recorder.calls]


async def test_a_job_that_fails_then_succeeds_completes_and_lets_the_next_job_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job that succeeds on a retry completes; the job behind it starts right after."""

    async def flaky(job: inturn.Job) -> object:
        if job.payload == "flaky" and job.attempt < 3:
            raise Boom("not yet")
        return job.attempt

    recorder = Recorder(flaky)
    journal = inturn.MemoryJournal()
    retry = inturn.Retry(max_attempts=5, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry, journal=journal) as sup:
        first = await sup.send("k", "flaky")
        second = await sup.send("k", "fine")
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (2, 0)

    assert [(first, 1, 0.0), (first, 2, 1.0), (first, 3, 3.0), (second, 1, 3.0)] == (
        timeline(recorder, "k")
    )
    assert await dead_letters(journal) == []
    assert journal.unfinished() == []


async def test_after_max_attempts_the_job_is_discarded_and_the_key_continues(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With on_discard="continue", a job out of attempts is a dead letter and its key moves on."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
        bad = await sup.send("a", "bad", unique="once")
        later = [await sup.send("a", "good") for _ in range(2)]
        await sup.wait_idle()
        stats = sup.stats()
        assert (2, 1, 0, frozenset()) == (
            stats.completed,
            stats.discarded,
            stats.queued,
            stats.halted_keys,
        )

    assert [(bad, 1, 0.0), (bad, 2, 1.0), (bad, 3, 3.0)] + [(n, 1, 3.0) for n in later] == (
        timeline(recorder, "a")
    )
    [dead] = await dead_letters(journal)
    assert (bad, "a", "once", 3) == (dead.id, dead.key, dead.unique, dead.attempts)
    assert f"{Boom.__module__}.Boom: attempt 3" == dead.last_error  # the last failure
    assert inturn.JSONCodec().decode(dead.data) == "bad"
    assert journal.unfinished() == []


class Unfixable(inturn.PermanentError):
    """A subclass of PermanentError: permanent too."""


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (inturn.PermanentError("no"), inturn.Retry(initial_delay=60.0)),
        (Unfixable("no"), inturn.Retry(initial_delay=60.0)),
        (KeyError("no"), inturn.Retry(initial_delay=60.0, permanent=(KeyError,))),
        (KeyError("no"), inturn.Retry(initial_delay=60.0, permanent=(LookupError,))),
    ],
    ids=["PermanentError", "subclass", "permanent-type", "permanent-base-type"],
)
async def test_a_permanent_failure_is_discarded_after_one_attempt(
    autojump_clock: trio.testing.MockClock, error: Exception, retry: inturn.Retry
) -> None:
    """PermanentError, its subclasses and Retry(permanent=...) types discard at once, no backoff."""

    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            raise error

    journal = inturn.MemoryJournal()
    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
        bad = await sup.send("k", "bad")
        after = await sup.send("k", "good")
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (1, 1)

    assert [(bad, 1, 0.0), (after, 1, 0.0)] == timeline(recorder, "k")
    [dead] = await dead_letters(journal)
    assert (bad, 1) == (dead.id, dead.attempts)
    assert dead.last_error is not None
    assert dead.last_error.endswith(f"{type(error).__qualname__}: {error}")


async def test_a_type_not_named_permanent_is_still_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Retry(permanent=(KeyError,)) leaves other exception types to the normal backoff."""
    recorder = Recorder(fail_key_a)
    retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0, permanent=(KeyError,))
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        await sup.send("a", "bad")
        await sup.wait_idle()

    assert timeline(recorder, "a") == [(1, 1, 0.0), (1, 2, 1.0)]


async def test_max_attempts_one_discards_on_the_first_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """max_attempts counts the first attempt: with 1 there is no retry."""
    recorder = Recorder(fail_key_a)
    async with inturn.open_supervisor(recorder, retry=inturn.Retry(max_attempts=1)) as sup:
        await sup.send("a", "bad")
        await sup.wait_idle()
        assert sup.stats().discarded == 1

    assert timeline(recorder, "a") == [(1, 1, 0.0)]


async def test_a_keyless_job_retries_with_backoff_without_holding_up_others(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failing submit job backs off like a keyed one while other jobs run."""

    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            raise Boom(f"attempt {job.attempt}")

    recorder = Recorder(handler)
    journal = inturn.MemoryJournal()
    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry, journal=journal) as sup:
        bad = await sup.submit("bad")
        good = await sup.submit("good")
        keyed = await sup.send("k", "good")
        await sup.wait_idle()

    assert [(bad, 1, 0.0), (bad, 2, 1.0), (bad, 3, 3.0), (good, 1, 0.0)] == sorted(
        timeline(recorder, None)
    )
    assert [(keyed, 1, 0.0)] == timeline(recorder, "k")
    [dead] = await dead_letters(journal)
    assert (bad, None, 3, f"{Boom.__module__}.Boom: attempt 3") == (
        dead.id,
        dead.key,
        dead.attempts,
        dead.last_error,
    )


async def test_the_journal_counts_attempts_while_a_job_backs_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """During backoff the job is unfinished in the journal with the attempts made so far."""
    journal = inturn.MemoryJournal()
    retry = inturn.Retry(max_attempts=5, initial_delay=10.0, multiplier=1.0, jitter=0.0)
    async with inturn.open_supervisor(fail_key_a, journal=journal, retry=retry) as sup:
        job_id = await sup.send("a", "bad")
        for attempts in (1, 2, 3):
            await trio.testing.wait_all_tasks_blocked()  # attempt `attempts` failed
            [stored] = journal.unfinished()
            assert (job_id, attempts) == (stored.id, stored.attempts)
            await trio.sleep(10)
        await sup.wait_idle()
