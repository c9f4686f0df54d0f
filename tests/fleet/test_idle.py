"""A member's `wait_idle()` (and the end of its ``async with`` block) waits for the jobs it sent.

Jobs sent to a key the member owns already are not claimed again: they wait
in the journal until the key's actor reads them (`docs/fleet.md`).  Idle
means none of them waits any more.
"""

from __future__ import annotations

import pytest
import trio

import inturn

from .test_members import member

BEHIND = 20


@pytest.mark.parametrize("ending", ["wait_idle", "leaving the block"])
async def test_a_member_waits_for_the_jobs_it_sent_to_a_key_it_owns(
    pg_dsn: str, pg_schema: str, ending: str
) -> None:
    """Regression: with the key's first job running, the 20 sent behind it were left waiting."""
    ran: list[object] = []
    first_runs = trio.Event()
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == 0:
            first_runs.set()
            await release.wait()
        ran.append(job.payload)

    async with inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as sup:
        await sup.send("k", 0)
        await first_runs.wait()  # the member owns "k" now
        for n in range(1, BEHIND + 1):
            await sup.send("k", n)
        release.set()
        if ending == "wait_idle":
            await sup.wait_idle()
            assert ran == list(range(BEHIND + 1))
    assert ran == list(range(BEHIND + 1))
