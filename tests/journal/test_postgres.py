"""PostgresJournal and PostgresReader: what only a journal on a server can get wrong."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
from typing import Any

import psycopg
import pytest
import trio

import inturn
from inturn.journal import Append, Audit, Complete, Discard, PostgresReader
from inturn.journal._postgres_schema import SCHEMA_VERSION
from inturn.testing import JournalConformance, OperatorReadsConformance


class TestPostgresJournalConformance(JournalConformance, OperatorReadsConformance):
    @pytest.fixture
    def journal(self, pg_dsn: str, pg_schema: str) -> inturn.PostgresJournal:
        return inturn.PostgresJournal(pg_dsn, schema=pg_schema)


def sql(dsn: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    """Run *statement* on a connection of the test's own; its rows, if it returns any."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement, params or None)
        return cursor.fetchall() if cursor.description else []


def before_version_10(dsn: str, schema: str) -> None:
    """Undo versions 10 to 12 (finished jobs counted, keys indexed by name; recurring
    schedules; jobs' trace contexts) in *schema*."""
    for statement in (
        f"ALTER TABLE {schema}.jobs DROP COLUMN trace",
        f"DROP TABLE {schema}.schedules",
        f"DROP TABLE {schema}.finished",
        f"DROP INDEX {schema}.jobs_started, {schema}.jobs_by_name, {schema}.halted_by_name",
    ):
        sql(dsn, statement)


def tables(dsn: str, schema: str) -> list[str]:
    rows = sql(
        dsn,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
        schema,
    )
    return [row[0] for row in rows]


async def test_open_creates_the_schema_and_its_tables(pg_dsn: str, pg_schema: str) -> None:
    """A fresh schema name: open creates it, with the journal's tables and version."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    assert tables(pg_dsn, pg_schema) == []
    await journal.open()
    await journal.aclose()
    assert tables(pg_dsn, pg_schema) == [
        "audit",
        "commands",
        "finished",
        "halted",
        "jobs",
        "keys",
        "meta",
        "processes",
        "schedules",
        "steps",
        "uniques",
        "unplaced",
    ]
    assert sql(pg_dsn, f"SELECT version, high_id, owner FROM {pg_schema}.meta") == [
        (SCHEMA_VERSION, 0, None)
    ]


async def test_ids_never_repeat_after_the_newest_job_is_deleted(
    pg_dsn: str, pg_schema: str
) -> None:
    """Completing (deleting) the newest job does not let its id be handed out again."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    await journal.write(
        [Append(job_id=1, key="k", data=b"1"), Append(job_id=2, key="k", data=b"2")]
    )
    await journal.write([Complete(2)])
    await journal.aclose()
    recovery = await journal.open()
    try:
        assert recovery.next_id == 3
        with pytest.raises(inturn.JournalError, match="used before"):
            await journal.write([Append(job_id=2, key="k", data=b"again")])
    finally:
        await journal.aclose()


async def test_a_second_opener_gets_journal_locked_until_the_first_closes(
    pg_dsn: str, pg_schema: str
) -> None:
    """Two journals on one schema at once: the second raises JournalLocked; after aclose it opens."""
    first = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await first.open()
    second = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    with pytest.raises(inturn.JournalLocked) as exc_info:
        await second.open()
    assert pg_schema in str(exc_info.value)
    await first.aclose()
    await second.open()
    await second.aclose()


async def test_journals_in_two_schemas_of_one_database_are_independent(
    pg_dsn: str, pg_schema: str
) -> None:
    """Each schema is a journal of its own: both open at once, and neither sees the other's jobs."""
    other = pg_schema + "_b"
    try:
        first = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
        second = inturn.PostgresJournal(pg_dsn, schema=other)
        await first.open()
        await second.open()
        await first.write([Append(job_id=1, key="k", data=b"first")])
        await first.aclose()
        await second.aclose()
        assert [job.data for job in (await first.open()).jobs] == [b"first"]
        assert list((await second.open()).jobs) == []
        await first.aclose()
        await second.aclose()
    finally:
        sql(pg_dsn, f"DROP SCHEMA IF EXISTS {other} CASCADE")


HOLDER = """
import sys, trio, inturn
async def main():
    journal = inturn.PostgresJournal(sys.argv[1], schema=sys.argv[2], lease_ttl=1.0)
    await journal.open()
    print("held", flush=True)
    await trio.sleep_forever()
trio.run(main)
"""


async def test_the_lock_of_a_killed_holder_is_freed_by_the_server(
    pg_dsn: str, pg_schema: str
) -> None:
    """SIGKILL the process holding a journal: another process opens it once the dead one's lease ran out."""
    holder = subprocess.Popen(  # noqa: ASYNC220 (a moment's block, before any other task runs)
        [sys.executable, "-c", HOLDER, pg_dsn, pg_schema], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
        with pytest.raises(inturn.JournalLocked):
            await journal.open()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    with trio.fail_after(10):
        while True:  # the lease (1 s) runs out
            try:
                await journal.open()
                break
            except inturn.JournalLocked:
                await trio.sleep(0.05)
    await journal.aclose()


FOREIGN = [
    "CREATE TABLE {schema}.invoices (id integer)",
    "CREATE TABLE {schema}.jobs (id integer)",
    # an inturn layout of a version this code does not know
    "CREATE TABLE {schema}.meta (version integer, high_id bigint);"
    " INSERT INTO {schema}.meta VALUES (99, 0);"
    " CREATE TABLE {schema}.jobs (id bigint); CREATE TABLE {schema}.halted (key text);"
    " CREATE TABLE {schema}.commands (id bigint)",
]


@pytest.mark.parametrize("setup", FOREIGN)
async def test_another_schema_is_refused_untouched(pg_dsn: str, pg_schema: str, setup: str) -> None:
    """A schema holding other tables, or a journal of an unknown version, raises JournalCorrupt and is not altered."""
    sql(pg_dsn, f"CREATE SCHEMA {pg_schema}")
    sql(pg_dsn, setup.format(schema=pg_schema))
    before = tables(pg_dsn, pg_schema)
    with pytest.raises(
        inturn.JournalCorrupt, match=r"not an inturn journal|unknown schema version"
    ):
        await inturn.PostgresJournal(pg_dsn, schema=pg_schema).open()
    with pytest.raises(inturn.JournalCorrupt):
        PostgresReader(pg_dsn, schema=pg_schema).keys(now=0.0)
    assert tables(pg_dsn, pg_schema) == before


@pytest.mark.parametrize(
    ("dsn", "schema", "error"),
    [
        (b"postgresql://", "inturn", TypeError),
        ("", "inturn", ValueError),
        ("postgresql://", 7, TypeError),
        ("postgresql://", "", ValueError),
        ("postgresql://", "Inturn", ValueError),
        ("postgresql://", "1st", ValueError),
        ("postgresql://", "pg_inturn", ValueError),
        ("postgresql://", "a; DROP TABLE x", ValueError),
        ("postgresql://", "a" * 64, ValueError),
    ],
)
def test_bad_arguments_raise_before_anything_connects(
    dsn: object, schema: object, error: type[Exception]
) -> None:
    """A DSN that is not a non-empty str, or a schema that is not a plain lowercase name, is refused at once."""
    with pytest.raises(error):
        inturn.PostgresJournal(dsn, schema=schema)
    with pytest.raises(error):
        PostgresReader(dsn, schema=schema)


async def test_an_unreachable_server_is_a_journal_error_without_the_password() -> None:
    """Nobody listens on the port: open raises JournalError naming the server, never the password."""
    dsn = "postgresql://someone:s3cret-pw@127.0.0.1:1/test"
    with pytest.raises(inturn.JournalError) as exc_info:
        await inturn.PostgresJournal(dsn).open()
    assert "127.0.0.1:1/test" in str(exc_info.value)
    assert "s3cret-pw" not in str(exc_info.value)
    with pytest.raises(inturn.JournalError) as reader_error:
        PostgresReader(dsn).keys(now=0.0)
    assert "s3cret-pw" not in str(reader_error.value)


def terminate(dsn: str, schema: str) -> int:
    """End the server sessions of inturn's journals on *schema*; how many there were."""
    rows = sql(
        dsn,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        f"inturn:{schema}",
    )
    return len(rows)


async def test_a_connection_dead_before_libpq_knows_is_replaced(
    pg_dsn: str, pg_schema: str
) -> None:
    """A write's BEGIN fails on a socket the server reset, while libpq still thinks it open.

    Seen once in CI: psycopg raised "connection socket closed" from a
    write's ``BEGIN`` after the server ended the session, the connection not
    yet `closed`, and the write was refused though nothing was committed.
    The race would not happen on demand here (not even with the backend
    stopped by SIGSTOP while its session was ended and the BEGIN arrived:
    libpq read the server's goodbye first every time), so the journal's
    fault hook shuts the connection's socket for real and raises what
    psycopg's waiting code raises then.  The write goes through on a new
    connection: nothing was committed.
    """
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    try:
        await journal.write([Append(job_id=1, key="k", data=b"before")])
        epoch = journal.epoch

        reset_at: list[str] = []

        def reset(step: str) -> None:
            if step == "begin":
                journal._fault_hook = None
                reset_at.append(step)
                assert journal._worker is not None
                fileno = os.dup(journal._worker.connection.fileno())
                with socket.socket(fileno=fileno) as shared:
                    shared.shutdown(socket.SHUT_RDWR)
                raise psycopg.OperationalError("connection socket closed")

        journal._fault_hook = reset
        await journal.write([Append(job_id=2, key="k", data=b"after")])
        assert reset_at == ["begin"]
        assert [job.data for job in await journal.load("k", 0, 10)] == [b"before", b"after"]
        assert journal.epoch == epoch
    finally:
        await journal.aclose()


async def test_a_lost_connection_is_replaced_under_the_same_lease(
    pg_dsn: str, pg_schema: str
) -> None:
    """The server ends the journal's connection between transactions: the next write and read reconnect and succeed, at the same epoch; nothing is lost."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    try:
        await journal.write([Append(job_id=1, key="k", data=b"before")])
        epoch = journal.epoch
        assert terminate(pg_dsn, pg_schema) == 1
        await journal.write([Append(job_id=2, key="k", data=b"after")])
        assert terminate(pg_dsn, pg_schema) == 1
        assert [job.data for job in await journal.load("k", 0, 10)] == [b"before", b"after"]
        assert journal.epoch == epoch
    finally:
        await journal.aclose()
    recovery = await journal.open()  # closing handed the lease back: no wait
    await journal.aclose()
    assert [job.id for job in recovery.jobs] == [1]
    assert recovery.backlog["k"].count == 1


async def test_a_connection_closed_after_a_failed_rollback_is_replaced(
    pg_dsn: str, pg_schema: str
) -> None:
    """A ROLLBACK that fails closes the connection (`_rollback`): closed, but not *broken* in
    psycopg's terms (that happens when the server ends a session with a FATAL error that
    psycopg reads before it sees the socket close).  The next write replaces it."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    try:
        await journal.write([Append(job_id=1, key="k", data=b"before")])
        assert journal._worker is not None
        connection = journal._worker.connection
        connection.close()
        assert connection.closed
        assert not connection.broken
        await journal.write([Append(job_id=2, key="k", data=b"after")])
        assert [job.data for job in await journal.load("k", 0, 10)] == [b"before", b"after"]
    finally:
        await journal.aclose()


async def test_a_connection_lost_during_commit_is_settled_by_the_token(
    pg_dsn: str, pg_schema: str
) -> None:
    """The connection ends just before COMMIT: the journal reconnects, finds its token absent, and refuses the batch; nothing was stored."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    try:

        def end_session(step: str) -> None:
            if step == "commit":
                terminate(pg_dsn, pg_schema)

        journal._fault_hook = end_session
        with pytest.raises(inturn.JournalError, match="commit failed"):
            await journal.write([Append(job_id=1, key="k", data=b"lost")])
        journal._fault_hook = None
        await journal.write([Append(job_id=2, key="k", data=b"stored")])
        assert [job.id for job in await journal.load("k", 0, 10)] == [2]
        # and after a commit, the token in meta is this transaction's own
        (token,) = sql(pg_dsn, f"SELECT token FROM {pg_schema}.meta")[0]
        assert token == journal._token
    finally:
        await journal.aclose()


async def test_group_commit_takes_concurrent_writes_in_fewer_transactions(
    pg_dsn: str, pg_schema: str
) -> None:
    """100 concurrent single-job writes commit in fewer than 100 transactions, and all of them land."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    ids = itertools.count(1)

    async def send() -> None:
        job_id = next(ids)  # ids rise in the order the writes are queued
        await journal.write([Append(job_id=job_id, key=f"k{job_id}", data=b"")])

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(send)
        assert journal.commits < 100
        assert len(await journal.keys(limit=1000, now=0.0)) == 100
    finally:
        await journal.aclose()


async def test_the_reader_reads_a_held_journal_and_creates_nothing(
    pg_dsn: str, pg_schema: str
) -> None:
    """PostgresReader sees what the holder committed; on an empty schema it raises and creates no table."""
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    with pytest.raises(inturn.JournalError, match="no journal here"):
        reader.keys(now=0.0)
    assert tables(pg_dsn, pg_schema) == []
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    try:
        await journal.write([Append(job_id=1, key="k", data=b"x"), Discard(1, "boom")])
        [dead] = reader.dead_letters()
        assert (dead.id, dead.last_error) == (1, "boom")
        assert reader.job(1) == dead
        assert reader.keys(now=0.0) == []
    finally:
        await journal.aclose()


V1 = """
CREATE SCHEMA {s};
CREATE TABLE {s}.meta (version integer NOT NULL, high_id bigint NOT NULL DEFAULT 0);
CREATE TABLE {s}.jobs (id bigint PRIMARY KEY, key text, unique_key text, data bytea NOT NULL,
    attempts integer NOT NULL DEFAULT 0, state text NOT NULL DEFAULT 'pending',
    error text, accepted_at double precision NOT NULL, finished_at double precision,
    retry_at double precision, stopped_during integer);
CREATE TABLE {s}.halted (key text PRIMARY KEY);
CREATE TABLE {s}.commands (id bigserial PRIMARY KEY, verb text NOT NULL, job_id bigint,
    key text, older_than double precision, submitted_at double precision NOT NULL,
    taken_at double precision, answered_at double precision, answer text);
INSERT INTO {s}.meta VALUES (1, 7);
INSERT INTO {s}.jobs (id, key, data, accepted_at) VALUES (7, 'k', 'old', 0);
"""
"""A journal of schema version 1 (held by an advisory lock, no lease)."""


async def test_a_version_1_journal_is_upgraded_in_place(pg_dsn: str, pg_schema: str) -> None:
    """Opening a version 1 schema adds the lease's table and columns, and keeps every job and the id counter."""
    sql(pg_dsn, V1.format(s=pg_schema))
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    recovery = await journal.open()
    await journal.aclose()
    assert ([job.data for job in recovery.jobs], recovery.next_id) == ([b"old"], 8)
    assert "processes" in tables(pg_dsn, pg_schema)
    assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]


V2 = (
    """
CREATE SCHEMA {s};
SET search_path TO {s};
"""
    + """CREATE TABLE meta (
    version integer NOT NULL,
    high_id bigint NOT NULL DEFAULT 0,
    owner bigint,
    epoch bigint NOT NULL DEFAULT 0,
    token bigint
);
CREATE TABLE processes (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL
);
CREATE TABLE jobs (
    id bigint PRIMARY KEY,
    key text,
    unique_key text,
    data bytea NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
    error text,
    accepted_at double precision NOT NULL,
    finished_at double precision,
    retry_at double precision,
    stopped_during integer
);
CREATE UNIQUE INDEX jobs_unique_pending ON jobs (unique_key)
    WHERE state = 'pending' AND unique_key IS NOT NULL;
CREATE INDEX jobs_pending_by_key ON jobs (key, id) WHERE state = 'pending';
CREATE INDEX jobs_dead ON jobs (id) WHERE state = 'dead';
CREATE INDEX jobs_dead_by_key ON jobs (key, id) WHERE state = 'dead';
CREATE TABLE halted (key text PRIMARY KEY);
CREATE TABLE commands (
    id bigserial PRIMARY KEY,
    verb text NOT NULL,
    job_id bigint,
    key text,
    older_than double precision,
    submitted_at double precision NOT NULL,
    taken_at double precision,
    answered_at double precision,
    answer text
);
"""
    + """
INSERT INTO meta (version, high_id) VALUES (2, 4);
INSERT INTO jobs (id, key, unique_key, data, state, error, accepted_at, finished_at)
    VALUES (1, 'k', 'u-1', 'one', 'dead', 'ValueError: one', 0, 1);
INSERT INTO jobs (id, key, unique_key, data, accepted_at) VALUES (2, 'k', 'u-2', 'two', 0);
INSERT INTO jobs (id, key, data, accepted_at) VALUES (4, 'p', 'four', 0);
INSERT INTO halted VALUES ('k'), ('p'), ('idle');
"""
)
"""A journal of schema version 2, its tables as inturn made them (commit 9ec8634):
key "k" halted by the discard of job 1, job 2 queued behind it; "p" paused with
job 4; "idle" paused with no jobs."""


async def test_a_version_2_journal_is_upgraded_in_place(pg_dsn: str, pg_schema: str) -> None:
    """Opening a version 2 schema records what halts a key from then on (version 3); its jobs, dead letters and halts are kept, naming no job; a reader reads version 2 as it is."""
    sql(pg_dsn, V2.format(s=pg_schema))
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    assert [(k.key, k.halted, k.halted_by) for k in reader.keys(now=0.0)] == [
        ("k", True, None),
        ("p", True, None),
        ("idle", True, None),
    ]
    assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(2,)]
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    recovery = await journal.open()
    try:
        assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]
        assert ([job.id for job in recovery.jobs], recovery.next_id) == ([2, 4], 5)
        assert recovery.halted == frozenset({"k", "p", "idle"})
        [dead] = await journal.dead_letters()
        assert (dead.id, dead.unique, dead.last_error) == (1, "u-1", "ValueError: one")
        with pytest.raises(inturn.DuplicateError) as caught:  # still held by job 2
            await journal.write([Append(job_id=5, key="x", data=b"", unique="u-2")])
        assert (caught.value.job_id, caught.value.until) == (2, None)
        await journal.write([Append(job_id=5, key="x", data=b"", unique="u-1")])  # free
        await journal.write([Discard(4, "E: four", halt=True)])
        keys = await journal.keys(now=0.0)
        assert [(k.key, k.halted_by, k.halt_error) for k in keys] == [
            ("k", None, None),
            ("x", None, None),
            ("idle", None, None),
            ("p", 4, "E: four"),
        ]
    finally:
        await journal.aclose()
    assert [k.key for k in reader.keys(now=0.0)] == ["k", "x", "idle", "p"]


async def test_a_version_6_journal_gains_the_inbox_columns_of_sends(
    pg_dsn: str, pg_schema: str
) -> None:
    """Opening a version 6 schema adds ``commands.items`` and ``commands.data`` (version 7,
    what `Operator.send` sends through the inbox); its jobs are kept."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b'"one"')])
    await journal.aclose()
    sql(
        pg_dsn,
        f"ALTER TABLE {pg_schema}.commands DROP COLUMN items, DROP COLUMN data, DROP COLUMN actor",
    )
    sql(pg_dsn, f"DROP TABLE {pg_schema}.audit")
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.processes DROP COLUMN renewed_at")  # (version 9's)
    before_version_10(pg_dsn, pg_schema)
    sql(pg_dsn, f"UPDATE {pg_schema}.meta SET version = 6")
    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [1]
        assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]
        columns = sql(
            pg_dsn,
            "SELECT column_name, data_type FROM information_schema.columns"
            f" WHERE table_schema = '{pg_schema}' AND table_name = 'commands'"
            " AND column_name IN ('items', 'data') ORDER BY column_name",
        )
        assert columns == [("data", "bytea"), ("items", "text")]
    finally:
        await journal.aclose()


async def test_a_version_7_journal_gains_the_audit_trail(pg_dsn: str, pg_schema: str) -> None:
    """Opening a version 7 schema adds ``audit`` and ``commands.actor`` (version 8); its jobs
    are kept, and the reader reads its trail as empty before."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b'"one"')])
    await journal.aclose()
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.commands DROP COLUMN actor")
    sql(pg_dsn, f"DROP TABLE {pg_schema}.audit")
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.processes DROP COLUMN renewed_at")  # (version 9's)
    before_version_10(pg_dsn, pg_schema)
    sql(pg_dsn, f"UPDATE {pg_schema}.meta SET version = 7")
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    assert reader.audit() == []
    assert [info.id for info in reader.jobs("k")] == [1]
    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [1]
        assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]
        await journal.write([Audit(actor="ann", verb="pause", outcome="done", key="k")])
    finally:
        await journal.aclose()
    [entry] = reader.audit(key="k")
    assert (entry.actor, entry.verb, entry.outcome) == ("ann", "pause", "done")


async def test_a_version_9_journal_gains_the_dashboard_counters_and_indexes(
    pg_dsn: str, pg_schema: str
) -> None:
    """Opening a version 9 schema adds ``finished`` and the indexes of keys by name (version
    10); its jobs are kept; a reader reads version 9 as it is, with no throughput, and the
    journal counts the completions it writes from then on."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    at = 1_900_000_000.0
    await journal.open()
    await journal.write([Append(job_id=n, key=f"k{n}", data=b"") for n in (1, 2, 3)], now=at)
    await journal.write([Complete(1)], now=at)
    await journal.aclose()
    before_version_10(pg_dsn, pg_schema)
    sql(pg_dsn, f"UPDATE {pg_schema}.meta SET version = 9")
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    old = reader.overview(now=at)
    assert (old.waiting, old.jobs, sum(minute.completed for minute in old.minutes)) == (2, 2, 0)
    assert [info.key for info in reader.keys_by_name(now=at)] == ["k2", "k3"]
    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [2, 3]
        assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]
        indexes = sql(
            pg_dsn,
            f"SELECT indexname FROM pg_indexes WHERE schemaname = '{pg_schema}'"
            " AND indexname IN ('jobs_started', 'jobs_by_name', 'halted_by_name')",
        )
        assert len(indexes) == 3
        await journal.write([Complete(2), Discard(3, "E")], now=at)
    finally:
        await journal.aclose()
    new = reader.overview(now=at)
    assert (new.minutes[-1].completed, new.minutes[-1].discarded, new.jobs, new.dead) == (
        1,
        1,
        0,
        1,
    )


async def test_fleet_members_count_finished_jobs_in_rows_of_their_own(
    pg_dsn: str, pg_schema: str
) -> None:
    """Two journals writing completions in one minute each upsert a row of their own server
    process (never one shared row), and overview() sums them."""
    at = 1_900_000_000.0
    first = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await first.open()
    await first.write([Append(job_id=n, key=None, data=b"") for n in range(1, 5)], now=at)
    await first.write([Complete(1), Complete(2)], now=at)
    await first.write([Complete(3)], now=at + 1)  # the same minute, the same row
    await first.aclose()
    second = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await second.open()
    try:
        await second.write([Discard(4, "E")], now=at + 2)
        rows = sql(pg_dsn, f"SELECT writer, completed, discarded FROM {pg_schema}.finished")
        assert sorted((c, d) for _, c, d in rows) == [(0, 1), (3, 0)]
        assert len({writer for writer, _, _ in rows}) == 2
        minute = (await second.overview(now=at)).minutes[-1]
        assert (minute.start, minute.completed, minute.discarded) == (at - at % 60, 3, 1)
    finally:
        await second.aclose()


async def test_two_transactions_taking_one_key_cannot_both_win(pg_dsn: str, pg_schema: str) -> None:
    """The reservation is the primary key's to decide: of two transactions taking one ended reservation at once, the second waits for the first and then finds it taken."""
    from inturn.journal._uniques import Uniques

    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    await journal.aclose()  # the tables, empty
    sql(pg_dsn, f"INSERT INTO {pg_schema}.uniques VALUES ('u', 1, 10.0)")  # ended at 10
    uniques = Uniques("%s")
    first = psycopg.connect(pg_dsn, autocommit=True)
    second = psycopg.connect(pg_dsn, autocommit=True)
    try:
        for connection in (first, second):
            connection.execute(f"SET search_path TO {pg_schema}")
            connection.execute("BEGIN")
        assert uniques.reserve(first, "u", 2, 20.0) is None  # takes it over, uncommitted

        async def take_second() -> inturn.DuplicateError | None:
            return await trio.to_thread.run_sync(uniques.reserve, second, "u", 3, 20.0)

        async with trio.open_nursery() as nursery:
            results: list[inturn.DuplicateError | None] = []

            async def run() -> None:
                results.append(await take_second())

            nursery.start_soon(run)
            await trio.sleep(0.3)
            assert results == []  # it waits on the row
            first.execute("COMMIT")
        [refused] = results
        assert refused is not None
        assert (refused.job_id, refused.until) == (2, None)
        second.execute("ROLLBACK")
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("ttl", "error"), [("10", TypeError), (True, TypeError), (0.5, ValueError), (1e6, ValueError)]
)
def test_a_bad_lease_ttl_is_refused(ttl: object, error: type[Exception]) -> None:
    """lease_ttl is a number of seconds from 1 to a day."""
    with pytest.raises(error, match="lease_ttl"):
        inturn.PostgresJournal("postgresql://", lease_ttl=ttl)  # type: ignore[arg-type]


async def test_a_live_holder_keeps_the_journal_and_each_takeover_raises_the_epoch(
    pg_dsn: str, pg_schema: str
) -> None:
    """While the holder renews its lease, others get JournalLocked; after it closes, the next holder's epoch is higher."""
    first = inturn.PostgresJournal(pg_dsn, schema=pg_schema, lease_ttl=1.0)
    await first.open()
    try:
        await trio.sleep(1.5)  # longer than the lease: the holder's thread renews it
        with pytest.raises(inturn.JournalLocked):
            await inturn.PostgresJournal(pg_dsn, schema=pg_schema).open()
        await first.write([Append(job_id=1, key="k", data=b"")])
    finally:
        await first.aclose()
    second = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await second.open()
    await second.aclose()
    assert second.epoch == first.epoch + 1


async def test_a_supervisor_rides_out_its_sessions_being_ended(pg_dsn: str, pg_schema: str) -> None:
    """pg_terminate_backend on the journal's session, over and over, while 300 jobs run on 10 keys: none is lost, each key keeps its order.

    A send is refused (`JournalError`, nothing stored) when the server ends
    every try of its group commit (`_TRIES` of them, each on a new
    connection), which sessions ended every 20 ms can do on a loaded machine:
    the producer sends it again, as the docs tell an application to.  A
    completion refused that way leaves its job to run again (at least once):
    a rerun, the same job right after itself, is allowed; the same payload
    under two ids (a refused send that stored its job) is not."""
    ran: dict[str, list[tuple[int, int]]] = {}  # key -> (payload, job id) of each run

    async def handler(job: inturn.Job) -> None:
        assert job.key is not None
        ran.setdefault(job.key, []).append((int(str(job.payload)), job.id))
        await trio.lowlevel.checkpoint()

    ended = 0
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    with trio.fail_after(60):
        async with inturn.open_supervisor(handler, journal=journal) as sup:

            async def end_sessions() -> None:
                nonlocal ended
                for _ in range(20):
                    ended += await trio.to_thread.run_sync(terminate, pg_dsn, pg_schema)
                    await trio.sleep(0.02)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(end_sessions)
                for n in range(300):
                    while True:
                        try:
                            await sup.send(f"k{n % 10}", n)
                            break
                        except inturn.JournalError:
                            await trio.sleep(0.01)  # refused: nothing stored, send it again
            await sup.wait_idle()
    assert ended >= 5  # sessions were ended while jobs ran
    once = {
        key: [
            payload
            for n, (payload, job_id) in enumerate(runs)
            if n == 0 or runs[n - 1] != (payload, job_id)
        ]
        for key, runs in ran.items()
    }
    assert once == {f"k{k}": list(range(k, 300, 10)) for k in range(10)}


async def test_an_idle_supervisor_keeps_its_lease_while_it_polls_for_commands(
    pg_dsn: str, pg_schema: str
) -> None:
    """Regression: reads every 0.1 s (the command inbox) kept the heartbeat from running, and an idle holder lost its lease after lease_ttl."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema, lease_ttl=1.0, poll_interval=0.1)
    done: list[object] = []

    async def handler(job: inturn.Job) -> None:
        done.append(job.payload)

    async with inturn.open_supervisor(handler, journal=journal) as sup:
        await trio.sleep(2.5)  # idle, in real time, for more than two leases
        await sup.send("k", "still holding")
        await sup.wait_idle()
    assert done == ["still holding"]
