"""The recurring schedules' crash test's worker: a supervisor firing one schedule, there to be killed.

``python -m tests.crash.recurring_worker DB LOG --start T --until U``

The worker opens a supervisor on ``SQLiteJournal(DB)`` (durability "full")
and, unless the journal holds it already, creates the schedule ``tick``:
every `EVERY` seconds from Unix time T, on key ``k``, ``misfire="all"``, so
that every tick, missed or not, gets a job.  The handler appends
``<job_id> start`` and ``<job_id> end`` to LOG, each line one fsynced
``write``.  At Unix time U it pauses the schedule and exits once every job is
done.  A worker killed before U leaves the schedule running for the next.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import structlog
import trio

import inturn

__all__ = ["EVERY", "main"]

EVERY = 0.05
"""Seconds between two ticks."""

RETRY = inturn.Retry(max_attempts=1_000_000)  # a SIGKILL is not the job's failure


async def work(db: Path, log: Path, *, start: float, until: float) -> None:
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append(line: str) -> None:
        os.write(log_fd, f"{line}\n".encode())
        os.fsync(log_fd)

    async def handler(job: inturn.Job) -> None:
        append(f"{job.id} start")
        await trio.sleep(0.001)
        append(f"{job.id} end")

    journal = inturn.SQLiteJournal(db, durability="full")
    try:
        async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
            if not await journal.schedules(name="tick"):
                await sup.schedule("tick", "k", "t", every=EVERY, start=start, misfire="all")
            await trio.sleep(max(0.0, until - time.time()))
            await sup.pause_schedule("tick")
    finally:
        os.close(log_fd)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.recurring_worker")
    parser.add_argument("db", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--start", type=float, required=True)
    parser.add_argument("--until", type=float, required=True)
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(lambda: work(args.db, args.log, start=args.start, until=args.until))


if __name__ == "__main__":
    main()
