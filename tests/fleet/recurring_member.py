"""A fleet member firing a recurring schedule, for the fleet's once-per-tick test.

``python -m tests.fleet.recurring_member DSN SCHEMA DIR NAME START``

It joins the fleet on DSN/SCHEMA (a 2-second heartbeat TTL), creates the
schedule ``tick`` unless the journal holds it (every `EVERY` seconds from
Unix time START, on key ``k``, ``misfire="all"``), prints ``joined``, and
runs until killed.  Each job it runs appends ``NAME <job_id>`` to DIR/log,
one fsynced write (members share the log).
"""

from __future__ import annotations

import os
import sys

import trio

import inturn

from .worker import TTL, run_member

EVERY = 0.2


async def work(dsn: str, schema: str, folder: str, name: str, start: str) -> None:
    log = os.open(os.path.join(folder, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def handler(job: inturn.Job) -> None:
        os.write(log, f"{name} {job.id}\n".encode())
        os.fsync(log)

    journal = inturn.PostgresJournal(dsn, schema=schema, lease_ttl=TTL, fleet=True)
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        if not await journal.schedules(name="tick"):
            await sup.schedule("tick", "k", "t", every=EVERY, start=float(start), misfire="all")
        print("joined", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    run_member(work, *sys.argv[1:6])
