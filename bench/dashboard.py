"""The reads a web dashboard makes, and its pages, on a journal of 1,000,000 unfinished jobs.

    python bench/dashboard.py                       # SQLite and PostgreSQL, full size
    python bench/dashboard.py --quick               # 10,000 keys: a smoke test
    python bench/dashboard.py --only sqlite         # one journal
    python bench/dashboard.py --dsn postgresql://...  # another server
    python bench/dashboard.py --reuse               # read the journal the last run built

The journal: ``--keys`` keys (100,000) with ``--per-key`` unfinished jobs each
(10): 1,000,000 jobs.  Of the keys, ``--blocked`` (10,000) are blocked: half
with a retrying head, half halted by a discarded head (a dead letter each;
those keys get one job more, so the count of unfinished jobs stays round);
``--running`` (300) have a running head; the rest wait.  Beside them, 1,000
scheduled jobs, and 3,000 keyless jobs completed over the last 15 minutes
(the throughput the overview shows).  Everything is written through the
journal's own `write` (`SQLiteJournal`, `PostgresJournal` as a single
holder), in batches of 10,000 changes, with the *now* each change would
have had: no row is made by hand.  On PostgreSQL the table is then
``VACUUM ANALYZE``\\ d, as autovacuum would have done on a journal this size
(index-only scans need the visibility map).

Each read runs ``--runs`` times (20) through the journal's reader
(`SQLiteReader`, `PostgresReader`: what ``inturn web`` reads with), and the
table gives the median and the 95th percentile of its wall time, in ms: the
time a dashboard's request waits on the journal, the reader's connection
included (it opens one per read, and checks the schema).  The last two
columns time the same read on one connection held open (the reader's own
functions of a connection): the queries alone.  The last row, ``keys``
(oldest head first, the command line's read), is there for scale: it walks
every key.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import trio

import inturn
from inturn.journal import (
    Append,
    Change,
    Complete,
    Discard,
    Journal,
    MarkAttempt,
    PostgresReader,
    Retrying,
    SQLiteReader,
)
from inturn.journal._dialect import DialectReader
from inturn.journal._postgres_schema import connect

DSN = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA = "inturn_dashboard_bench"
BATCH = 10_000


def key(n: int) -> str:
    return f"k{n:06d}"


async def build(journal: Journal, keys: int, per_key: int, blocked: int, running: int) -> None:
    """The journal the module docstring describes, through ``journal.write``."""
    await journal.open()
    try:
        start = time.time() - 3600.0
        changes: list[Change] = []
        next_id = 1

        async def flush(now: float, force: bool = False) -> None:
            if changes and (force or len(changes) >= BATCH):
                await journal.write(changes, now=now)
                changes.clear()

        heads = {}
        for n in range(keys):  # each key's jobs together: the heads are the first ids
            heads[n] = next_id
            for _ in range(per_key):
                changes.append(Append(job_id=next_id, key=key(n), data=b'{"n": 1}'))
                next_id += 1
            await flush(start)
        for _ in range(1_000):
            changes.append(Append(job_id=next_id, key=None, data=b"{}", due_at=start + 86_400))
            next_id += 1
        await flush(start, force=True)
        # Blocked keys spread over the names: every (keys / blocked)-th key.
        step = max(1, keys // blocked)
        chosen = list(range(0, keys, step))[:blocked]
        retrying, halted = chosen[: blocked // 2], chosen[blocked // 2 :]
        busy = list(range(1, keys, step))[:running]
        changes += [MarkAttempt(heads[n], 1) for n in (*retrying, *busy)]
        changes += [
            Retrying(heads[n], "TimeoutError: the API took too long", start + 7200.0)
            for n in retrying
        ]
        changes += [Discard(heads[n], "ValueError: bad row", halt=True) for n in halted]
        await flush(start + 60.0, force=True)
        for n in halted:  # one job more, so the keys keep as many as the others
            changes.append(Append(job_id=next_id, key=key(n), data=b'{"n": 1}'))
            next_id += 1
        await flush(start + 60.0, force=True)
        now = time.time()
        for i in range(3_000):  # completions over the last 15 minutes, one write each
            at = now - 900.0 + i * 0.3
            await journal.write(
                [Append(job_id=next_id, key=None, data=b"{}"), MarkAttempt(next_id, 1)], now=at
            )
            await journal.write([Complete(next_id)], now=at)
            next_id += 1
    finally:
        await journal.aclose()


def timed(read: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and 95th percentile of *read*'s wall time over *runs*, in ms."""
    read()  # warm: the first read pays for the file's pages or the server's cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        read()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def reads(reader: Any, keys: int) -> list[tuple[str, Callable[[], object]]]:
    now = time.time()
    middle = key(keys // 2)
    [head] = reader.jobs(key(keys // 3), limit=1)

    def key_page() -> None:
        jobs = reader.jobs(key(keys // 3), limit=50)
        reader.job(jobs[0].id)
        reader.steps(jobs[0].id)

    return [
        ("overview()", lambda: reader.overview(now=now)),
        (
            'keys_by_name(state="blocked", limit=50)',
            lambda: reader.keys_by_name(state="blocked", limit=50, now=now),
        ),
        (
            'keys_by_name(state="blocked", after=middle)',
            lambda: reader.keys_by_name(state="blocked", after=middle, limit=50, now=now),
        ),
        (
            'keys_by_name(state="running", limit=50)',
            lambda: reader.keys_by_name(state="running", limit=50, now=now),
        ),
        (
            'keys_by_name(state="halted", limit=50)',
            lambda: reader.keys_by_name(state="halted", limit=50, now=now),
        ),
        (
            'keys_by_name(state="waiting", limit=50)',
            lambda: reader.keys_by_name(state="waiting", limit=50, now=now),
        ),
        (
            f'keys_by_name(prefix="{key(keys // 3)[:5]}", limit=50)',
            lambda: reader.keys_by_name(prefix=key(keys // 3)[:5], limit=50, now=now),
        ),
        (
            "keys_by_name(after=middle, limit=50)",
            lambda: reader.keys_by_name(after=middle, limit=50, now=now),
        ),
        ("jobs(key, limit=50)", lambda: reader.jobs(key(keys // 3), limit=50)),
        ("job(id)", lambda: reader.job(head.id)),
        ("steps(id)", lambda: reader.steps(head.id)),
        ("a key's page: jobs + job + steps", key_page),
    ]


class _Held(DialectReader[Any]):
    """A reader's reads on one connection held open: the queries without the connecting."""

    def __init__(self, reader: Any, connection: Any) -> None:
        self.dialect = reader.dialect  # type: ignore[misc]
        self.connection = connection

    def _read(self, run: Callable[[Any], Any]) -> Any:
        return run(self.connection)


def report(name: str, reader: Any, held: Any, keys: int, runs: int) -> None:
    overview = reader.overview(now=time.time())
    print(
        f"\n{name}: {overview.jobs:,} jobs due, {overview.scheduled:,} scheduled, {overview.dead:,} dead;"
        f" keys: {overview.running:,} running, {overview.retrying:,} retrying, {overview.waiting:,} waiting,"
        f" {overview.halted:,} halted, {overview.paused:,} paused;"
        f" {sum(m.completed for m in overview.minutes):,} completed in 15 minutes"
    )
    print(f"| read ({runs} runs, ms) | median | p95 | median, held | p95, held |")
    print("|---|---:|---:|---:|---:|")
    for (label, read), (_, on_held) in zip(reads(reader, keys), reads(held, keys), strict=True):
        median, p95 = timed(read, runs)
        held_median, held_p95 = timed(on_held, runs)
        print(f"| `{label}` | {median:.1f} | {p95:.1f} | {held_median:.1f} | {held_p95:.1f} |")
    median, p95 = timed(lambda: held.keys(state="blocked", limit=50, now=time.time()), 3)
    print(
        f'| `keys(state="blocked", limit=50)`, for scale (3 runs) | | | {median:.1f} | {p95:.1f} |'
    )


PAGES = (
    "/",
    "/keys?state=blocked",
    "/key?key={key}",
    "/api/overview",
    "/api/keys?state=blocked&limit=50",
    "/api/keys/{key}?limit=50",
)
"""What the dashboard serves most: its overview, a page of 50 blocked keys, a key's page."""


def pages(reader: Any, journal: Callable[[], Journal], keys: int, runs: int) -> None:
    """The dashboard's answers, rendered in this process as ``inturn web`` renders them: the
    time from the request to the whole response, the reads included, in ms."""
    import httpx

    from inturn.web import create_app, reader_source

    app = create_app(reader_source(reader, journal, answer_within=10))

    async def measure() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            print(f"| page ({runs} runs, ms) | median | p95 |")
            print("|---|---:|---:|")
            for page in PAGES:
                url = page.format(key=key(keys // 3))
                times = []
                for _ in range(runs + 1):  # the first warms the caches
                    started = time.perf_counter()
                    answer = await client.get(url)
                    times.append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200, (url, answer.text[:200])
                times = sorted(times[1:])
                p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                print(f"| `GET {page}` | {statistics.median(times):.1f} | {p95:.1f} |")

    trio.run(measure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 keys (smoke test)")
    parser.add_argument("--keys", type=int, help="keys (default 100,000)")
    parser.add_argument("--per-key", type=int, default=10, help="unfinished jobs per key (10)")
    parser.add_argument("--blocked", type=int, help="blocked keys (default a tenth of the keys)")
    parser.add_argument("--running", type=int, default=300, help="keys with a running head (300)")
    parser.add_argument("--runs", type=int, default=20, help="runs per read (20)")
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="one journal")
    parser.add_argument("--dsn", default=os.environ.get("INTURN_BENCH_DSN", DSN))
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the SQLite file goes")
    parser.add_argument("--reuse", action="store_true", help="read what the last run built")
    args = parser.parse_args()
    keys = args.keys or (10_000 if args.quick else 100_000)
    blocked = args.blocked if args.blocked is not None else keys // 10
    shape = (keys, args.per_key, blocked, args.running)
    if args.only in (None, "sqlite"):
        path = os.path.join(args.dir, f"inturn-dashboard-{keys}.db")
        if not args.reuse:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            started = time.perf_counter()
            trio.run(build, inturn.SQLiteJournal(path, durability="normal"), *shape)
            print(f"SQLite: built {path} in {time.perf_counter() - started:.0f} s")
        reader = SQLiteReader(path)
        with contextlib.closing(reader._connect()) as sqlite_connection:
            held = _Held(reader, sqlite_connection)
            report("SQLite (SQLiteReader)", reader, held, keys, args.runs)
        pages(reader, lambda: inturn.SQLiteJournal(path), keys, args.runs)
    if args.only in (None, "postgres"):
        import psycopg

        if not args.reuse:
            with psycopg.connect(args.dsn, autocommit=True) as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            started = time.perf_counter()
            trio.run(build, inturn.PostgresJournal(args.dsn, schema=SCHEMA), *shape)
            with psycopg.connect(args.dsn, autocommit=True) as connection:
                connection.execute(f"VACUUM ANALYZE {SCHEMA}.jobs")
                connection.execute(f"VACUUM ANALYZE {SCHEMA}.halted")
            print(f"PostgreSQL: built schema {SCHEMA} in {time.perf_counter() - started:.0f} s")
        pg_reader = PostgresReader(args.dsn, schema=SCHEMA)
        with connect(args.dsn, SCHEMA, "bench") as pg_connection:
            report(
                "PostgreSQL (PostgresReader)",
                pg_reader,
                _Held(pg_reader, pg_connection),
                keys,
                args.runs,
            )
        pages(pg_reader, lambda: inturn.PostgresJournal(args.dsn, schema=SCHEMA), keys, args.runs)


if __name__ == "__main__":
    main()
