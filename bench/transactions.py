"""What a transactional step costs: jobs whose handler takes one ``job.transaction``
writing one row, against the same jobs with a plain handler, in one run.

    python bench/transactions.py                  # SQLite and the fleet, 3 pairs each
    python bench/transactions.py --only sqlite --runs 5
    python bench/transactions.py --quick          # small counts: a smoke test

Both sides run the same workload, end to end, alternately (plain,
transactional, plain, ...) so that machine noise hits both; each pair gives
a ratio (transactional / plain jobs/s), and the table shows every pair's and
their median.

SQLite: one process, ``SQLiteJournal(path, durability="full")`` on a fresh
file per run; 200 producer tasks await ``sup.send`` for ``--jobs`` jobs
round-robin over ``--keys`` keys, then ``wait_idle``.  The transactional
handler inserts one row into a table of the user's in the journal's file.

Fleet: ``--members`` member processes (``PostgresJournal(fleet=True)``) on a
fresh schema of the database ``inturn_bench``, joined and idle before the
clock starts; this process sends every job (``BATCH`` per ``send_many`` of a
member that runs nothing), and the clock stops when the journal holds no
unfinished job.  The transactional handler inserts one row into a table of
the user's in another schema of the same database.

The goal (issue 46): the transactional side at least half the plain side's
throughput: the step rides the journal's group commit rather than adding
one of its own.

Enqueue (``--only enqueue``): ``--producers`` processes (4) each write
``--jobs`` / producers jobs with `inturn.enqueue` over ``--keys`` keys into a
fresh fleet schema with no member running, ``--per-transaction`` jobs (1, as a
web request enqueues one, and 20) in each transaction they commit: jobs/s
over all of them, from the first producer's start to the last one's end,
connections opened before the clock.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
import trio

import inturn

PRODUCERS = 200
BATCH = 500
SERVER = os.environ.get("INTURN_BENCH_SERVER", "postgresql://postgres@127.0.0.1:5432")
DATABASE = "inturn_bench"
SCHEMA = "inturn_tx_bench"
POLL = 0.05


def quiet() -> None:
    """What an application does in production: warnings and up, loggers cached."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        cache_logger_on_first_use=True,
    )


# -- SQLite -----------------------------------------------------------------------


def insert_sqlite(connection: Any, job_id: int) -> None:
    connection.execute("INSERT INTO effects (job_id) VALUES (?)", (job_id,))


async def run_sqlite(jobs: int, keys: int, transactional: bool) -> float:
    """Jobs/s of *jobs* jobs over *keys* keys on a fresh SQLite file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.db"

        async def handler(job: inturn.Job) -> None:
            if transactional:
                await job.transaction("apply", insert_sqlite, job.id)

        journal = inturn.SQLiteJournal(path, durability="full")
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            with journal_connection(path) as connection:
                connection.execute("CREATE TABLE effects (job_id INTEGER PRIMARY KEY)")
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for producer in range(PRODUCERS):
                    nursery.start_soon(produce, sup, range(producer, jobs, PRODUCERS), keys)
            await sup.wait_idle()
            elapsed = time.perf_counter() - start
        if transactional:
            with journal_connection(path) as connection:
                (count,) = connection.execute("SELECT count(*) FROM effects").fetchone()
            if count != jobs:
                raise RuntimeError(f"{count} effects for {jobs} jobs")
    return jobs / elapsed


def journal_connection(path: Path) -> Any:
    import contextlib
    import sqlite3

    return contextlib.closing(sqlite3.connect(path, isolation_level=None, timeout=30))


async def produce(sup: inturn.Supervisor, numbers: range, keys: int) -> None:
    for n in numbers:
        await sup.send(f"k{n % keys}", n)


# -- the fleet --------------------------------------------------------------------


def member(dsn: str, transactional: bool) -> None:
    """One member process, until SIGTERM."""
    quiet()

    def insert(connection: Any, job_id: int) -> None:
        connection.execute(f"INSERT INTO {SCHEMA}_app.effects (job_id) VALUES (%s)", (job_id,))

    async def handler(job: inturn.Job) -> None:
        if transactional:
            await job.transaction("apply", insert, job.id)

    async def work() -> None:
        journal = inturn.PostgresJournal(dsn, schema=SCHEMA, fleet=True)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with inturn.open_supervisor(handler, journal=journal) as supervisor:
                print("joined", flush=True)
                async for _ in signals:
                    await supervisor.shutdown(5.0)
                    return

    trio.run(work)


def fresh_schema(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA}_app CASCADE")
        connection.execute(f"CREATE SCHEMA {SCHEMA}_app")
        connection.execute(f"CREATE TABLE {SCHEMA}_app.effects (job_id bigint PRIMARY KEY)")

    async def create() -> None:
        journal = inturn.PostgresJournal(dsn, schema=SCHEMA, fleet=True)
        await journal.open()
        await journal.aclose()

    trio.run(create)


def run_fleet(dsn: str, jobs: int, keys: int, members: int, transactional: bool) -> float:
    """Jobs/s of *jobs* jobs over *keys* keys run by *members* member processes."""
    import psycopg

    fresh_schema(dsn)
    command = [sys.executable, __file__, "--member", dsn]
    if transactional:
        command.append("--transactional")
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE) for _ in range(members)]
    try:
        for process in processes:
            assert process.stdout is not None
            if process.stdout.readline() != b"joined\n":
                raise RuntimeError("a member did not start")
        elapsed = trio.run(send_and_wait, dsn, jobs, keys)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)
    if transactional:
        with psycopg.connect(dsn, autocommit=True) as connection:
            row = connection.execute(f"SELECT count(*) FROM {SCHEMA}_app.effects").fetchone()
        if row is None or row[0] != jobs:
            raise RuntimeError(f"{row} effects for {jobs} jobs")
    return jobs / elapsed


async def send_and_wait(dsn: str, jobs: int, keys: int) -> float:
    """Send every job through a fleet producer, wait until none is unfinished: seconds."""
    import psycopg

    async with inturn.operate(inturn.PostgresJournal(dsn, schema=SCHEMA, fleet=True)) as producer:
        with psycopg.connect(dsn, autocommit=True) as connection:
            start = time.perf_counter()
            for first in range(0, jobs, BATCH):
                await producer.send_many(
                    [(f"k{n % keys}", n) for n in range(first, min(first + BATCH, jobs))]
                )
            while True:
                row = connection.execute(
                    f"SELECT count(*) FROM {SCHEMA}.jobs WHERE state = 'pending'"
                ).fetchone()
                if row is not None and row[0] == 0:
                    return time.perf_counter() - start
                await trio.sleep(POLL)


# -- enqueue ------------------------------------------------------------------------


def enqueuer(dsn: str, first: int, count: int, keys: int, per: int) -> None:
    """One producer process: *count* jobs from number *first*, *per* to a transaction;
    prints its seconds, from the go (a line on stdin) to its last commit."""
    import psycopg

    with psycopg.connect(dsn) as connection:
        print("ready", flush=True)
        sys.stdin.readline()
        start = time.perf_counter()
        for chunk in range(first, first + count, per):
            with connection.transaction():
                for n in range(chunk, min(chunk + per, first + count)):
                    inturn.enqueue(connection, f"k{n % keys}", n, schema=SCHEMA)
        print(time.perf_counter() - start, flush=True)


def run_enqueue(dsn: str, jobs: int, keys: int, producers: int, per: int) -> float:
    """Jobs/s of *producers* processes enqueueing *jobs* jobs over *keys* keys."""
    fresh_schema(dsn)
    share = jobs // producers
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--enqueuer",
                dsn,
                str(index * share),
                str(share),
                str(keys),
                str(per),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(producers)
    ]
    for process in processes:
        assert process.stdout is not None
        if process.stdout.readline() != "ready\n":
            raise RuntimeError("a producer did not start")
    start = time.perf_counter()
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        assert process.stdout is not None
        process.stdout.readline()
        process.wait(timeout=600)
    elapsed = time.perf_counter() - start
    return share * producers / elapsed


# -- the table --------------------------------------------------------------------


def pairs(name: str, runs: int, run: Callable[[bool], float]) -> None:
    ratios, plain_rates, transactional_rates = [], [], []
    for _ in range(runs):
        plain = run(False)
        transactional = run(True)
        plain_rates.append(plain)
        transactional_rates.append(transactional)
        ratios.append(transactional / plain)
    print(
        f"{name}: plain {statistics.median(plain_rates):,.0f} jobs/s,"
        f" transactional {statistics.median(transactional_rates):,.0f} jobs/s;"
        f" ratio median {statistics.median(ratios):.2f}"
        f" (pairs: {', '.join(f'{ratio:.2f}' for ratio in ratios)})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["sqlite", "fleet", "enqueue"])
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--enqueuer", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--member", metavar="DSN", help=argparse.SUPPRESS)
    parser.add_argument("--transactional", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.member:
        member(options.member, options.transactional)
        return
    if options.enqueuer:
        dsn, first, count, keys, per = options.enqueuer
        enqueuer(dsn, int(first), int(count), int(keys), int(per))
        return
    quiet()
    jobs, runs = (2_000, 1) if options.quick else (options.jobs, options.runs)
    keys = options.keys
    if options.only in (None, "sqlite"):
        pairs(
            f"SQLite, {jobs:,} jobs over {keys:,} keys",
            runs,
            lambda transactional: trio.run(run_sqlite, jobs, keys, transactional),
        )
    dsn = f"{SERVER}/{DATABASE}"
    if options.only in (None, "fleet", "enqueue"):
        import psycopg

        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as connection:
            if not connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone():
                connection.execute(f'CREATE DATABASE "{DATABASE}"')
    if options.only in (None, "enqueue"):
        for per in (1, 20):
            rates = [run_enqueue(dsn, jobs, keys, options.producers, per) for _ in range(runs)]
            print(
                f"enqueue, {options.producers} processes, {per} job(s) a transaction,"
                f" {jobs:,} jobs over {keys:,} keys: {statistics.median(rates):,.0f} jobs/s"
                f" (runs: {', '.join(f'{rate:,.0f}' for rate in rates)})",
                flush=True,
            )
    if options.only in (None, "fleet"):
        pairs(
            f"fleet, {options.members} members, {jobs:,} jobs over {keys:,} keys",
            runs,
            lambda transactional: run_fleet(dsn, jobs, keys, options.members, transactional),
        )


if __name__ == "__main__":
    main()
