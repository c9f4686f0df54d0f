"""A member journal's own rules, below the runtime: claims, releases, fencing, and group commits.

Writes queued while the journal's thread is busy commit as one group; the
group takes set-based statements for its lone starts and its last
completions, and these must decide exactly as one statement per change does.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import trio

import inturn
from inturn.journal import Append, Complete, Halt, MarkAttempt
from inturn.journal.records import FleetChange, Release

from .test_members import member


@contextlib.asynccontextmanager
async def two_members(
    dsn: str, schema: str, **options: object
) -> AsyncIterator[tuple[inturn.PostgresJournal, inturn.PostgresJournal]]:
    """Two member journals on one schema, open, closed again however the test ends."""
    first = member(dsn, schema, **options)
    await first.open()
    try:
        second = member(dsn, schema, **options)
        await second.open()
        try:
            yield first, second
        finally:
            await second.aclose()
    finally:
        await first.aclose()


async def busy(journal: inturn.PostgresJournal, seconds: float) -> None:
    """Keep the journal's thread busy, so that writes queued meanwhile commit as one group."""
    await journal._read(lambda connection: connection.execute("SELECT pg_sleep(%s)", (seconds,)))


async def grouped(
    journal: inturn.PostgresJournal, batches: Sequence[Sequence[FleetChange]]
) -> list[Any]:
    """Write *batches* concurrently, queued behind a busy thread; each one's superseded changes."""
    results: list[Any] = [None] * len(batches)
    before = journal.commits

    async def write(n: int) -> None:
        results[n] = await journal.write_releasing(batches[n])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(busy, journal, 0.5)
        await trio.sleep(0.05)
        for n in range(len(batches)):
            nursery.start_soon(write, n)
    assert journal.commits == before + 1, "the batches committed as one group"
    return results


async def test_a_groups_last_completions_release_only_keys_nobody_waits_on(
    pg_dsn: str, pg_schema: str
) -> None:
    """Of three keys completed with a Release in one group, the one a job was sent to meanwhile is kept."""
    journal = member(pg_dsn, pg_schema)
    await journal.open()
    try:
        ids = await journal.ids(4)
        await journal.write([Append(job_id=ids[n], key=f"k{n}", data=b"") for n in range(3)])
        claims, _ = await journal.claim(10)
        assert sorted(claim.key for claim in claims) == ["k0", "k1", "k2"]
        await journal.write([Append(job_id=ids[3], key="k1", data=b"")])  # k1 gets more work
        superseded = await grouped(
            journal, [[Complete(ids[n]), Release(f"k{n}")] for n in range(3)]
        )
        assert superseded == [[], [Release("k1")], []]
        assert await journal.jobs("k1") != []
        assert await journal.release("k1") is not None  # still ours, with a job waiting
        again, _ = await journal.claim(10)
        assert again == []  # k0 and k2 were released empty; k1 is still owned
    finally:
        await journal.aclose()


async def test_a_groups_lone_starts_are_superseded_on_a_halted_key(
    pg_dsn: str, pg_schema: str
) -> None:
    """Three starts in one group: the one on a key halted meanwhile is superseded, the others apply."""
    journal = member(pg_dsn, pg_schema)
    await journal.open()
    try:
        ids = await journal.ids(3)
        await journal.write([Append(job_id=ids[n], key=f"k{n}", data=b"") for n in range(3)])
        await journal.claim(10)
        await journal.fix([Halt("k1")])
        superseded = await grouped(journal, [[MarkAttempt(ids[n], 1)] for n in range(3)])
        assert superseded == [[], [MarkAttempt(ids[1], 1)], []]
        states = [(await journal.job(job_id)) for job_id in ids]
        assert [info.attempts for info in states if info is not None] == [1, 0, 1]
    finally:
        await journal.aclose()


async def test_a_member_cannot_change_a_job_of_a_key_it_does_not_own(
    pg_dsn: str, pg_schema: str
) -> None:
    """Another member's key: a start or a completion is refused with LeaseLost, and nothing changes."""
    async with two_members(pg_dsn, pg_schema) as (owner, other):
        [job] = await owner.ids(1)
        await owner.write([Append(job_id=job, key="k", data=b"")])
        [claim], _ = await owner.claim(10)
        for change in (MarkAttempt(job, 1), Complete(job)):
            with pytest.raises(inturn.LeaseLost):
                await other.write([change])
        info = await owner.job(job)
        assert info is not None
        assert (info.state, info.attempts) == ("queued", 0)
        assert claim.epoch > 0


async def test_a_batch_refused_in_a_group_is_refused_alone(pg_dsn: str, pg_schema: str) -> None:
    """No savepoints: a refused batch of several changes rolls the group back, and the rest commits without it."""
    journal = member(pg_dsn, pg_schema)
    await journal.open()
    try:
        fresh = iter(await journal.ids(7))
        await journal.write([Append(job_id=next(fresh), key="held", data=b"", unique="u")])
        outcomes: dict[str, object] = {}

        async def write(key: str, unique: str | None) -> None:
            # Ids rise in the order batches reach the journal: take them as it does.
            batch: list[FleetChange] = [
                Append(job_id=next(fresh), key=key, data=b""),
                Append(job_id=next(fresh), key=key, data=b"", unique=unique),
            ]
            try:
                outcomes[key] = await journal.write_releasing(batch)
            except inturn.DuplicateError as exc:
                outcomes[key] = exc

        before = journal.commits
        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy, journal, 0.5)
            await trio.sleep(0.05)
            for key, unique in (("a", None), ("b", "u"), ("c", None)):
                nursery.start_soon(write, key, unique)
        assert journal.commits == before + 1  # the group, once tried again without "b"
        assert outcomes["a"] == outcomes["c"] == []
        assert isinstance(outcomes["b"], inturn.DuplicateError)
        assert [len(await journal.jobs(key)) for key in "abc"] == [2, 0, 2]
    finally:
        await journal.aclose()


async def test_hold_renews_a_heartbeat_that_may_have_run_out_or_refuses(
    pg_dsn: str, pg_schema: str
) -> None:
    """Before a start marked by an earlier write: nothing to do while the heartbeat is fresh; after a
    (simulated) stall, a renewal, which a heartbeat expired meanwhile refuses with LeaseLost."""
    journal = member(pg_dsn, pg_schema, lease_ttl=2.0)
    await journal.open()
    try:
        fresh = journal.commits
        await journal.hold()  # fresh: no transaction
        journal._renewed -= 10.0  # as if the process had stalled since its last renewal
        await journal.hold()  # still live in the database: renewed
        assert not journal._suspect()
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            connection.execute(
                f"UPDATE {pg_schema}.processes SET expires_at = clock_timestamp() - interval '1 s'"
            )
        journal._renewed -= 10.0
        with pytest.raises(inturn.LeaseLost):
            await journal.hold()
        with pytest.raises(inturn.LeaseLost):  # and nothing more is written
            await journal.write([MarkAttempt(1, 1)])
        assert journal.commits == fresh
    finally:
        await journal.aclose()


async def test_a_member_stalled_inside_a_transaction_holds_rows_for_half_its_ttl_at_most(
    pg_dsn: str, pg_schema: str
) -> None:
    """A stalls just before COMMIT of an Append to k (k's row locked) for longer than half its
    TTL: the server ends its session, so B's Append to k goes through while A still sleeps.  A
    wakes within its TTL, learns its transaction did not commit, and commits it again."""
    stalled, woke = threading.Event(), threading.Event()

    def stall(stage: str) -> None:
        if stage == "commit" and not stalled.is_set():
            stalled.set()
            time.sleep(2.2)  # past half the TTL, within it
            woke.set()

    async with two_members(pg_dsn, pg_schema, lease_ttl=3.0) as (a, b):
        warm, job_a, after = await a.ids(3)
        [job_b] = await b.ids(1)
        await a.write([Append(job_id=warm, key="warm", data=b"")])  # a fresh heartbeat
        a._fault_hook = stall
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.write, [Append(job_id=job_a, key="k", data=b"")])
            await trio.to_thread.run_sync(stalled.wait)
            await b.write([Append(job_id=job_b, key="k", data=b"")])
            assert not woke.is_set(), "B waited for A to wake"
        assert [job.id for job in await b.jobs("k")] == [job_b, job_a]  # places in commit order
        await a.write([Append(job_id=after, key="after", data=b"")])  # A's lease held


async def test_a_claim_passes_by_a_dead_member_whose_transaction_is_in_flight(
    pg_dsn: str, pg_schema: str
) -> None:
    """A member's heartbeat ran out while a transaction of its holds its row: a claim neither
    waits for it nor takes its keys (that transaction may still commit); once it ended, the next
    claim does."""
    async with two_members(pg_dsn, pg_schema) as (a, b):
        [job] = await a.ids(1)
        await a.write([Append(job_id=job, key="k", data=b"")])
        [claim], _ = await a.claim(10)
        assert claim.key == "k"
        with psycopg.connect(pg_dsn, autocommit=True) as in_flight:
            heartbeat = f"UPDATE {pg_schema}.processes SET expires_at = clock_timestamp() + %s"
            in_flight.execute(heartbeat + " WHERE id = %s", (timedelta(seconds=-1), a._process))
            # A's transaction, stalled after renewing: the server ends it after 5 s, and a
            # claim that waited for it would take k then.
            in_flight.execute("SET idle_in_transaction_session_timeout = 5000")
            in_flight.execute("BEGIN")
            in_flight.execute(heartbeat + " WHERE id = %s", (timedelta(seconds=60), a._process))
            assert await b.claim(10) == ([], [])
            in_flight.execute("ROLLBACK")
        [claim], _ = await b.claim(10)
        assert claim.key == "k"
        with pytest.raises(inturn.LeaseLost):
            await a.write([Complete(job)])
