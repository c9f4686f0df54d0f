"""One clock: every time the runtime writes or compares is the supervisor's, virtual under a mock clock.

Due times, retries, dedup windows, acceptance and finishing times, and
`purge_dead`'s age all read `trio.current_time()` on the Unix scale, so a test
that sleeps an hour in virtual time sees an hour pass everywhere.
"""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing

import inturn


async def refuse(job: inturn.Job) -> None:
    raise ValueError("refused")


async def test_a_dead_letter_is_timed_and_purged_on_the_supervisors_clock(
    autojump_clock: trio.testing.MockClock, journal: inturn.Journal
) -> None:
    """Regression: ``purge_dead(older_than=1.0)`` ten virtual seconds after a discard purged nothing."""
    opened = time.time()
    retry = inturn.Retry(max_attempts=1)
    async with inturn.open_supervisor(refuse, journal=journal, retry=retry) as sup:
        await trio.sleep(3600)
        job_id = await sup.send("k", 1)
        await sup.wait_idle()
        info = await sup.job(job_id)
        assert info is not None
        assert info.state == "dead"
        assert info.accepted_at >= opened + 3600
        assert info.finished_at is not None
        assert info.finished_at >= opened + 3600
        await trio.sleep(10)
        assert await sup.purge_dead(older_than=20) == 0
        assert await sup.purge_dead(older_than=1.0) == 1
        assert await sup.job(job_id) is None


async def test_a_completed_jobs_dedup_window_and_a_new_jobs_acceptance_share_the_clock(
    autojump_clock: trio.testing.MockClock, journal: inturn.Journal
) -> None:
    async def noop(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    opened = time.time()
    async with inturn.open_supervisor(noop, journal=journal) as sup:
        await trio.sleep(3600)
        await sup.send("k", 1, unique="u", unique_for=60)
        await sup.wait_idle()
        with pytest.raises(inturn.DuplicateError) as refused:
            await sup.send("k", 2, unique="u")
        assert refused.value.until is not None
        assert opened + 3600 + 60 <= refused.value.until
        queued = await sup.send("k", 3, delay=600)
        info = await sup.job(queued)
        assert info is not None
        assert info.accepted_at >= opened + 3600
