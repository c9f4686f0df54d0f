"""docs/producers.md's script, run as written against a fleet's journal: the order and its job commit together."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import psycopg
import pytest
import trio

import inturn

DOC = Path(__file__).resolve().parents[2] / "docs" / "producers.md"


def block(heading: str) -> str:
    """The first python block under *heading*."""
    section = DOC.read_text(encoding="utf-8").split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def script() -> str:
    return block("## A script")


def test_the_script_commits_the_order_with_its_job(
    pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script's connection string is the test server's, its search path the application's
    schema, and its journal the test's schema; otherwise it runs as printed."""

    async def create() -> None:
        journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema, fleet=True)
        await journal.open()
        await journal.aclose()

    trio.run(create)
    app = f"{pg_schema}_shop"
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {app}")
        connection.execute(
            f"CREATE TABLE {app}.orders (id serial PRIMARY KEY, customer text, total int)"
        )
    try:
        dsn = psycopg.conninfo.make_conninfo(pg_dsn, options=f"-c search_path={app}")
        code = script().replace('"postgresql://app@db/shop"', repr(dsn))
        monkeypatch.setattr(inturn, "enqueue", functools.partial(inturn.enqueue, schema=pg_schema))
        exec(compile(code, str(DOC), "exec"), {})  # the documented script
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            assert connection.execute(f"SELECT id, customer FROM {app}.orders").fetchall() == [
                (1, "ada")
            ]
            assert connection.execute(
                f"SELECT key, unique_key FROM {pg_schema}.jobs"
            ).fetchall() == [("customer:ada", "ship:1")]
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {app} CASCADE")


def test_the_trio_producer_journals_its_jobs_for_the_next_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as printed, in a folder of its own, on a file no service holds: its three jobs
    wait in the journal, in the order sent."""
    monkeypatch.chdir(tmp_path)
    exec(
        compile(block("## A trio program that only sends"), str(DOC), "exec"),
        {"__name__": "__doc__"},
    )
    reader = inturn.journal.SQLiteReader(tmp_path / "jobs.db")
    assert [(job.key, job.id) for job in reader.jobs("account-42")] == [
        ("account-42", 1),
        ("account-42", 2),
    ]
    assert [job.id for job in reader.jobs("account-7")] == [3]
