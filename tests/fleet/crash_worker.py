"""The fleet crash test's member: a supervisor there to be killed and stopped.

``python -m tests.fleet.crash_worker DSN SCHEMA LOG NAME``

It joins the fleet (``PostgresJournal(fleet=True)`` with a short heartbeat
TTL) and runs whatever it claims until it is killed.  The handler appends
``start NAME KEY ID ATTEMPT`` to LOG before anything else and ``end ...``
just before it returns, each line one ``write`` to a file opened with
``O_APPEND``; in between it sleeps up to a few milliseconds of real time.  A
member that wakes from a stop longer than its TTL finds its keys lost: its
supervisor stops with `LeaseLost`, and it exits 3.
"""

from __future__ import annotations

import os
import random
import sys

import trio

import inturn

from .worker import run_member

TTL = 2.0
MAX_SLEEP = 0.004
# A SIGKILL is not the job's failure: however often a job is cut, it runs to its end.
RETRY = inturn.Retry(max_attempts=1_000_000)


async def work(dsn: str, schema: str, log_path: str, name: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def note(what: str, job: inturn.Job) -> None:
        os.write(log, f"{what} {name} {job.key} {job.id} {job.attempt}\n".encode())

    async def handler(job: inturn.Job) -> None:
        note("start", job)
        await trio.sleep(random.random() * MAX_SLEEP)
        note("end", job)

    journal = inturn.PostgresJournal(dsn, schema=schema, lease_ttl=TTL, fleet=True)
    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        print("joined", flush=True)
        del sup
        await trio.sleep_forever()


if __name__ == "__main__":
    run_member(work, *sys.argv[1:5])
