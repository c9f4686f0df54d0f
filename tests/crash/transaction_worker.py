"""The transactional steps crash test's worker: effects in the journal's own file, SIGKILLed anywhere.

``python -m tests.crash.transaction_worker DB --jobs N --keys K [--seed S] [--send] [--fail P]``

The jobs are the crash test's plan (`tests.crash.worker.plan`): N payloads
``[key, seq]`` over K keys, sent in one `send_many` by the first worker
(``--send``), which then creates ``DB.sent``: the driver kills no worker
before it exists.  The handler applies each job's
effect with `Job.transaction`, in the journal's file: it counts the job in
the user's table ``effects`` (``INSERT ... ON CONFLICT DO UPDATE SET n = n +
1``) and appends it to its key's line in ``applied``, then, with probability
P, fails *after* the transaction returned, so the next attempt finds the
result recorded.  The worker exits 0 once every job is done; the driver
kills it with SIGKILL at random moments and starts it again, and at the end
every job's effect must have been counted exactly once, in each key's order.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
import trio

import inturn

from .steps_worker import create_fsynced, sent_marker
from .worker import plan

RETRY = inturn.Retry(max_attempts=1_000_000, initial_delay=0.001, multiplier=1, jitter=0)
"""A SIGKILL or an injected failure is not the job's end: it runs until it completes."""


def apply(connection: sqlite3.Connection, key: str, job_id: int) -> int:
    """The effect: count the job once more, and note it on its key's line; its count."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS effects (job_id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"
    )
    connection.execute(
        "CREATE TABLE IF NOT EXISTS applied"
        " (key TEXT NOT NULL, position INTEGER NOT NULL, job_id INTEGER NOT NULL,"
        " PRIMARY KEY (key, position))"
    )
    (count,) = connection.execute(
        "INSERT INTO effects (job_id, n) VALUES (?, 1)"
        " ON CONFLICT (job_id) DO UPDATE SET n = n + 1 RETURNING n",
        (job_id,),
    ).fetchone()
    connection.execute(
        "INSERT INTO applied (key, position, job_id)"
        " SELECT ?, COUNT(*), ? FROM applied WHERE key = ?",
        (key, job_id, key),
    )
    return int(count)


class Injected(Exception):
    """A failure after the transaction committed."""


async def work(db: Path, *, jobs: int, keys: int, seed: int, send: bool, fail: float) -> None:
    rng = random.Random(os.getpid())

    async def handler(job: inturn.Job) -> int:
        assert isinstance(job.payload, list)
        key, _ = job.payload
        count: int = await job.transaction("apply", apply, key, job.id)
        await trio.sleep(rng.uniform(0, 0.002))  # other keys' handlers run meanwhile
        if rng.random() < fail:
            raise Injected(f"after the transaction of job {job.id}")
        return count

    journal = inturn.SQLiteJournal(db, durability="full")
    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        if send:
            await sup.send_many([(key, [key, seq]) for key, seq in plan(jobs, keys, seed)])
            create_fsynced(sent_marker(db))
        await sup.wait_idle()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.crash.transaction_worker", description=__doc__
    )
    parser.add_argument("db", type=Path)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--send", action="store_true", help="send the plan (the first run)")
    parser.add_argument("--fail", type=float, default=0.2, metavar="P")
    args = parser.parse_args(argv)
    # inturn logs every job at debug level, and a retry at warning: errors only.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(
        lambda: work(
            args.db, jobs=args.jobs, keys=args.keys, seed=args.seed, send=args.send, fail=args.fail
        )
    )


if __name__ == "__main__":
    main()
