"""PostgreSQL runs a group's transactional steps set-based: one fence, one savepoint, and a
function that raises is refused alone while the others run again and commit once."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import trio
import trio.testing

import inturn
from inturn.journal import Append, MarkAttempt, Transaction


async def test_a_group_of_transactions_commits_all_but_the_one_that_raised(
    pg_dsn: str, pg_schema: str
) -> None:
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    await journal.open()
    gate = threading.Event()
    calls: dict[int, int] = {}
    answers: dict[int, object] = {}

    def effect(job_id: int) -> Any:
        def run(connection: Any) -> bytes:
            calls[job_id] = calls.get(job_id, 0) + 1
            if job_id == 1:
                gate.wait(10)  # holds the thread while the others queue into one group
            connection.execute("CREATE TEMP TABLE IF NOT EXISTS effects (job_id bigint)")
            connection.execute("INSERT INTO effects VALUES (%s)", (job_id,))
            if job_id == 4:
                raise LookupError("declined")
            return b"%d" % job_id

        return run

    async def take(job_id: int) -> None:
        try:
            answers[job_id] = await journal.transaction(
                Transaction(job_id, 1, "apply"), effect(job_id)
            )
        except LookupError as exc:
            answers[job_id] = exc

    try:
        await journal.write(
            [
                change
                for n in range(1, 8)
                for change in (Append(n, f"k{n}", b"x"), MarkAttempt(n, 1))
            ]
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, 1)
            await trio.testing.wait_all_tasks_blocked()
            for job_id in range(2, 8):
                nursery.start_soon(take, job_id)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()

        def count(connection: Any) -> bytes:
            (rows,) = connection.execute("SELECT count(*) FROM effects").fetchone()
            return b"%d" % rows

        effects = await journal.transaction(Transaction(1, 1, "count"), count)
        steps = {job_id: await journal.steps(job_id) for job_id in range(1, 8)}
    finally:
        await journal.aclose()
    assert isinstance(answers.pop(4), LookupError)
    assert answers == {job_id: b"%d" % job_id for job_id in (1, 2, 3, 5, 6, 7)}
    assert effects == b"6"  # each committed once; job 4's write rolled back
    assert steps[4] == []
    assert all(steps[job_id] == [("apply", b"%d" % job_id)] for job_id in (2, 3, 5, 6, 7))
    # One set, pipelined: those before job 4 in it ran before it raised; then again a
    # function at a time, to learn whose the error was; and then without job 4: three times.
    # Those after it, once.
    assert calls[4] == 2
    assert all(calls[job_id] in (1, 3) for job_id in (2, 3, 5, 6, 7)), calls


async def test_a_group_s_transactions_see_the_connection_s_own_search_path(
    pg_dsn: str, pg_schema: str
) -> None:
    """The DSN sets the application's schema as its search path: the functions' unqualified
    names are the application's, and the journal's own statements still find its tables."""
    app = f"{pg_schema}_app"
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {app}")
        connection.execute(f"CREATE TABLE {app}.jobs (job_id bigint)")  # a name inturn uses too
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, options=f"-c search_path={app}")
    journal = inturn.PostgresJournal(dsn, schema=pg_schema)
    await journal.open()
    try:
        await journal.write([Append(1, "k", b"x"), MarkAttempt(1, 1)])

        def insert(connection: Any) -> bytes:
            connection.execute("INSERT INTO jobs (job_id) VALUES (1)")
            return b"ok"

        assert await journal.transaction(Transaction(1, 1, "apply"), insert) == b"ok"
        await journal.write([MarkAttempt(1, 2)])  # the journal's own tables, as before
        assert [job.attempts for job in await journal.jobs("k")] == [2]
    finally:
        await journal.aclose()
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            rows = connection.execute(f"SELECT job_id FROM {app}.jobs").fetchall()
            connection.execute(f"DROP SCHEMA {app} CASCADE")
    assert rows == [(1,)]
