"""The trace column's migration: SQLite 8 or 9 to 10, PostgreSQL 10 or 11 to 12, in place.

A file or schema of the version before (or the one before that, without the recurring
schedules' table) keeps its jobs, which read with no
trace context (from the journal that upgrades it, and from a reader that
reads it as it is); jobs written after the upgrade keep theirs.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

import inturn
from inturn.journal import Append, PostgresReader, SQLiteReader

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("version", "undo"),
    [(9, ()), (8, ("DROP TABLE inturn_schedules",))],
)
async def test_an_older_sqlite_file_gains_the_trace_column(
    tmp_path: Path, version: int, undo: tuple[str, ...]
) -> None:
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    await journal.aclose()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("ALTER TABLE inturn_jobs DROP COLUMN trace")
        for statement in undo:
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {version}")
        connection.commit()
    [before] = SQLiteReader(path).jobs("k")
    assert (before.id, before.trace) == (1, None)
    recovery = await journal.open()
    try:
        assert [(job.id, job.trace) for job in recovery.jobs] == [(1, None)]
        await journal.write([Append(job_id=2, key="k", data=b"2", trace=TRACE)])
    finally:
        await journal.aclose()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (10,)
    assert [info.trace for info in SQLiteReader(path).jobs("k")] == [None, TRACE]


@pytest.mark.parametrize(("version", "undo"), [(11, ()), (10, ("DROP TABLE {schema}.schedules",))])
async def test_an_older_postgres_schema_gains_the_trace_column(
    pg_dsn: str, pg_schema: str, version: int, undo: tuple[str, ...]
) -> None:
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    await journal.aclose()
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(f"ALTER TABLE {pg_schema}.jobs DROP COLUMN trace")
        for statement in undo:
            connection.execute(statement.format(schema=pg_schema))
        connection.execute(f"UPDATE {pg_schema}.meta SET version = {version}")
    [before] = PostgresReader(pg_dsn, schema=pg_schema).jobs("k")
    assert (before.id, before.trace) == (1, None)
    recovery = await journal.open()
    try:
        assert [(job.id, job.trace) for job in recovery.jobs] == [(1, None)]
        await journal.write([Append(job_id=2, key="k", data=b"2", trace=TRACE)])
    finally:
        await journal.aclose()
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        upgraded = connection.execute(f"SELECT version FROM {pg_schema}.meta").fetchone()
    assert upgraded == (12,)
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    assert [info.trace for info in reader.jobs("k")] == [None, TRACE]
