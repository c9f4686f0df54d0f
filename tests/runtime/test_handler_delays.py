"""Handler-chosen delays (issue 12, part 3): `RetryAfter` and `Snooze`."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import inturn
from tests.conftest import MakeJournal

QUICK = inturn.Retry(max_attempts=3, initial_delay=1000.0, max_delay=1000.0, jitter=0.5)


async def test_retry_after_waits_exactly_that_long_and_counts_the_attempt(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """RetryAfter(7) retries 7 s later (not the policy's 1,000 s, no jitter), the key waits behind it, and after max_attempts the job is a dead letter."""
    starts: list[tuple[str, int, float]] = []
    origin = trio.current_time()

    async def handler(job: inturn.Job) -> None:
        starts.append((str(job.payload), job.attempt, trio.current_time() - origin))
        if job.payload == "limited":
            raise inturn.RetryAfter(7, "rate limited")

    async with inturn.open_supervisor(handler, journal=make_journal(), retry=QUICK) as sup:
        limited = await sup.send("k", "limited")
        await sup.send("k", "next")
        await sup.wait_idle()
        dead = await sup.job(limited)
    assert starts == [
        ("limited", 1, 0.0),
        ("limited", 2, 7.0),
        ("limited", 3, 14.0),
        ("next", 1, 14.0),
    ]
    assert dead is not None
    assert (dead.state, dead.attempts) == ("dead", 3)
    assert dead.last_error == "inturn.errors.RetryAfter: retry after 7 s: rate limited"


async def test_snooze_waits_without_using_up_an_attempt(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Snooze(30) twice, then success: three starts of attempt 1, 30 s apart; the key's next job waits; the journal never counts more than one attempt."""
    starts: list[tuple[str, int, float]] = []
    origin = trio.current_time()

    async def handler(job: inturn.Job) -> None:
        starts.append((str(job.payload), job.attempt, trio.current_time() - origin))
        if job.payload == "sleepy" and len(starts) < 3:
            raise inturn.Snooze(30, "not yet")

    async with inturn.open_supervisor(
        handler, journal=make_journal(), retry=inturn.Retry(max_attempts=1)
    ) as sup:
        await sup.send("k", "sleepy")
        await sup.send("k", "next")
        await sup.wait_idle()
    assert starts == [
        ("sleepy", 1, 0.0),
        ("sleepy", 1, 30.0),
        ("sleepy", 1, 60.0),
        ("next", 1, 60.0),
    ]


async def test_a_snoozing_job_shows_why_its_key_waits_and_gives_its_attempt_back(
    make_journal: MakeJournal,
) -> None:
    """While it snoozes the job is "retrying" with the snooze as its last error, and its attempt is given back (0 in the journal). Real clock: the snooze is an hour."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.Snooze(3600, "closed until 9")

    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        job_id = await sup.send("k", 1)
        with trio.fail_after(10):
            while (info := await sup.job(job_id)) is None or info.state != "retrying":  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert info.attempts == 0
        assert info.last_error == "inturn.errors.Snooze: snoozed for 3600 s: closed until 9"
        [key] = await sup.keys(state="blocked")
        assert (key.key, key.last_error) == ("k", info.last_error)
        await sup.shutdown(grace=0)


async def test_snoozing_more_than_max_snoozes_in_a_row_counts_as_a_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With max_snoozes=2, the third Snooze in a row is a failed attempt: with max_attempts=1 the job is a dead letter after 3 starts."""
    starts = 0

    async def handler(job: inturn.Job) -> None:
        nonlocal starts
        starts += 1
        raise inturn.Snooze(1)

    async with inturn.open_supervisor(
        handler, retry=inturn.Retry(max_attempts=1), max_snoozes=2
    ) as sup:
        job_id = await sup.send("k", 1)
        await sup.wait_idle()
        dead = await sup.job(job_id)
    assert starts == 3
    assert dead is not None
    assert (dead.state, dead.attempts) == ("dead", 1)


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), "5", True])
@pytest.mark.parametrize("kind", [inturn.RetryAfter, inturn.Snooze])
def test_a_bad_delay_is_refused_where_it_is_raised(
    kind: type[inturn.RetryAfter | inturn.Snooze], seconds: object
) -> None:
    """seconds must be a finite number >= 0."""
    with pytest.raises((TypeError, ValueError)):
        kind(seconds)  # type: ignore[arg-type]
