"""Transactional steps in a fleet: fenced by the job's state and by the member's hold on its key."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import trio

import inturn

from .test_members import member
from .test_operate import until


class Holding:
    """A handler that waits for *go*, then takes a transaction that writes a row of the user's."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.holding, self.go = trio.Event(), trio.Event()
        self.calls = 0
        self.raised: list[BaseException] = []

    def effect(self, connection: Any) -> int:
        self.calls += 1
        connection.execute(f"INSERT INTO {self.schema}_app.effects VALUES (1)")
        return 1

    async def __call__(self, job: inturn.Job) -> None:
        self.holding.set()
        with trio.CancelScope(shield=True):  # a handler that runs on whatever befalls its job
            await self.go.wait()
            try:
                await job.transaction("apply", self.effect)
            except Exception as exc:
                self.raised.append(exc)
                raise


@pytest.fixture
def effects(pg_dsn: str, pg_schema: str) -> Any:
    """The user's table, and how many rows it holds."""
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {pg_schema}_app")
        connection.execute(f"CREATE TABLE {pg_schema}_app.effects (n integer)")

    def count() -> int:
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            row = connection.execute(f"SELECT count(*) FROM {pg_schema}_app.effects").fetchone()
        assert row is not None
        return int(row[0])

    yield count
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {pg_schema}_app CASCADE")


async def test_a_job_skipped_by_another_member_has_its_transaction_refused(
    pg_dsn: str, pg_schema: str, effects: Any
) -> None:
    """B skips the job A runs: A's transaction raises JobStateError, its function not called."""
    handler = Holding(pg_schema)
    with trio.fail_after(60):
        async with inturn.open_supervisor(handler, journal=member(pg_dsn, pg_schema)) as a:
            job_id = await a.send("k", None)
            await handler.holding.wait()
            async with inturn.operate(member(pg_dsn, pg_schema)) as op:
                await op.skip(job_id)
                handler.go.set()
                await until(lambda: handler.raised)
                assert (await op.job(job_id)).state == "dead"  # type: ignore[union-attr]
    assert [type(exc) for exc in handler.raised] == [inturn.JobStateError]
    assert (handler.calls, effects()) == (0, 0)


async def test_a_member_whose_heartbeat_expired_takes_no_transaction(
    pg_dsn: str, pg_schema: str, effects: Any
) -> None:
    """A's heartbeat runs out while its handler waits: its transaction raises LeaseLost,
    nothing written, and A stops."""
    handler = Holding(pg_schema)
    journal = member(pg_dsn, pg_schema)
    with trio.fail_after(60), pytest.raises(inturn.LeaseLost):  # noqa: PT012 (A's whole life)
        async with inturn.open_supervisor(handler, journal=journal) as a:
            await a.send("k", None)
            await handler.holding.wait()
            with psycopg.connect(pg_dsn, autocommit=True) as connection:
                connection.execute(
                    f"UPDATE {pg_schema}.processes"
                    " SET expires_at = clock_timestamp() - interval '1 second'"
                )
            handler.go.set()
            await trio.sleep_forever()
    assert [type(exc) for exc in handler.raised] == [inturn.LeaseLost]
    assert (handler.calls, effects()) == (0, 0)
