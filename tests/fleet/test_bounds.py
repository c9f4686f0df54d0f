"""A member's claims keep the memory bounds a single holder keeps.

Each key's FIFO holds at most ``window`` jobs and all of them together about
``max_buffered``, always each key's head; the rest wait in the journal and
are paged in as the key drains (`tests/runtime/test_paging.py` holds a
single holder to the same bound)::

    buffered <= max_buffered - 1 + lanes holding jobs
    buffered <= window * lanes holding jobs

A claim hands the core each key's first jobs (`Core.owned`): only what the
bounds allow may stay.  How much is in memory is read from the core
(``Core.buffered()``), not from the process's size.
"""

from __future__ import annotations

import pytest
import trio

import inturn
from inturn.core import Core
from inturn.journal import Append, Backlog, Claim, StoredJob

from ..runtime.test_paging import buffered
from .test_members import member

CODEC = inturn.JSONCodec()
KEYS, JOBS = 40, 20


class Counting(inturn.PostgresJournal):
    """A member journal that counts the jobs each claim read (they are in memory at once)."""

    most = 0

    async def claim(
        self, limit: int, *, page: int = 100, mark_below: int | None = None
    ) -> tuple[list[Claim], list[StoredJob]]:
        claims, jobs = await super().claim(limit, page=page, mark_below=mark_below)
        Counting.most = max(Counting.most, sum(len(claim.jobs) for claim in claims) + len(jobs))
        return claims, jobs


async def fill(dsn: str, schema: str) -> None:
    """KEYS keys x JOBS jobs waiting in the journal, sent by a member gone since; payload n is
    the n-th job sent, to key ``k{n % KEYS}``."""
    writer = member(dsn, schema)
    await writer.open()
    ids = await writer.ids(KEYS * JOBS)
    await writer.write(
        [
            Append(job_id=job_id, key=f"k{n % KEYS}", data=CODEC.encode(n))
            for n, job_id in enumerate(ids)
        ]
    )
    await writer.aclose()


@pytest.mark.parametrize(("window", "max_buffered"), [(1000, 10), (3, 100_000)])
async def test_a_members_claims_keep_window_and_max_buffered(
    pg_dsn: str, pg_schema: str, window: int, max_buffered: int
) -> None:
    """40 keys x 20 jobs wait when a member opens: its claims read, and it holds, each key's
    head and about max_buffered more, at most window of a key (not all 800); every job runs
    once, in order."""
    await fill(pg_dsn, pg_schema)
    Counting.most = 0
    ran: dict[str, list[int]] = {}
    peak = 0

    async def handler(job: inturn.Job) -> None:
        nonlocal peak
        peak = max(peak, buffered(sup))
        assert job.key is not None
        ran.setdefault(job.key, []).append(int(str(job.payload)))
        await trio.lowlevel.checkpoint()

    with trio.fail_after(60):
        async with inturn.open_supervisor(
            handler,
            journal=Counting(pg_dsn, schema=pg_schema, fleet=True),
            window=window,
            max_buffered=max_buffered,
        ) as sup:
            await sup.wait_idle()
            assert (buffered(sup), sup.stats().completed) == (0, KEYS * JOBS)
    assert ran == {f"k{k}": list(range(k, KEYS * JOBS, KEYS)) for k in range(KEYS)}
    bound = min(max_buffered - 1 + KEYS, window * KEYS)
    assert 0 < peak <= bound
    assert 0 < Counting.most <= bound  # what a claim read, kept or not


def stored(key: str, first: int, count: int) -> list[StoredJob]:
    return [StoredJob(job_id, key, b"") for job_id in range(first, first + count)]


def test_a_claim_keeps_only_what_the_bounds_allow_and_pages_the_rest() -> None:
    """`Core.owned` keeps each key's head, then jobs while fewer than max_buffered are held,
    at most window of a key; the rest are paged in from the last job it kept."""
    core = Core(inturn.Retry(), window=4, max_buffered=3)
    assert core.owned("a", Backlog(count=10, last_id=10), stored("a", 1, 10))
    assert core.owned("b", Backlog(count=10, last_id=20), stored("b", 11, 10))
    assert core.buffered() == 4  # a's head and two more; b's head
    assert [core.head(lane).id for lane in "ab"] == [1, 11]  # type: ignore[union-attr]
    wide = Core(inturn.Retry(), window=4, max_buffered=100)
    assert wide.owned("a", Backlog(count=10, last_id=10), stored("a", 1, 10))
    assert wide.buffered() == 4
    for _ in range(2):  # it drains to half its window
        head = wide.start("a")
        assert head is not None
        wide.complete(head)
    page = wide.page("a")
    assert page is not None
    assert (page.after, page.upto) == (4, 10)


def test_a_claim_reads_each_keys_share_of_what_max_buffered_leaves() -> None:
    """`Core.claim_page`: at most window, at least the head, however many keys a claim may take."""
    core = Core(inturn.Retry(), window=4, max_buffered=100)
    assert [core.claim_page(keys) for keys in (1, 20, 50, 1000)] == [4, 4, 2, 1]
    core.owned("a", Backlog(count=10, last_id=10), stored("a", 1, 10))  # holds 4
    assert [core.claim_page(keys) for keys in (24, 48)] == [4, 2]
