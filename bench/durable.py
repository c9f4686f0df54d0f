"""Durable throughput of inturn on SQLite against a minimal hand-written design.

    python bench/durable.py            # full run (issue #3's figures)
    python bench/durable.py --quick    # smaller counts, for a smoke test
    python bench/durable.py --runs 5 --no-backlog   # the ratios only, medians of 5

Both sides run the same workload, end to end: 200 concurrent producer tasks
each await their ``send`` until the job is durable; a no-op handler awaits
one checkpoint; each job's completion is durable before its key's next job
starts.  Jobs go round-robin over the keys.  Every run gets a fresh file.

The raw design is the minimal trio design of bench/throughput.py (a dict of
key -> unbounded memory channel, one task per key spawned lazily that exits
when its channel is empty) plus one writer: a dedicated thread owning one
sqlite3 connection (WAL, ``synchronous`` FULL or NORMAL) fed by a queue.  It
takes everything waiting (inserts of new jobs, deletes of completed ones),
runs it in one ``BEGIN IMMEDIATE`` transaction, commits once, and wakes every
caller of the batch with one callback into trio.  A producer hands its job to
the key's channel once the insert is committed; the key's task awaits the
delete's commit before it takes the next job.  It records no attempts, has no
unique keys, retries, halts or recovery: a ceiling, not a rival.

inturn runs with ``SQLiteJournal(path, durability=...)`` and its defaults
otherwise; producers await ``sup.send``, then ``wait_idle()``.  Both sides run
in this one process, alternately, so machine noise hits both; the ratio
inturn/raw is the figure to read.  With ``--runs N`` each cell runs N times
(raw, inturn, raw, inturn, ...) and the table gives each run's ratio and
their median: on a shared machine one run's ratio moves by 10-20%.  The
CPU columns are each side's CPU time per job, on its writer thread + in the
rest of the process (trio's thread; Linux's per-thread schedstat): both
threads need the GIL, so the two add up to about the wall time.  ``commits`` is the number of transactions
each side committed (jobs per commit = group commit at work).

Last, bounded memory for long backlogs: 1,000,000 queued jobs, on one key
and on 100,000 keys with 10 each (accepted with ``send_many`` behind
handlers that never return, ``max_concurrency=100``, default ``window`` and
``max_buffered``): the peak RSS growth, then the time from
``open_supervisor`` to the first handler call when that file is recovered,
and its RSS growth.  Each runs in a fresh child process, with a time limit.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import logging
import math
import os
import queue
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias

import structlog
import trio

import inturn

PRODUCERS = 200
WRITER_CPU: dict[str, float] = {}
"""Seconds the run's writer thread was on a CPU, set by each run before its writer stops."""
Durability: TypeAlias = Literal["full", "normal"]
Run: TypeAlias = Callable[[int, int, str, Durability], Awaitable[int]]


def thread_cpu(thread: threading.Thread) -> float:
    """Seconds *thread* has run on a CPU (Linux's per-thread schedstat)."""
    with open(f"/proc/self/task/{thread.native_id}/schedstat") as stat:
        return int(stat.read().split()[0]) / 1e9


def configure_logging() -> None:
    # What an application does in production: debug off, loggers cached.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )


# -- the raw design -------------------------------------------------------------


class Request:
    __slots__ = ("done", "error", "params", "rowid", "sql")

    def __init__(self, sql: str, params: tuple[object, ...]) -> None:
        self.sql, self.params = sql, params
        self.done = trio.Event()
        self.rowid = 0
        self.error: sqlite3.Error | None = None


def wake(batch: list[Request]) -> None:
    for request in batch:
        request.done.set()


class RawWriter:
    """One thread, one connection: one transaction for everything waiting."""

    def __init__(self, path: str, durability: Durability) -> None:
        self.commits = 0
        self._queue: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._token = trio.lowlevel.current_trio_token()
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(f"PRAGMA synchronous = {durability.upper()}")
        connection.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " key TEXT NOT NULL, data BLOB NOT NULL)"
        )
        self._thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
        self._thread.start()

    async def execute(self, sql: str, params: tuple[object, ...]) -> int:
        """Run *sql* in the next batch; return its rowid once committed."""
        request = Request(sql, params)
        self._queue.put(request)
        await request.done.wait()
        if request.error is not None:
            raise request.error
        return request.rowid

    async def aclose(self) -> None:
        self._queue.put(None)
        await trio.to_thread.run_sync(self._thread.join)

    def _serve(self, connection: sqlite3.Connection) -> None:
        with contextlib.closing(connection):
            while (first := self._queue.get()) is not None:
                batch, stop = [first], False
                while True:  # take everything already waiting
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batch.append(more)
                try:
                    connection.execute("BEGIN IMMEDIATE")
                    for request in batch:
                        cursor = connection.execute(request.sql, request.params)
                        request.rowid = cursor.lastrowid or 0
                    connection.execute("COMMIT")
                    self.commits += 1
                except sqlite3.Error as exc:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    for request in batch:
                        request.error = exc
                self._token.run_sync_soon(wake, batch)
                if stop:
                    return


async def run_raw(jobs: int, keys: int, path: str, durability: Durability) -> int:
    writer = RawWriter(path, durability)
    channels: dict[str, trio.MemorySendChannel[int]] = {}

    async def handler(job_id: int) -> None:
        await trio.lowlevel.checkpoint()

    async def actor(key: str, receive: trio.MemoryReceiveChannel[int]) -> None:
        while True:
            try:
                job_id = receive.receive_nowait()
            except trio.WouldBlock:
                del channels[key]  # empty: the next job for this key spawns a new task
                return
            await handler(job_id)
            await writer.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    async def producer(first: int, nursery: trio.Nursery) -> None:
        for n in range(first, jobs, PRODUCERS):
            key = f"key-{n % keys}"
            data = json.dumps(n).encode()
            job_id = await writer.execute("INSERT INTO jobs (key, data) VALUES (?, ?)", (key, data))
            send = channels.get(key)
            if send is None:
                send, receive = trio.open_memory_channel[int](math.inf)
                channels[key] = send
                nursery.start_soon(actor, key, receive)
            send.send_nowait(job_id)

    try:
        async with trio.open_nursery() as nursery:
            for first in range(PRODUCERS):
                nursery.start_soon(producer, first, nursery)
    finally:
        WRITER_CPU["seconds"] = thread_cpu(writer._thread)
        await writer.aclose()
    return writer.commits


# -- inturn -----------------------------------------------------------------------


async def run_inturn(jobs: int, keys: int, path: str, durability: Durability) -> int:
    async def handler(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    journal = inturn.SQLiteJournal(path, durability=durability)
    async with inturn.open_supervisor(handler, journal=journal) as sup:

        async def producer(first: int) -> None:
            for n in range(first, jobs, PRODUCERS):
                await sup.send(f"key-{n % keys}", n)

        async with trio.open_nursery() as nursery:
            for first in range(PRODUCERS):
                nursery.start_soon(producer, first)
        await sup.wait_idle()
        [thread] = [t for t in threading.enumerate() if t.name.startswith("inturn-sqlite:")]
        WRITER_CPU["seconds"] = thread_cpu(thread)
    return journal.commits


@dataclasses.dataclass
class Figures:
    """One run: jobs/s, commits, and CPU µs per job of its writer thread and of the rest."""

    rate: float
    commits: int
    writer_us: float
    rest_us: float


def timed(run: Run, jobs: int, keys: int, durability: Durability) -> Figures:
    """One run on a fresh file, checked empty afterwards."""
    with tempfile.TemporaryDirectory(prefix="inturn-bench-") as directory:
        path = os.path.join(directory, "journal.db")
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        commits = trio.run(run, jobs, keys, path, durability)
        rate = jobs / (time.perf_counter() - start)
        cpu = time.process_time() - cpu
        writer = WRITER_CPU.pop("seconds")
        with contextlib.closing(sqlite3.connect(path)) as connection:
            table = "jobs" if run is run_raw else "inturn_jobs"  # inturn's names are prefixed
            (left,) = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        if left:
            raise RuntimeError(f"{run.__name__}: {left} jobs left in the file")
    return Figures(rate, commits, writer / jobs * 1e6, (cpu - writer) / jobs * 1e6)


# -- backlog and recovery, as they stand before paging ------------------------------


def peak_rss_kib() -> int:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent
    # across fork and exec, so a child would report the benchmark's own peak.
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


CONCURRENCY = 100


async def fill_backlog(path: str, count: int, keys: int) -> dict[str, float]:
    """*count* jobs over *keys* keys, queued behind handlers that never return."""
    running = trio.Event()

    async def handler(job: inturn.Job) -> None:
        running.set()
        await trio.sleep_forever()

    per_key = count // keys
    before = peak_rss_kib()
    start = time.perf_counter()
    with trio.CancelScope() as scope:
        journal = inturn.SQLiteJournal(path, durability="normal")
        async with inturn.open_supervisor(
            handler, journal=journal, max_concurrency=CONCURRENCY
        ) as sup:
            batch = 10_000
            for first in range(0, count, batch):
                numbers = range(first, min(count, first + batch))
                await sup.send_many((f"key-{n // per_key}", n) for n in numbers)
            await running.wait()
            figures = {
                "growth_mib": (peak_rss_kib() - before) / 1024,
                "seconds": time.perf_counter() - start,
            }
            scope.cancel()  # leave the jobs in the file for the recovery child
    return figures


async def first_job(path: str) -> dict[str, float]:
    """Seconds from ``open_supervisor`` to the first handler call, on a full file."""
    started: list[float] = []
    running = trio.Event()

    async def handler(job: inturn.Job) -> None:
        started.append(time.perf_counter())
        running.set()
        await trio.sleep_forever()

    before = peak_rss_kib()
    start = time.perf_counter()
    with trio.CancelScope() as scope:
        journal = inturn.SQLiteJournal(path)
        async with inturn.open_supervisor(handler, journal=journal, max_concurrency=CONCURRENCY):
            await running.wait()
            scope.cancel()
    return {
        "seconds": started[0] - start,
        "growth_mib": (peak_rss_kib() - before) / 1024,
    }


def child(what: str, path: str, count: int, keys: int) -> None:
    configure_logging()
    if what == "backlog":
        print(json.dumps(trio.run(fill_backlog, path, count, keys)))
    else:
        print(json.dumps(trio.run(first_job, path)))


def in_child(what: str, path: str, count: int, keys: int, limit: float) -> dict[str, float] | None:
    """Run *what* in a fresh interpreter; None if it took longer than *limit* seconds."""
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", what, path, str(count), str(keys)],
            check=True,
            capture_output=True,
            text=True,
            timeout=limit,
        ).stdout
    except subprocess.TimeoutExpired:
        return None
    figures: dict[str, float] = json.loads(out)
    return figures


def backlog_figures(count: int, keys: int, limit: float) -> None:
    print(f"\nbacklog: {count:,} queued jobs on {keys:,} key(s), each step in a fresh process")
    with tempfile.TemporaryDirectory(prefix="inturn-bench-") as directory:
        path = os.path.join(directory, "backlog.db")
        backlog = in_child("backlog", path, count, keys, limit)
        if backlog is None:
            print(f"  skipped: filling the backlog took longer than {limit:.0f} s")
            return
        print(
            f"  peak RSS growth with the backlog queued: {backlog['growth_mib']:,.1f} MiB"
            f" (goal: < 100 MiB; filled in {backlog['seconds']:.1f} s with send_many)"
        )
        recovery = in_child("recovery", path, count, keys, limit)
        if recovery is None:
            print(f"  skipped: recovery took longer than {limit:.0f} s")
            return
        print(
            f"  recovery, open_supervisor to first handler call: {recovery['seconds']:.2f} s"
            f" (goal: < 2 s); peak RSS growth {recovery['growth_mib']:,.1f} MiB"
        )


def ratios(jobs: int, runs: int) -> None:
    """The table of ratios: each cell *runs* times, raw and inturn alternated."""
    print(
        f"jobs per run: {jobs:,}; {PRODUCERS} producers each awaiting send until durable;"
        " no-op handler; each completion durable before the key's next job;"
        " CPU: µs per job on the writer thread + the rest of the process"
    )
    print(
        f"{'keys':>7}  {'durability':>10}  {'raw jobs/s':>10}  {'inturn jobs/s':>13}"
        f"  {'ratio':>5}  {'raw commits':>11}  {'inturn commits':>14}"
        f"  {'raw CPU':>11}  {'inturn CPU':>11}" + ("  ratio of each run" if runs > 1 else "")
    )
    durabilities: tuple[Durability, ...] = ("full", "normal")
    for keys in (1, 10_000):
        for durability in durabilities:
            pairs = []
            for _ in range(runs):
                raw = timed(run_raw, jobs, keys, durability)
                ours = timed(run_inturn, jobs, keys, durability)
                pairs.append((ours.rate / raw.rate, raw, ours))
            pairs.sort(key=lambda pair: pair[0])
            ratio, raw, ours = pairs[(runs - 1) // 2]
            each = "  " + " ".join(f"{pair[0]:.2f}" for pair in pairs) if runs > 1 else ""
            print(
                f"{keys:>7,}  {durability:>10}  {raw.rate:>10,.0f}  {ours.rate:>13,.0f}"
                f"  {ratio:>5.2f}  {raw.commits:>11,}  {ours.commits:>14,}"
                f"  {raw.writer_us:>5.1f}+{raw.rest_us:<5.1f}  {ours.writer_us:>5.1f}+{ours.rest_us:<5.1f}"
                f"{each}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--jobs", type=int, help="jobs per run (default 100,000)")
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="runs per cell; the row is the median ratio's run",
    )
    parser.add_argument("--no-backlog", action="store_true", help="the ratios only")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, path, count, keys = args.child
        child(what, path, int(count), int(keys))
        return
    configure_logging()
    jobs = args.jobs or (5_000 if args.quick else 100_000)
    backlog = 20_000 if args.quick else 1_000_000
    ratios(jobs, args.runs)
    if args.no_backlog:
        return
    for keys in (1, backlog // 10):
        backlog_figures(backlog, keys, limit=60 if args.quick else 300)


if __name__ == "__main__":
    main()
