"""The fleet's transactional crash test's member: effects in the journal's database, fenced.

``python -m tests.fleet.transaction_worker DSN SCHEMA LOG NAME``

A member as `tests.fleet.crash_worker` is (it logs ``start`` and ``end``
lines for `tests.fleet.history`), whose handler applies each job's effect
with `Job.transaction` in tables of the user's, in schema ``SCHEMA_app`` of
the journal's database: it counts the job in ``effects`` and appends it to
its key's line in ``applied``.  Then, one time in five, it fails after the
transaction returned (logging ``fail``), so a later attempt finds the result
recorded.  A member stopped past its TTL wakes with its keys lost: a
transaction it had under way was ended by the server, or is refused at its
commit (`LeaseLost`), and another member applies the effect once.
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

import trio

import inturn

from .crash_worker import MAX_SLEEP, TTL
from .worker import run_member

RETRY = inturn.Retry(max_attempts=1_000_000, initial_delay=0.001, multiplier=1, jitter=0)
FAIL = 0.2


def tables(schema: str) -> list[str]:
    """The user's tables, created by the driver before any member starts."""
    return [
        f"CREATE SCHEMA {schema}_app",
        f"CREATE TABLE {schema}_app.effects (job_id bigint PRIMARY KEY, n integer NOT NULL)",
        f"CREATE TABLE {schema}_app.applied (key text, position integer, job_id bigint,"
        " PRIMARY KEY (key, position))",
    ]


def apply(connection: Any, schema: str, key: str, job_id: int) -> int:
    """The effect: count the job once more, and note it on its key's line; its count."""
    (count,) = connection.execute(
        f"INSERT INTO {schema}_app.effects AS e (job_id, n) VALUES (%s, 1)"
        " ON CONFLICT (job_id) DO UPDATE SET n = e.n + 1 RETURNING n",
        (job_id,),
    ).fetchone()
    connection.execute(
        f"INSERT INTO {schema}_app.applied (key, position, job_id)"
        f" SELECT %s, COUNT(*), %s FROM {schema}_app.applied WHERE key = %s",
        (key, job_id, key),
    )
    return int(count)


async def work(dsn: str, schema: str, log_path: str, name: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def note(what: str, job: inturn.Job) -> None:
        os.write(log, f"{what} {name} {job.key} {job.id} {job.attempt}\n".encode())

    async def handler(job: inturn.Job) -> None:
        note("start", job)
        await job.transaction("apply", apply, schema, job.key, job.id)
        await trio.sleep(random.random() * MAX_SLEEP)
        if random.random() < FAIL:
            note("fail", job)
            raise RuntimeError("after the transaction")
        note("end", job)

    journal = inturn.PostgresJournal(dsn, schema=schema, lease_ttl=TTL, fleet=True)
    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        print("joined", flush=True)
        del sup
        await trio.sleep_forever()


if __name__ == "__main__":
    run_member(work, *sys.argv[1:5])
