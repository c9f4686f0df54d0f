"""Fleet throughput on one PostgreSQL: inturn's PostgresJournal against procrastinate.

    python bench/fleet.py                         # both sides (issue #9's table)
    python bench/fleet.py --only procrastinate    # the baseline alone
    python bench/fleet.py --quick                 # 1,000 jobs, one run: a smoke test

Needs the ``bench`` extra (``pip install -e '.[bench]'``) and the local server
(127.0.0.1:5432, trust auth).  Everything runs in the database ``inturn_bench``,
created if missing: never in ``test``, whose schemas belong to the test suite.

The workload (issue #9, "Benchmark"): ``--jobs`` no-op jobs (10,000), job
``n`` on key ``k{n % keys}``, over 10,000 keys and over 1 key, run by 1, 2 and
4 worker processes (separate OS processes, started and idle before the clock
starts).  The figure is jobs/s end to end: from the first enqueue until the
last job is finished, the enqueue time included.  The producer is this
process; it enqueues every job up front, batch after batch, while the workers
already run, so they start on the first batch as soon as it commits.  Over
10,000 keys each key gets one job, so the per-key gate costs only its check;
over one key every job waits for the one before it, fleet-wide.  Each
configuration runs ``--runs`` times (3), alternating the two sides, and the
table shows the median: the machine has two cores and is shared, so single
runs are noisy (the spread is printed beside each median).

procrastinate runs at its best settings for this workload:

- ``lock=key`` on every job: its per-key serialisation (a job is not fetched
  while a job with its lock is doing, or an earlier one is todo);
- batch defer: ``BATCH`` jobs per call and transaction, through
  ``JobManager.batch_defer_jobs_async``, the call ``Task.batch_defer_async``
  makes (that one sets one lock for the whole batch; here each job has its own);
- ``listen_notify=True``, and a pool of ``concurrency + 2`` connections per
  worker (the listener holds one for good);
- ``concurrency`` per worker process and ``fetch_job_polling_interval`` from
  ``PROCRASTINATE_SETTINGS``, per number of keys, chosen by a sweep (4
  processes, 10,000 keys, 10,000 jobs; 2 processes, 1 key, 2,000 jobs;
  single runs alternated, on the shared machine).  Over 10,000 keys,
  concurrency 8: medians 102 jobs/s at 1, 127 at 4, 139 at 8, 142 at 16, all
  within the noise above 4; 8 holds 40 connections for 4 workers, 16 would
  hold 72 of the server's 100.  Over one key, concurrency 1 and polling
  0.05 s: 120-173 jobs/s, against 41-49 at concurrency 2 and 26-27 at 4.  A
  worker whose fetch finds nothing waits for a NOTIFY (sent on insert only)
  or its polling interval, and on one key every fetch but the next job's
  finds nothing: at concurrency 1 a worker fetches again as soon as its job
  completes, above 1 it waits.  Over 10,000 keys the interval is only a
  fallback (a NOTIFY wakes the workers);
- ``delete_jobs="never"`` (its default): the clock stops when a poll of
  ``procrastinate_jobs`` (every ``POLL`` seconds) finds no job todo or doing,
  and every job must then have succeeded;
- ``ANALYZE procrastinate_jobs`` after each batch defer, inside the clock:
  each run's table is new, and without statistics the planner turns the
  fetch over 10,000 keys into a scan of every todo job's lock, seconds per
  fetch with thousands waiting (the comment in ``produce_and_wait`` has the
  plans).  The sweep above ran without it and is due again.

A run that is still going at ``RUN_TIMEOUT`` (120 s), or whose throughput
collapses (a ``STALL_WINDOW`` of 10 s below ``STALL_FRACTION``, 5%, of its
best window), is a stall: the table prints STALL with its jobs done and its
seconds, never a rate or a ratio, and a cell with any stalled run gives no
median.  Over one key procrastinate's fetch that finds nothing (every
process but the key's runner) walks the backlog and, for each todo job,
the jobs table from the start to a job with the key's lock: 50-260 ms with
2,000 jobs, and growing with the backlog times the finished rows.

Each procrastinate run gets a fresh schema (``procrastinate_bench``, reached
through the connection's ``search_path``), so no run inherits dead rows.

The inturn side is ``run_inturn`` below: the same parameters, the same figure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import psycopg

if TYPE_CHECKING:
    import procrastinate

SERVER = "postgresql://postgres@127.0.0.1:5432"
DATABASE = "inturn_bench"
PROCRASTINATE_SCHEMA = "procrastinate_bench"

PROCESS_COUNTS = (1, 2, 4)
KEY_COUNTS = (10_000, 1)
BATCH = 1_000  # jobs per enqueue call and transaction
POLL = 0.05  # seconds between polls of the jobs table for the end of a run
RUN_TIMEOUT = 120.0  # seconds: a run still going then is a stall
STALL_WINDOW = 10.0  # seconds: the span over which a collapse is judged
STALL_FRACTION = 0.05  # a window below this share of the run's best window is a collapse

# keys -> (concurrency per worker process, fetch_job_polling_interval in seconds);
# any number of keys but 1 takes the settings of 10,000
PROCRASTINATE_SETTINGS: dict[int, tuple[int, float]] = {10_000: (8, 1.0), 1: (1, 0.05)}


class Stall(Exception):
    """A run that hit RUN_TIMEOUT or collapsed: its jobs done and seconds, never a rate.

    A rate read off a stalled run measures how long we were willing to wait,
    not the side's throughput, and a ratio made from it reads as a result.
    """

    def __init__(self, done: int, jobs: int, seconds: float, why: str) -> None:
        super().__init__(done, jobs, seconds, why)
        self.done, self.jobs, self.seconds, self.why = done, jobs, seconds, why

    def __str__(self) -> str:
        return (
            f"STALL, {self.done:,} of {self.jobs:,} jobs done in {self.seconds:.1f} s ({self.why})"
        )


class Progress:
    """Reads a run's polls of the jobs left, and says when it is done or has stalled.

    A run stalls when it is still going at RUN_TIMEOUT, or when its
    throughput collapses: a whole STALL_WINDOW in which it finishes fewer than
    STALL_FRACTION of the jobs per second of its best window so far (a run
    that stalls that way is stopped then, not left to the cap).
    """

    def __init__(self, jobs: int, start: float) -> None:
        self.jobs, self.start = jobs, start
        self.window_start, self.window_done, self.best = start, 0, 0.0

    def done(self, left: int, now: float) -> bool:
        """True when no job is left; raise Stall when the run has stalled."""
        if not left:
            return True
        done, seconds = self.jobs - left, now - self.start
        if seconds > RUN_TIMEOUT:
            raise Stall(done, self.jobs, seconds, f"still going at the {RUN_TIMEOUT:.0f} s cap")
        if now - self.window_start >= STALL_WINDOW:
            rate = (done - self.window_done) / (now - self.window_start)
            self.best = max(self.best, rate)
            if rate < self.best * STALL_FRACTION:
                why = f"{rate:,.1f} jobs/s over {now - self.window_start:.0f} s, down from {self.best:,.0f}"
                raise Stall(done, self.jobs, seconds, why)
            self.window_start, self.window_done = now, done
        return False


def ensure_database(server: str) -> str:
    """Create the benchmark's own database if missing; return its DSN."""
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        if not connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
        ).fetchone():
            connection.execute(f'CREATE DATABASE "{DATABASE}"')
    return f"{server}/{DATABASE}"


def job_key(n: int, keys: int) -> str:
    return f"k{n % keys}"


# -- inturn (the lead fills this in) ---------------------------------------------


INTURN_SCHEMA = "inturn_bench"


def inturn_worker(dsn: str) -> None:
    """One member process: a no-op handler on a fleet journal, until SIGTERM."""
    import structlog
    import trio

    import inturn

    # What an application does in production: warnings and up, loggers cached.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        cache_logger_on_first_use=True,
    )

    async def noop(job: inturn.Job) -> None:
        pass

    async def work() -> None:
        journal = inturn.PostgresJournal(dsn, schema=INTURN_SCHEMA, fleet=True)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with inturn.open_supervisor(noop, journal=journal) as supervisor:
                print("joined", flush=True)
                async for _ in signals:
                    await supervisor.shutdown(5.0)
                    return

    trio.run(work)


def start_inturn_workers(dsn: str, processes: int) -> list[subprocess.Popen[bytes]]:
    """A fresh schema, and *processes* members joined to it (idle) before the clock starts."""
    import trio

    import inturn

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {INTURN_SCHEMA} CASCADE")

    async def create() -> None:
        journal = inturn.PostgresJournal(dsn, schema=INTURN_SCHEMA, fleet=True)
        await journal.open()
        await journal.aclose()

    trio.run(create)
    command = [sys.executable, __file__, "--inturn-worker", dsn]
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE) for _ in range(processes)]
    for worker in workers:
        assert worker.stdout is not None
        if worker.stdout.readline() != b"joined\n":
            raise RuntimeError("an inturn worker did not start")
    return workers


def stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def unfinished(connection: psycopg.Connection[Any]) -> int:
    row = connection.execute(
        f"SELECT count(*) FROM {INTURN_SCHEMA}.jobs WHERE state = 'pending'"
    ).fetchone()
    assert row is not None
    return int(row[0])


async def inturn_produce_and_wait(dsn: str, keys: int, jobs: int) -> float:
    """Send every job, wait for the last to complete; return the seconds taken.

    The producer is a fleet member that claims nothing (`inturn.operate`): it
    sends ``BATCH`` jobs per `Operator.send_many`, one transaction each (as
    procrastinate's side calls its batch defer directly).
    """
    import trio

    import inturn

    journal = inturn.PostgresJournal(dsn, schema=INTURN_SCHEMA, fleet=True)
    async with inturn.operate(journal) as op:
        with psycopg.connect(dsn, autocommit=True) as connection:
            start = time.perf_counter()
            for first in range(0, jobs, BATCH):
                numbers = range(first, min(first + BATCH, jobs))
                await op.send_many([(job_key(n, keys), n) for n in numbers])
            progress = Progress(jobs, start)
            while True:  # polled: the database has no event to wait on
                if progress.done(unfinished(connection), time.perf_counter()):
                    break
                await trio.sleep(POLL)
            elapsed = time.perf_counter() - start
            row = connection.execute(f"SELECT count(*) FROM {INTURN_SCHEMA}.jobs").fetchone()
    if row is None or row[0]:  # completed jobs are deleted: nothing may be left
        raise RuntimeError(f"inturn: {row} jobs left (dead letters?)")
    return elapsed


def run_inturn(dsn: str, *, processes: int, keys: int, jobs: int) -> float:
    """Run *jobs* no-op jobs over *keys* keys with *processes* workers; return jobs/s.

    On the same terms as ``run_procrastinate``: *processes* member processes
    (``PostgresJournal(dsn, fleet=True)``, a no-op handler) joined and idle
    before the clock starts; job ``n`` sent to ``job_key(n, keys)``, the sends
    counted in the time; the clock stopped when no job is unfinished in the
    database; a fresh schema per run.
    """
    import trio

    workers = start_inturn_workers(dsn, processes)
    try:
        elapsed = trio.run(inturn_produce_and_wait, dsn, keys, jobs)
    finally:
        stop(workers)
    return jobs / elapsed


def failover(dsn: str) -> float:
    """Seconds from the SIGKILL of a key's owner to the key's next start on another member.

    Two members with a 2 s heartbeat TTL; the first runs a job that never
    ends, is killed, and the second must rerun it.
    """
    folder = tempfile.mkdtemp()
    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {INTURN_SCHEMA} CASCADE")
        log = os.path.join(folder, "log")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

        def member(name: str, sends: str = "") -> subprocess.Popen[bytes]:
            command = [sys.executable, "-m", "tests.fleet.worker", dsn, INTURN_SCHEMA, folder]
            process = subprocess.Popen(
                [*command, name, *([sends] if sends else [])], cwd=root, stdout=subprocess.PIPE
            )
            assert process.stdout is not None
            if process.stdout.readline() != b"joined\n":
                raise RuntimeError("a failover member did not start")
            return process

        def logged(line: str) -> float:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if os.path.exists(log) and line in Path(log).read_text().splitlines():
                    return time.monotonic()
                time.sleep(0.005)
            raise RuntimeError(f"never logged {line!r}")

        first = member("A", "k:one")
        second = member("B")
        try:
            logged("start A 1")
            first.kill()
            first.wait()
            killed = time.monotonic()
            return logged("start B 1") - killed
        finally:
            for process in (first, second):
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(folder)


# -- procrastinate -----------------------------------------------------------------


def procrastinate_dsn(dsn: str) -> str:
    return f"{dsn}?options={quote(f'-c search_path={PROCRASTINATE_SCHEMA}')}"


async def noop(n: int) -> None:
    pass


def procrastinate_app(dsn: str, pool_size: int) -> procrastinate.App:
    try:
        import procrastinate  # the bench extra: never a dependency of inturn
    except ImportError:
        sys.exit("bench/fleet.py: procrastinate is missing: pip install -e '.[bench]'")

    # It warns that an App made in __main__ cannot be found by import path by
    # its CLI; every process here makes its own, so that does not matter.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    connector = procrastinate.PsycopgConnector(
        conninfo=procrastinate_dsn(dsn), min_size=pool_size, max_size=pool_size
    )
    app = procrastinate.App(connector=connector)

    app.task(name="noop")(noop)
    return app


def procrastinate_worker(dsn: str, concurrency: int, polling: float) -> None:
    """One worker process: run until SIGTERM (procrastinate stops gracefully)."""
    app = procrastinate_app(dsn, pool_size=concurrency + 2)

    async def work() -> None:
        async with app.open_async():
            await app.run_worker_async(
                concurrency=concurrency,
                listen_notify=True,
                fetch_job_polling_interval=polling,
                delete_jobs="never",
                install_signal_handlers=True,
            )

    asyncio.run(work())


def reset_procrastinate_schema(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {PROCRASTINATE_SCHEMA} CASCADE")
        connection.execute(f"CREATE SCHEMA {PROCRASTINATE_SCHEMA}")
    app = procrastinate_app(dsn, pool_size=1)

    async def apply() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(apply())


def wait_for_workers(dsn: str, count: int, workers: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 30
    with psycopg.connect(procrastinate_dsn(dsn), autocommit=True) as connection:
        while True:
            row = connection.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
            if row is not None and row[0] == count:
                break
            if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
                raise RuntimeError("procrastinate workers did not start")
            time.sleep(0.05)
    time.sleep(0.5)  # a worker registers itself just before it starts listening


async def count_jobs(connection: psycopg.AsyncConnection[Any], where: str) -> int:
    cursor = await connection.execute(f"SELECT count(*) FROM procrastinate_jobs WHERE {where}")
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def produce_and_wait(dsn: str, keys: int, jobs: int) -> float:
    """Enqueue every job, wait for the last to finish; return the seconds taken."""
    app = procrastinate_app(dsn, pool_size=2)
    async with (
        app.open_async(),
        await psycopg.AsyncConnection.connect(
            procrastinate_dsn(dsn), autocommit=True
        ) as connection,
    ):
        task = app.tasks["noop"]
        start = time.perf_counter()
        for first in range(0, jobs, BATCH):
            batch = [
                task.configure(lock=job_key(n, keys), task_kwargs={"n": n}).job
                for n in range(first, min(first + BATCH, jobs))
            ]
            await app.job_manager.batch_defer_jobs_async(batch)
            # Each run's table is new, so it has no statistics: the planner then
            # takes "status = 'todo'" for a row or two and plans the fetch as
            # "test every todo job's lock, sort, take the first", each test a
            # scan of the (id, lock) index, whose first column is not the lock.
            # Over 10,000 keys a fetch then took 0.3 s with 5,000 jobs waiting
            # and 2 s with 10,000 (the runs that stalled at 3 jobs/s). A table
            # in use has statistics from autovacuum, and PostgreSQL's advice
            # after a bulk load is ANALYZE; with them the fetch walks the
            # priority index and stops at the first free job (1-2 ms). It
            # costs 5-50 ms a batch, counted in procrastinate's time.
            await connection.execute("ANALYZE procrastinate_jobs")
        progress = Progress(jobs, start)
        while True:  # polled: the database has no event to wait on
            left = await count_jobs(connection, "status IN ('todo', 'doing')")
            if progress.done(left, time.perf_counter()):
                break
            await asyncio.sleep(POLL)
        elapsed = time.perf_counter() - start
        succeeded = await count_jobs(connection, "status = 'succeeded'")
    if succeeded != jobs:
        raise RuntimeError(f"procrastinate: {succeeded} of {jobs} jobs succeeded")
    return elapsed


def run_procrastinate(
    dsn: str,
    *,
    processes: int,
    keys: int,
    jobs: int,
    concurrency: int | None = None,
    polling: float | None = None,
) -> float:
    """Run *jobs* no-op jobs over *keys* keys with *processes* workers; return jobs/s."""
    best_concurrency, best_polling = PROCRASTINATE_SETTINGS[1 if keys == 1 else 10_000]
    concurrency = best_concurrency if concurrency is None else concurrency
    polling = best_polling if polling is None else polling
    reset_procrastinate_schema(dsn)
    command = [sys.executable, __file__, "--procrastinate-worker", dsn]
    command += [str(concurrency), str(polling)]
    workers = [subprocess.Popen(command) for _ in range(processes)]
    try:
        wait_for_workers(dsn, processes, workers)
        elapsed = asyncio.run(produce_and_wait(dsn, keys, jobs))
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    return jobs / elapsed


# -- the table ---------------------------------------------------------------------

Side = Callable[..., float]


@dataclasses.dataclass
class Outcome:
    rates: list[float] = dataclasses.field(default_factory=list)  # of the runs that finished
    stalls: list[tuple[int, Stall]] = dataclasses.field(default_factory=list)  # (run, stall)
    missing: str = ""  # why there are no rates


def measure(sides: dict[str, Side], dsn: str, runs: int, **params: int) -> dict[str, Outcome]:
    """Run each side *runs* times, alternately, so the machine's noise hits both."""
    outcomes = {name: Outcome() for name in sides}
    for run in range(runs):
        for name, side in sides.items():
            outcome = outcomes[name]
            if outcome.missing:
                continue
            try:
                outcome.rates.append(side(dsn, **params))
            except NotImplementedError:
                outcome.missing = "not built"
            except Stall as stall:
                outcome.stalls.append((run, stall))
    return outcomes


def cell(outcome: Outcome) -> str:
    """The median (min-max) of the runs, or STALL if any run stalled.

    A median over finished and stalled runs would be neither a throughput nor
    a stall, so one stall takes the whole cell; ``stalls`` says what happened.
    """
    if outcome.missing:
        return f"{outcome.missing:>23}"
    runs = len(outcome.rates) + len(outcome.stalls)
    if outcome.stalls:
        return f"{f'STALL {len(outcome.stalls)} of {runs} runs':>23}"
    rates = outcome.rates
    spread = f"({min(rates):,.0f}-{max(rates):,.0f})"
    return f"{statistics.median(rates):>9,.0f} {spread:>13}"


def stalls(name: str, outcome: Outcome) -> list[str]:
    """A line per stalled run (jobs done, seconds, why), then the side's finished runs."""
    lines = [f"  {name} run {run + 1}: {stall}" for run, stall in outcome.stalls]
    if lines and outcome.rates:
        finished = ", ".join(f"{rate:,.0f}" for rate in outcome.rates)
        lines.append(f"  {name}'s other runs finished: {finished} jobs/s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=SERVER, help=f"PostgreSQL server ({SERVER})")
    parser.add_argument("--only", choices=["inturn", "procrastinate"], help="run one side")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per run (10,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per configuration (3)")
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, one run")
    parser.add_argument("--processes", type=int, nargs="+", default=PROCESS_COUNTS)
    parser.add_argument("--keys", type=int, nargs="+", default=KEY_COUNTS)
    parser.add_argument("--concurrency", type=int, help="procrastinate: per worker process")
    parser.add_argument("--polling", type=float, help="procrastinate: fetch polling (s)")
    parser.add_argument("--procrastinate-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--inturn-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inturn_worker:
        inturn_worker(args.inturn_worker)
        return
    if args.procrastinate_worker:
        dsn, concurrency, polling = args.procrastinate_worker
        procrastinate_worker(dsn, int(concurrency), float(polling))
        return
    jobs, runs = (1_000, 1) if args.quick else (args.jobs, args.runs)
    dsn = ensure_database(args.server)
    sides: dict[str, Side] = {
        "inturn": run_inturn,
        "procrastinate": functools.partial(
            run_procrastinate, concurrency=args.concurrency, polling=args.polling
        ),
    }
    if args.only:
        sides = {args.only: sides[args.only]}

    print(f"jobs/s end to end, {jobs:,} no-op jobs per run: median of {runs} (min-max)")
    if "procrastinate" in sides:
        print(f"procrastinate: lock=key, {BATCH:,} jobs per batch defer, listen_notify=True")
        for keys, (concurrency, polling) in PROCRASTINATE_SETTINGS.items():
            concurrency = args.concurrency or concurrency
            polling = args.polling or polling
            over = f"{keys:,} key" + ("s" if keys > 1 else "")
            print(f"  over {over}: concurrency {concurrency} per process, polling {polling} s")
    header = f"{'keys':>6} {'procs':>5}" + "".join(f" {name + ' jobs/s':>23}" for name in sides)
    print(header + (f" {'ratio':>6}" if len(sides) == 2 else ""), flush=True)
    for keys in args.keys:
        for processes in args.processes:
            outcomes = measure(sides, dsn, runs, processes=processes, keys=keys, jobs=jobs)
            line = f"{keys:>6,} {processes:>5}" + "".join(f" {cell(o)}" for o in outcomes.values())
            inturn, baseline = outcomes.get("inturn"), outcomes.get("procrastinate")
            if inturn and baseline and (inturn.stalls or baseline.stalls):
                line += f" {'stall':>6}"  # no ratio: a stall's figure is no throughput
            elif inturn and inturn.rates and baseline and baseline.rates:
                ratio = statistics.median(inturn.rates) / statistics.median(baseline.rates)
                line += f" {ratio:>6.1f}"
            print(line, flush=True)
            for name, outcome in outcomes.items():
                for detail in stalls(name, outcome):
                    print(detail, flush=True)
    if "inturn" in sides:
        takeovers = [failover(dsn) for _ in range(runs)]
        print(
            f"inturn failover, SIGKILL of a key's owner to its next start elsewhere"
            f" (TTL 2 s): median {statistics.median(takeovers):.2f} s"
            f" ({min(takeovers):.2f}-{max(takeovers):.2f})"
        )


if __name__ == "__main__":
    main()
