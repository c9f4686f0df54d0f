"""The retry-now test's worker: a supervisor whose one key waits out an hour's backoff.

``python -m tests.cli.backoff_worker JOURNAL DIR [SCHEMA]``

It runs a supervisor on ``SQLiteJournal(JOURNAL)``, or on
``PostgresJournal(JOURNAL, schema=SCHEMA)`` for a ``postgresql://`` URI, with
a retry policy whose first backoff is an hour, and sends one job to key
``r``: its first attempt fails, its second succeeds.  Each attempt appends
``start ID`` and then ``failed ID`` or ``done ID`` to DIR/log (fsynced).  It
runs until killed.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog
import trio

import inturn

HOUR = 3600.0


async def work(db: str, folder: str, schema: str) -> None:
    log_fd = os.open(os.path.join(folder, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    attempts = 0

    def note(what: str, job: inturn.Job) -> None:
        os.write(log_fd, f"{what} {job.id} 0\n".encode())
        os.fsync(log_fd)

    async def handler(job: inturn.Job) -> None:
        nonlocal attempts
        attempts += 1
        note("start", job)
        await trio.lowlevel.checkpoint()
        if attempts == 1:
            note("failed", job)
            raise TimeoutError("the gateway did not answer")
        note("done", job)

    journal: inturn.Journal = (
        inturn.PostgresJournal(db, schema=schema)
        if db.startswith("postgresql://")
        else inturn.SQLiteJournal(db)
    )
    retry = inturn.Retry(initial_delay=HOUR, max_delay=HOUR, jitter=0.0)
    async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
        await sup.send("r", "pay")
        await trio.sleep_forever()


def main() -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    args = sys.argv[1:]
    trio.run(work, args[0], args[1], args[2] if len(args) > 2 else "inturn")


if __name__ == "__main__":
    main()
