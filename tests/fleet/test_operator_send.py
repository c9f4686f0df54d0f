"""`Operator.send` on a fleet: a member that claims nothing, so it sends and runs nothing.

A producer used to be a full member: it claimed keys and ran jobs it sent,
and leaving its block waited for the keys it owned (issue 46).  Through
`inturn.operate` it journals each job for the fleet, and owns nothing.
"""

from __future__ import annotations

import pytest
import trio

import inturn
from inturn.testing import Recorder

from .test_members import member

GUARD = 60.0


async def test_a_producer_sends_and_the_fleet_runs_in_order(pg_dsn: str, pg_schema: str) -> None:
    """Sent with no other member up, the jobs wait unowned and unstarted; a member started later
    runs every one, in order per key."""
    keys = [f"k{n}" for n in range(10)]
    with trio.fail_after(GUARD):
        async with inturn.operate(member(pg_dsn, pg_schema)) as op:
            assert not op.live
            ids = await op.send_many([(keys[n % 10], n) for n in range(200)])
            ids.append(await op.send("k0", 200))
            infos = await op.keys(limit=1000)
            assert sorted(info.key for info in infos) == sorted(keys)
            assert {(info.owner, info.head_state, info.head_attempt) for info in infos} == {
                (None, "queued", 0)
            }
        assert ids == sorted(ids)
        recorder = Recorder()
        async with inturn.open_supervisor(recorder, journal=member(pg_dsn, pg_schema)) as sup:
            await sup.wait_idle()
    ran = {key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()}
    assert ran == {key: [n for n in range(201) if keys[n % 10] == key] for key in keys}


async def test_a_producer_beside_a_running_member_never_runs_a_job(
    pg_dsn: str, pg_schema: str
) -> None:
    """With a worker member up, everything the producer sends runs there; the producer's block
    ends as soon as its sends are journaled, while the worker's key is still blocked (were it
    to wait for keys, as a full member does, it would wait for ever: the guard fails)."""
    release = trio.Event()
    recorder = Recorder()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "hold":
            await release.wait()
        await recorder(job)

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as worker:
            await worker.send("k", "hold")
            async with inturn.operate(member(pg_dsn, pg_schema)) as op:
                await op.send_many([("k", "k1"), ("j", "j1"), ("k", "k2")])
                await op.send("j", "j2")
                # "k" is held by its first job ("j" may be running too, or done)
                assert "k" in {info.key for info in await op.keys(state="running")}
            release.set()  # only now: the producer's block did not wait for "k"
            await worker.wait_idle()
    assert {
        key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()
    } == {
        "k": ["hold", "k1", "k2"],
        "j": ["j1", "j2"],
    }


async def test_a_producers_refused_sends_write_nothing(pg_dsn: str, pg_schema: str) -> None:
    """A unique key another job holds refuses a send, and a send_many whole; bad input is
    refused before any write."""
    with trio.fail_after(GUARD):
        async with inturn.operate(member(pg_dsn, pg_schema)) as op:
            held = await op.send("k", "k1", unique="u")
            with pytest.raises(inturn.DuplicateError) as caught:
                await op.send("r", "r1", unique="u")
            assert caught.value.job_id == held
            with pytest.raises(inturn.DuplicateError):
                await op.send_many([("r", "r1"), inturn.Item("r", "r2", unique="u")])
            with pytest.raises(inturn.InvalidKey):
                await op.send_many([("r", "r1"), ("", "r2")])
            with pytest.raises(inturn.EncodeError):
                await op.send("r", {1: 2})
            assert await op.jobs("r") == []
            assert [info.key for info in await op.keys()] == ["k"]
