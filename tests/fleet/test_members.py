"""Fleet mode in one trio run: several members on one PostgreSQL journal, one gate per key."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio

import inturn
from inturn.journal.records import Append, FleetChange

from ..journal.test_postgres import terminate


def member(dsn: str, schema: str, **options: object) -> inturn.PostgresJournal:
    return inturn.PostgresJournal(dsn, schema=schema, fleet=True, **options)  # type: ignore[arg-type]


async def test_two_members_run_each_key_in_order_one_job_at_a_time(
    pg_dsn: str, pg_schema: str
) -> None:
    """Jobs sent through either member run once each, in order per key, never two of a key at once."""
    ran: dict[str, list[int]] = {}
    running: set[str] = set()
    by: dict[str, set[int]] = {"a": set(), "b": set()}

    def handler_of(name: str):
        async def handler(job: inturn.Job) -> None:
            assert job.key is not None
            assert job.key not in running, f"two jobs of {job.key} at once"
            running.add(job.key)
            by[name].add(int(job.key[1:]))
            await trio.sleep(0.001)
            ran.setdefault(job.key, []).append(int(str(job.payload)))
            running.discard(job.key)

        return handler

    with trio.fail_after(60):
        async with (
            inturn.open_supervisor(handler_of("a"), journal=member(pg_dsn, pg_schema)) as a,
            inturn.open_supervisor(handler_of("b"), journal=member(pg_dsn, pg_schema)) as b,
        ):
            for n in range(400):
                await (a if n % 3 else b).send(f"k{n % 20}", n)
            await a.wait_idle()
            await b.wait_idle()
    assert ran == {f"k{k}": list(range(k, 400, 20)) for k in range(20)}


def runs_once_each(runs: list[int]) -> list[int]:
    """*runs* without a job's repeat right after itself (a rerun: its completion was lost)."""
    return [run for n, run in enumerate(runs) if n == 0 or runs[n - 1] != run]


async def test_members_ride_out_their_sessions_being_ended(pg_dsn: str, pg_schema: str) -> None:
    """pg_terminate_backend on both members' sessions, over and over, while 300 jobs run on
    10 keys: a send the journal refused is sent again; none is lost, each key keeps its order."""
    ran: dict[str, list[int]] = {}

    async def handler(job: inturn.Job) -> None:
        assert job.key is not None
        ran.setdefault(job.key, []).append(int(str(job.payload)))
        await trio.lowlevel.checkpoint()

    ended = 0
    with trio.fail_after(120):
        async with (
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as a,
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as b,
        ):

            async def end_sessions() -> None:
                nonlocal ended
                for _ in range(20):
                    ended += await trio.to_thread.run_sync(terminate, pg_dsn, pg_schema)
                    await trio.sleep(0.05)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(end_sessions)
                for n in range(300):
                    while True:
                        try:
                            await (a if n % 2 else b).send(f"k{n % 10}", n)
                            break
                        except inturn.JournalError:
                            await trio.sleep(0.01)  # refused: nothing stored, send it again
            await a.wait_idle()
            await b.wait_idle()
    assert ended >= 5  # sessions were ended while jobs ran
    assert {key: runs_once_each(runs) for key, runs in ran.items()} == {
        f"k{k}": list(range(k, 300, 10)) for k in range(10)
    }


async def test_a_key_claimed_again_before_its_actor_heard_it_was_released_goes_on(
    pg_dsn: str, pg_schema: str
) -> None:
    """Regression: the release commits, a send lands and the claimer takes the key again, then
    the actor hears "released": it must serve the key on, not forget it (the job was stranded)."""
    done: list[str] = []

    async def handler(job: inturn.Job) -> None:
        done.append(str(job.payload))

    journal = member(pg_dsn, pg_schema)
    real_write = journal.write_releasing
    raced = False

    async def write_releasing(
        changes: Sequence[FleetChange], *, now: float | None = None
    ) -> list[FleetChange]:
        nonlocal raced
        superseded = await real_write(changes, now=now)
        if not superseded and not raced:  # the last job completed, and the key released
            raced = True
            core = sup._runtime.core
            key = "k"
            epoch = core.epoch(key)
            assert epoch is not None
            await sup.send(key, "second")
            while core.epoch(key) == epoch:  # noqa: ASYNC110 (until the claimer takes it again)
                await trio.sleep(0.01)
        return superseded

    journal.write_releasing = write_releasing  # type: ignore[method-assign]
    with trio.fail_after(30):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            await sup.send("k", "first")
            while len(done) < 2:  # noqa: ASYNC110 (the handler appends)
                await trio.sleep(0.01)
    assert (raced, done) == (True, ["first", "second"])


async def test_unique_keys_hold_across_members(pg_dsn: str, pg_schema: str) -> None:
    """A unique key one member's job holds is refused to another member's send, and free once it ran."""
    done: list[object] = []
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await release.wait()
        done.append(job.payload)

    with trio.fail_after(30):
        async with (
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as a,
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as b,
        ):
            first = await a.send("k", "first", unique="u")
            with pytest.raises(inturn.DuplicateError) as caught:
                await b.send("j", "second", unique="u")
            assert caught.value.job_id == first
            release.set()
            await a.wait_idle()
            await b.wait_idle()
            await b.send("j", "third", unique="u")
            await b.wait_idle()
            await a.wait_idle()
    assert sorted(map(str, done)) == ["first", "third"]


async def test_scheduled_jobs_and_keyless_jobs_run_in_a_fleet(pg_dsn: str, pg_schema: str) -> None:
    """A job sent with a delay joins its key when due, behind what the key holds then; keyless jobs run once each."""
    done: list[str] = []

    async def handler(job: inturn.Job) -> None:
        done.append(str(job.payload))

    with trio.fail_after(30):
        async with (
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as a,
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as b,
        ):
            await a.send("k", "later", delay=0.3)
            await b.send("k", "now")
            for n in range(6):
                await (a if n % 2 else b).submit(f"loose{n}")
            while "later" not in done:  # noqa: ASYNC110 (the members run it)
                await trio.sleep(0.01)
            await a.wait_idle()
            await b.wait_idle()
    assert done.index("now") < done.index("later")
    assert sorted(done) == sorted(["now", "later", *(f"loose{n}" for n in range(6))])


async def test_a_fleet_and_a_single_holder_never_share_a_schema(
    pg_dsn: str, pg_schema: str
) -> None:
    """While a member is open, a single holder's open is refused, and the other way round."""
    single = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    one = member(pg_dsn, pg_schema)
    await one.open()
    try:
        with pytest.raises(inturn.JournalLocked):
            await single.open()
    finally:
        await one.aclose()
    await single.open()
    try:
        with pytest.raises(inturn.JournalLocked):
            await member(pg_dsn, pg_schema).open()
    finally:
        await single.aclose()
    second = member(pg_dsn, pg_schema)
    await second.open()  # free again: members join
    await second.aclose()


async def test_a_fleet_runs_what_a_single_holder_left(pg_dsn: str, pg_schema: str) -> None:
    """Jobs a single holder journaled (no key rows) are claimed and run, in order, by a fleet."""
    single = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await single.open()
    await single.write([Append(job_id=n, key=f"k{n % 2}", data=b"%d" % n) for n in range(1, 7)])
    await single.aclose()
    done: dict[str | None, list[object]] = {}

    async def handler(job: inturn.Job) -> None:
        done.setdefault(job.key, []).append(job.payload)

    with trio.fail_after(30):
        async with inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as sup:
            await sup.send("k0", 8)
    assert done == {"k1": [1, 3, 5], "k0": [2, 4, 6, 8]}


async def test_a_claim_marks_each_heads_start_once(pg_dsn: str, pg_schema: str) -> None:
    """A claim marks the head's attempt: with max_attempts=1 it runs once, as attempt 1, and a
    failure makes it a dead letter with 1 attempt (the claim's mark is that attempt, not another)."""
    attempts: list[tuple[object, int]] = []

    async def handler(job: inturn.Job) -> None:
        attempts.append((job.payload, job.attempt))
        if job.payload == "fails":
            raise ValueError("no")

    retry = inturn.Retry(max_attempts=1)
    with trio.fail_after(30):
        async with inturn.open_supervisor(
            handler, journal=member(pg_dsn, pg_schema), retry=retry
        ) as sup:
            await sup.send("a", "runs")
            failing = await sup.send("b", "fails")
            await sup.wait_idle()
            dead = await sup.job(failing)
    assert sorted(attempts) == [("fails", 1), ("runs", 1)]
    assert dead is not None
    assert (dead.state, dead.attempts) == ("dead", 1)


async def test_two_members_run_batches_of_each_key_in_order(pg_dsn: str, pg_schema: str) -> None:
    """With ``batch``, each key's jobs run once each, in order, one batch at a time fleet-wide;
    a batch that ends a key's work releases it in the same write."""
    ran: dict[str, list[int]] = {}
    running: set[str] = set()
    sizes: list[int] = []

    async def handler(jobs: list[inturn.Job]) -> None:
        key = jobs[0].key
        assert key is not None
        assert {job.key for job in jobs} == {key}
        assert key not in running, f"two batches of {key} at once"
        running.add(key)
        sizes.append(len(jobs))
        await trio.sleep(0.001)
        ran.setdefault(key, []).extend(int(str(job.payload)) for job in jobs)
        running.discard(key)

    with trio.fail_after(60):
        async with (
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema), batch=10) as a,
            inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema), batch=10) as b,
        ):
            for start in range(0, 400, 50):
                await (a if start % 100 else b).send_many(
                    [(f"k{n % 5}", n) for n in range(start, start + 50)]
                )
            await a.wait_idle()
            await b.wait_idle()
    assert ran == {f"k{k}": list(range(k, 400, 5)) for k in range(5)}
    assert max(sizes) == 10
