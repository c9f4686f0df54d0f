"""A member's identity outlives no schema: one whose journal is dropped stops, with an error.

Process ids restart with a schema created again (``processes.id`` is a
sequence of the schema's own), so an id alone does not tell two
incarnations apart: a member left running from before the schema was
dropped would renew the heartbeat of whichever new member got its id, and
that member's keys would never fail over once it died.  Member processes
(`worker`) on one journal with a 2 s heartbeat TTL.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psycopg
import pytest
import trio

import inturn
from inturn.journal import Append, PostgresReader
from inturn.journal._postgres_schema import SCHEMA_VERSION

from ..journal.test_postgres import sql
from ..journal.test_postgres_fencing import TIMEOUT, wait_for
from .test_fencing import Member
from .test_members import member
from .worker import TTL


def drop(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_member_whose_schema_is_dropped_stops_with_journal_gone(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    """Its claims and heartbeat find no tables: its supervisor stops with `JournalGone`."""
    a = Member(pg_dsn, pg_schema, tmp_path, "A")
    try:
        a.joined()
        drop(pg_dsn, pg_schema)
        dropped = time.monotonic()
        assert a.process.wait(timeout=TIMEOUT) == 3, a.err_path.read_text()
        # Its next claim (one poll, 1 s) or heartbeat (TTL / 3) finds out; slack for a loaded machine.
        assert time.monotonic() - dropped < TTL + 2.0
        errors = a.err_path.read_text()
        assert "stopped: JournalGone" in errors
        assert "fleet.claim_failed" not in errors  # it did not carry on
    finally:
        a.stop()


def test_a_leftover_member_does_not_keep_a_new_members_keys_alive(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    """A (stopped meanwhile) outlives its schema; B creates it again, with A's process id, and
    takes key ``k``; A goes on.  B killed mid-job, C reruns the job about one TTL later (A
    renewed nobody's heartbeat), and A stops with `JournalGone`."""
    log = tmp_path / "log"
    a = Member(pg_dsn, pg_schema, tmp_path, "A")
    members = [a]
    try:
        a.joined()
        [(a_id,)] = sql(pg_dsn, f"SELECT id FROM {pg_schema}.processes")
        os.kill(a.process.pid, signal.SIGSTOP)  # so the schema comes back before A looks
        drop(pg_dsn, pg_schema)
        b = Member(pg_dsn, pg_schema, tmp_path, "B", "k:one,k:two")
        members.append(b)
        b.joined()
        assert sql(pg_dsn, f"SELECT id FROM {pg_schema}.processes") == [(a_id,)]  # the same id
        wait_for(log, "start B 1")
        sent = time.monotonic() + TIMEOUT  # B may be sending job 2 still
        while sql(pg_dsn, f"SELECT count(*) FROM {pg_schema}.jobs") != [(2,)]:
            assert time.monotonic() < sent, "B never sent job 2"
            time.sleep(0.01)
        os.kill(a.process.pid, signal.SIGCONT)
        b.process.kill()
        b.process.wait()
        killed = time.monotonic()
        c = Member(pg_dsn, pg_schema, tmp_path, "C")
        members.append(c)
        c.joined()
        took_over = wait_for(log, "start C 1")
        assert took_over - killed < TTL + 2.0
        assert a.process.wait(timeout=TIMEOUT) == 3, a.err_path.read_text()
        assert "stopped: JournalGone" in a.err_path.read_text()
        (tmp_path / "go").touch()
        wait_for(log, "end C 2")
        assert log.read_text().splitlines() == [
            "start B 1",
            "start C 1",
            "end C 1",
            "start C 2",
            "end C 2",
        ]
        assert PostgresReader(pg_dsn, schema=pg_schema).keys(now=0.0) == []
    finally:
        for member in members:
            if member.process.poll() is None:
                os.kill(member.process.pid, signal.SIGCONT)
            member.stop()


async def test_a_version_4_journal_is_upgraded_in_place(pg_dsn: str, pg_schema: str) -> None:
    """A schema of version 4 (incarnations told apart by id only) gains ``processes.incarnation``
    when a member opens it; the job it holds runs."""
    writer = member(pg_dsn, pg_schema)
    await writer.open()
    [job_id] = await writer.ids(1)
    await writer.write([Append(job_id=job_id, key="k", data=inturn.JSONCodec().encode("old"))])
    await writer.aclose()
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.processes DROP COLUMN incarnation")  # version 4's table
    # and no id sequence, nor places at commit (version 6): ids were counted in meta
    sql(pg_dsn, f"DROP TABLE {pg_schema}.unplaced")
    sql(pg_dsn, f"DROP FUNCTION {pg_schema}.place_enqueued()")
    sql(pg_dsn, f"DROP SEQUENCE {pg_schema}.job_ids")
    # and an inbox that took no jobs to send (version 7)
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.commands DROP COLUMN items, DROP COLUMN data")
    # and no audit trail (version 8)
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.commands DROP COLUMN actor")
    sql(pg_dsn, f"DROP TABLE {pg_schema}.audit")
    # and no heartbeat renewals recorded (version 9)
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.processes DROP COLUMN renewed_at")
    # and no finished jobs counted, no keys indexed by name (version 10)
    sql(pg_dsn, f"DROP TABLE {pg_schema}.finished")
    sql(
        pg_dsn,
        f"DROP INDEX {pg_schema}.jobs_started, {pg_schema}.jobs_by_name, {pg_schema}.halted_by_name",
    )
    # and no recurring schedules (version 11)
    sql(pg_dsn, f"DROP TABLE {pg_schema}.schedules")
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.jobs DROP COLUMN trace")  # and version 12's
    sql(pg_dsn, f"UPDATE {pg_schema}.meta SET version = 4, high_id = {job_id}")
    ran: list[object] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.payload)
        await trio.lowlevel.checkpoint()

    with trio.fail_after(30):
        async with inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as sup:
            assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]
            [(incarnation,)] = sql(pg_dsn, f"SELECT incarnation FROM {pg_schema}.processes")
            assert incarnation is not None
            await sup.wait_idle()
    assert ran == ["old"]


async def test_a_leftover_member_neither_writes_nor_hands_back_what_a_new_one_owns(
    pg_dsn: str, pg_schema: str
) -> None:
    """A joined a schema since dropped; B, in the schema created again, has A's id and owns
    ``k``: A's write raises `JournalGone`, and its `aclose` leaves B's row and key alone."""
    a = member(pg_dsn, pg_schema)
    await a.open()
    drop(pg_dsn, pg_schema)
    b = member(pg_dsn, pg_schema)
    await b.open()
    try:
        job_id, next_id = await b.ids(2)
        await b.write([Append(job_id=job_id, key="k", data=b"1")])
        [claim], _ = await b.claim(10)
        assert claim.key == "k"
        owners = f"SELECT id, (SELECT owner FROM {pg_schema}.keys) FROM {pg_schema}.processes"
        [(b_id, owner)] = sql(pg_dsn, owners)
        assert b_id == owner == a._process  # the same id
        with pytest.raises(inturn.JournalGone):
            await a.write([Append(job_id=next_id, key="k", data=b"2")])
        await a.aclose()
        assert sql(pg_dsn, owners) == [(b_id, b_id)]
        await b.write([Append(job_id=next_id, key="k", data=b"2")])
    finally:
        await b.aclose()


async def test_a_leftover_holder_neither_writes_nor_frees_a_new_holders_journal(
    pg_dsn: str, pg_schema: str
) -> None:
    """The same for single holders: B, holding the schema created again, has A's id and
    epoch; A's write raises `JournalGone`, and its `aclose` leaves the journal B's."""
    a = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await a.open()
    drop(pg_dsn, pg_schema)
    b = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await b.open()
    try:
        holder = f"SELECT owner, epoch FROM {pg_schema}.meta"
        assert sql(pg_dsn, holder) == [(a._process, a.epoch)]  # B's, the same as A's
        with pytest.raises(inturn.JournalGone):
            await a.write([Append(job_id=1, key="k", data=b"1")])
        await a.aclose()
        assert sql(pg_dsn, holder) == [(b._process, b.epoch)]
        await b.write([Append(job_id=1, key="k", data=b"1")])
    finally:
        await b.aclose()


async def test_the_supervisor_of_a_member_whose_schema_is_dropped_raises_journal_gone(
    pg_dsn: str, pg_schema: str
) -> None:
    """``async with open_supervisor(...)`` raises `JournalGone` (not a group): the body is
    cancelled, and the message says what happened."""

    async def handler(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    async def run() -> None:
        async with inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)):
            await trio.to_thread.run_sync(drop, pg_dsn, pg_schema)
            await trio.sleep_forever()

    with trio.fail_after(30), pytest.raises(inturn.JournalGone, match="dropped"):
        await run()
