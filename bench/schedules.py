"""Recurring schedules under load: 10,000 schedules every second on one process (issue 49).

    python bench/schedules.py                                # 10,000 schedules, 20 s
    python bench/schedules.py --schedules 1000 --seconds 5   # a smoke run

Two runs on a fresh SQLite file each (``SQLiteJournal``, its defaults), one
after the other in this process:

* **schedules**: N recurring schedules, ``every=1`` on one grid (all tick at
  the same whole seconds), schedule *n* sending payload *n* to key ``k<n>``,
  ``misfire="all"`` (a tick fired late still gets its job, so both runs
  have every tick's job);
* **delay=**: the same load as one-off jobs, sent before the first tick with
  ``send_many`` as ``Item(f"k{n}", n, at=tick)`` for every tick of the run.

The setup (N ``schedule`` calls from 100 tasks, or the ``send_many`` calls)
ends before the first tick and is not measured.  A no-op handler records when
each job starts.  Key ``k<n>`` runs its jobs in order, one per tick, so its
*i*-th job is tick *i*'s: its *lag* is its start minus that tick, however
late.  Ten seconds after the last tick measured the schedules are paused (the
ticks after it are not measured) and the run waits for every job.  CPU is this process's user + system time over the ticking
seconds, as a share of one core.
"""

from __future__ import annotations

import argparse
import logging
import math
import resource
import statistics
import tempfile
import time
from pathlib import Path

import structlog
import trio

import inturn

TASKS = 100
"""Tasks that set the schedules up (and pause them) at once: their writes share commits."""


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def each(count: int, call: object) -> None:
    """``await call(n)`` for every n below *count*, from `TASKS` tasks."""

    async def worker(first: int) -> None:
        for n in range(first, count, TASKS):
            await call(n)  # type: ignore[operator]

    async with trio.open_nursery() as nursery:
        for first in range(TASKS):
            nursery.start_soon(worker, first)


async def measure(path: Path, count: int, seconds: int, recurring: bool) -> dict[str, float]:
    starts: dict[int, list[float]] = {n: [] for n in range(count)}

    async def handler(job: inturn.Job) -> None:
        starts[job.payload].append(time.time())  # type: ignore[index]

    journal = inturn.SQLiteJournal(path)
    async with inturn.open_supervisor(handler, journal=journal, idle_timeout=5.0) as sup:
        first = math.ceil(time.time()) + 5.0 + count / 500  # the ticks' grid: whole seconds

        async def schedule(n: int) -> None:
            await sup.schedule(f"s{n}", f"k{n}", n, every=1, start=first, misfire="all")

        async def pause(n: int) -> None:
            await sup.pause_schedule(f"s{n}")

        if recurring:
            await each(count, schedule)
        else:
            for tick in range(seconds):
                await sup.send_many(inturn.Item(f"k{n}", n, at=first + tick) for n in range(count))
        if time.time() >= first:
            raise SystemExit("the setup outlasted its margin: the first tick came before its end")
        await trio.sleep(first - time.time())
        began = cpu()
        await trio.sleep(seconds - 0.5)  # ticks first .. first + seconds - 1
        used = cpu() - began
        if recurring:  # once the last tick measured has fired, however late
            await trio.sleep(10.0)
            await each(count, pause)
        await sup.wait_idle()
    lags = sorted(
        start - (first + tick)
        for times in starts.values()
        for tick, start in enumerate(times[:seconds])
    )
    return {
        "jobs": len(lags),  # of the ticks measured: count * seconds, unless one was lost
        "p50 ms": 1000 * statistics.median(lags),
        "p99 ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
        "max ms": 1000 * lags[-1],
        "cpu %": 100 * used / (seconds - 0.5),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rows = []
    for name, recurring in (("schedules", True), ("delay=", False)):
        with tempfile.TemporaryDirectory() as folder:
            figures = trio.run(
                measure, Path(folder) / "jobs.db", args.schedules, args.seconds, recurring
            )
        rows.append((name, figures))
    print(f"{args.schedules} schedules every second, {args.seconds} s, SQLiteJournal")
    print(f"{'':10} {'jobs':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'cpu %':>7}")
    for name, figures in rows:
        print(
            f"{name:10} {figures['jobs']:8.0f} {figures['p50 ms']:8.1f} {figures['p99 ms']:8.1f}"
            f" {figures['max ms']:8.1f} {figures['cpu %']:7.1f}"
        )


if __name__ == "__main__":
    main()
