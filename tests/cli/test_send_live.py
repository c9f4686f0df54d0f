"""`Operator.send` to a service in another process, for real: through the journal's inbox.

The service is ``tests.cli.live_worker``, a supervisor on an SQLite file or
a single-holder PostgreSQL schema; this process holds no journal.  Each send
is a command the service takes on its next poll and accepts with its own
`Supervisor` path; a ``send_many`` is one command, accepted whole or not at
all.  The service logs every attempt it runs, in order, to a file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import attrs
import pytest
import trio

import inturn

from .test_live import Worker

GUARD = 60.0


def journal_of(target: tuple[str, ...]) -> inturn.Journal:
    if len(target) == 1:
        return inturn.SQLiteJournal(target[0])
    dsn, _, schema = target
    return inturn.PostgresJournal(dsn, schema=schema)


def inbox_rows(target: tuple[str, ...]) -> int:
    """How many commands the journal's inbox holds, answered or not."""
    if len(target) == 1:
        with contextlib.closing(sqlite3.connect(target[0])) as connection:
            return int(connection.execute("SELECT count(*) FROM inturn_commands").fetchone()[0])
    import psycopg

    dsn, _, schema = target
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"SET search_path TO {schema}")
        row = connection.execute("SELECT count(*) FROM commands").fetchone()
        assert row is not None
        return int(row[0])


def ran(worker: Worker, ids: list[int]) -> list[tuple[str, int]]:
    """What the service logged for the jobs *ids*, in the order it logged it."""
    return [(what, job) for what, job, _ in worker.log() if job in ids]


def test_jobs_sent_from_another_process_run_in_the_service_in_order(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """send and send_many return the ids the service gave; it runs each key's jobs one at a time, in the order sent."""
    worker = Worker(tmp_path, target)
    try:
        worker.wait_for("start", 1)  # the service holds the journal

        async def produce() -> list[int]:
            with trio.fail_after(GUARD):
                async with inturn.operate(journal_of(target)) as op:
                    assert op.live
                    first = await op.send("p", "p1")
                    many = await op.send_many(
                        [("p", "p2"), ("q", "q1"), inturn.Item("p", "p3", unique="u3")]
                    )
                    last = await op.send("q", "q2")
                    return [first, *many, last]

        ids = trio.run(produce)
        assert ids == sorted(ids)
        for job_id in ids:
            worker.wait_for("done", job_id)
        p1, p2, q1, p3, q2 = ids
        for key_ids in ([p1, p2, p3], [q1, q2]):
            assert ran(worker, key_ids) == [
                (what, job_id) for job_id in key_ids for what in ("start", "done")
            ]
        assert inbox_rows(target) == 0  # each answer read, each row gone
    finally:
        worker.kill()


def test_refused_sends_to_a_live_service_write_nothing(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """A unique key the service holds is a DuplicateError for a send and for a whole send_many;
    bad input never reaches the inbox; a payload the service's codec cannot decode is a
    DecodeError.  None of them leaves a job, and no error text holds a payload."""
    worker = Worker(tmp_path, target)
    try:
        worker.wait_for("start", 1)

        async def refused() -> int:
            with trio.fail_after(GUARD):
                journal = journal_of(target)
                async with inturn.operate(journal) as op:
                    held = await op.send("p", "p1", unique="u", unique_for=3600.0)
                    with pytest.raises(inturn.DuplicateError) as one:
                        await op.send("r", "secret-1", unique="u")
                    assert (one.value.job_id, "secret" in str(one.value)) == (held, False)
                    with pytest.raises(inturn.DuplicateError):
                        await op.send_many([("r", "r1"), inturn.Item("r", "secret-2", unique="u")])
                    commands = inbox_rows(target)
                    for bad in (
                        lambda: op.send("", "x"),
                        lambda: op.send("r", {1: "secret"}),
                        lambda: op.send("r", "x", unique_for=5.0),
                        lambda: op.send_many([("r", "fine"), ("r", object())]),
                    ):
                        with pytest.raises((ValueError, TypeError)):
                            await bad()
                    assert inbox_rows(target) == commands  # refused before it was sent
                async with inturn.operate(
                    journal, codec=inturn.JSONCodec(types={"e": Empty})
                ) as op:
                    with pytest.raises(inturn.DecodeError):
                        await op.send("r", Empty())
                    assert await op.jobs("r") == []
                    assert await op.dead_letters(key="r") == []
                    return held

        held = trio.run(refused)
        worker.wait_for("done", held)
        assert worker.reader.jobs("r") == []
    finally:
        worker.kill()


@attrs.frozen
class Empty:
    """A payload type the service's codec does not know."""
