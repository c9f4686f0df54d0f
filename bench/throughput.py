"""Throughput of inturn against a minimal hand-written trio design, side by side.

    python bench/throughput.py            # full run (issue #2's figures)
    python bench/throughput.py --quick    # smaller counts, for a smoke test

The minimal design is what one would write by hand for per-key FIFO on trio:
a dict of key -> unbounded memory channel, one task per key spawned lazily
that exits when its channel is empty, a no-op handler that awaits one
checkpoint, and a producer that awaits one checkpoint per job.  It has no
journal, no retries, no unique keys, no stats and no idle linger, so it is a
ceiling, not a rival.

inturn runs with its default in-memory journal (every payload goes through
the JSON codec) and a producer that awaits ``send`` per job, then
``wait_idle()``.  Both run in this one process, alternately, so machine noise
hits both; the ratio inturn/minimal is the figure to read.

Memory: each side runs 100,000 and then one million distinct keys, one job
each, in a fresh child process, and reports the growth of its peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import subprocess
import sys
import time

import structlog
import trio

import inturn


def configure_logging() -> None:
    # What an application does in production: debug off, loggers cached.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )


async def run_minimal(jobs: int, keys: int) -> None:
    channels: dict[str, trio.MemorySendChannel[int]] = {}

    async def handler(job: int) -> None:
        await trio.lowlevel.checkpoint()

    async def actor(key: str, receive: trio.MemoryReceiveChannel[int]) -> None:
        while True:
            try:
                job = receive.receive_nowait()
            except trio.WouldBlock:
                # empty: exit, and let the next job for this key spawn a new task
                del channels[key]
                return
            await handler(job)

    async with trio.open_nursery() as nursery:
        for n in range(jobs):
            key = f"key-{n % keys}"
            send = channels.get(key)
            if send is None:
                send, receive = trio.open_memory_channel[int](math.inf)
                channels[key] = send
                nursery.start_soon(actor, key, receive)
            send.send_nowait(n)
            await trio.lowlevel.checkpoint()


async def run_inturn(jobs: int, keys: int, idle_timeout: float = 1.0) -> None:
    async def handler(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    async with inturn.open_supervisor(handler, idle_timeout=idle_timeout) as sup:
        for n in range(jobs):
            await sup.send(f"key-{n % keys}", n)
        await sup.wait_idle()


def timed(run: object, jobs: int, keys: int) -> float:
    gc.collect()
    start = time.perf_counter()
    trio.run(run, jobs, keys)  # type: ignore[arg-type]
    return jobs / (time.perf_counter() - start)


def peak_rss_kib() -> int:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent
    # across fork and exec, so a child would report the benchmark's own peak.
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def rss_child(side: str, keys: int, idle_timeout: float) -> None:
    configure_logging()
    before = peak_rss_kib()
    if side == "minimal":
        trio.run(run_minimal, keys, keys)
    else:
        trio.run(run_inturn, keys, keys, idle_timeout)
    print(json.dumps({"growth_kib": peak_rss_kib() - before}))


def rss_growth(side: str, keys: int, idle_timeout: float = 1.0) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", side, str(keys), str(idle_timeout)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(json.loads(out)["growth_kib"]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--rss-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        side, keys, idle = args.rss_child
        rss_child(side, int(keys), float(idle))
        return
    configure_logging()
    jobs = 20_000 if args.quick else 200_000
    key_counts = [1, 100, 1_000] if args.quick else [1, 100, 10_000, 100_000]
    distinct = 20_000 if args.quick else 1_000_000

    print(f"jobs per run: {jobs:,}; no-op handler; producer awaits each job")
    print(f"{'keys':>8}  {'minimal jobs/s':>15}  {'inturn jobs/s':>14}  {'ratio':>6}")
    rates = {}
    for keys in key_counts:
        minimal = timed(run_minimal, jobs, keys)
        rates[keys] = timed(run_inturn, jobs, keys)
        print(
            f"{keys:>8,}  {minimal:>15,.0f}  {rates[keys]:>14,.0f}  {rates[keys] / minimal:>6.2f}"
        )

    # Per-job debug events (job.accepted, job.started, job.completed) with
    # debug filtered out, as configured above: what they cost per job.
    log = structlog.get_logger("inturn").bind()
    calls = 200_000
    start = time.perf_counter()
    for n in range(calls):
        log.debug("job.started", key="key-1", job_id=n, attempt=1)
    per_call = (time.perf_counter() - start) / calls
    per_job = 1 / rates[key_counts[2]]
    print(
        f"\ndebug events with debug off: {per_call * 1e9:.0f} ns per call;"
        f" 3 per job = {3 * per_call / per_job:.1%} of inturn's time per job"
        f" at {key_counts[2]:,} keys"
    )

    # An idle actor lingers idle_timeout seconds, so the peak holds about
    # (jobs/s x idle_timeout) lingering actors whatever the number of keys;
    # running a tenth of the keys as well shows that it does not grow with them.
    print("\npeak RSS growth, distinct keys with one job each (MiB):")
    print(f"{'keys':>10}  {'minimal':>8}  {'inturn idle=1.0':>15}  {'inturn idle=0.1':>15}")
    for count in (distinct // 10, distinct):
        figures = [
            rss_growth("minimal", count),
            rss_growth("inturn", count, 1.0),
            rss_growth("inturn", count, 0.1),
        ]
        print(f"{count:>10,}  {figures[0]:>8.1f}  {figures[1]:>15.1f}  {figures[2]:>15.1f}")


if __name__ == "__main__":
    main()
