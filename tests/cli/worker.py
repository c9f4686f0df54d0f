"""The end-to-end test's worker: a supervisor whose one key's head fails forever.

``python -m tests.cli.worker DB LOG``

It runs a supervisor on ``SQLiteJournal(DB)`` and sends, in one
`send_many`, entries 0 to 4 of three ledgers, interleaved.  Entry 0 of
`STUCK` fails every attempt, and the retry policy waits an hour between
attempts, so that ledger's other entries wait behind it while the others
run.  The handler appends ``<key> <entry>`` to LOG (fsynced) for each entry
it applies.  Then it waits, forever: the test kills it with SIGKILL.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import structlog
import trio

import inturn

STUCK = "ledger-7"
KEYS = ("ledger-1", STUCK, "ledger-2")
ENTRIES = 5
ERROR = "ledger 7 is closed for audit"

RETRY = inturn.Retry(max_attempts=1_000_000, initial_delay=3600, max_delay=3600, jitter=0)


class LedgerClosed(Exception):
    """The failure of STUCK's first entry, every time."""


async def work(db: str, log: str) -> None:
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def handler(job: inturn.Job) -> None:
        if job.key == STUCK and job.payload == 0:
            raise LedgerClosed(ERROR)
        os.write(log_fd, f"{job.key} {job.payload}\n".encode())
        os.fsync(log_fd)
        await trio.lowlevel.checkpoint()

    journal = inturn.SQLiteJournal(db)
    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        await sup.send_many([(key, entry) for entry in range(ENTRIES) for key in KEYS])
        await trio.sleep_forever()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.cli.worker")
    parser.add_argument("db")
    parser.add_argument("log")
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(work, args.db, args.log)


if __name__ == "__main__":
    main()
