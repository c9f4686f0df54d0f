"""Throughput of inturn against minimal hand-written trio designs, over a sweep of shapes.

    python bench/throughput.py                 # the whole sweep, 3 repetitions
    python bench/throughput.py --quick         # smaller shapes, for a smoke test
    python bench/throughput.py --against DIR   # also DIR/inturn (another commit's src/)
    python bench/throughput.py --keys 1,100    # only those rows of the sweep
    python bench/throughput.py --shapes 100x20 # only those cells (keys x jobs per key)
    python bench/throughput.py --batches       # only the batch rows
    python bench/throughput.py --latency       # only the latency rows
    python bench/throughput.py --gc-threshold 10000  # a tuned collector, for every side
    python bench/throughput.py --floor         # also the floor design (what a journal costs)

A *shape* is a number of keys and a number of jobs per key.  A run sends
``keys x per_key`` jobs round-robin over fresh keys (each key gets its next
job after one of every other key), repeated with new keys until at least
``--jobs`` jobs were sent; so at one job per key every job activates a key,
and at 100,000 keys a key's next job comes after ``idle_timeout``.

The reference (``minimal``) is what one would write by hand for per-key FIFO
on trio: a dict of key -> unbounded memory channel, one task per key spawned
lazily that exits when its channel is empty, the no-op handler's one
checkpoint inlined in that task's loop, and a producer that awaits one
checkpoint per job.  ``pooled`` is the same design with a pool of parked
worker tasks that take keys from a ready queue (activating a key spawns no
task): the stronger baseline.  Neither has a journal, codec,
retries, unique keys, stats or idle linger: they are ceilings, not rivals.
``floor`` (with ``--floor``) is the minimal design plus only the work no
journaled design can skip: the payload through ``JSONCodec`` both ways, a row
stored and deleted, its attempt counted, a ``Job`` built for a handler
coroutine.  It has no order of its own beyond the channel, no retries, halts,
operators, stats or logs: how close any journaled runtime can come.

inturn runs with its defaults (``MemoryJournal``, JSON codec,
``idle_timeout=1.0``), a no-op handler that awaits one checkpoint, and a
producer that awaits ``send`` per job, then ``wait_idle()``; the time
includes closing the supervisor, as the baselines' includes their nursery.

Every side runs in this one process with the same logging (structlog as in
production: debug filtered out, loggers cached) and the same collector
(enabled, with its default thresholds unless ``--gc-threshold`` sets the
youngest generation's, ``gc.collect()`` before each run).
Each repetition runs every shape once per side, back to back, in an order
that rotates between repetitions; the tables give the median over the
repetitions of each run's ratio, in CPU time (``time.process_time``) and in
wall time.  A ratio is baseline time / inturn time: 1.0 is as fast as the
baseline.

Batches: a backlog, sent in ``send_many`` chunks of 1,000 jobs in key-major
order (each key's jobs together: one key with 200,000 jobs, and 10,000 keys
with 100 each), run by inturn with ``batch=100`` (a handler awaiting one
checkpoint per batch) and with no batch, against two baselines fed the same
backlog in the same order: the minimal design itself (``minimal``, one send
and one checkpoint per job: the reference the issue's goal names, which pays
a task switch per job on both ends) and, stricter, the minimal design fed by
a producer as chunked as inturn's (``chunked``: 1,000 ``send_nowait`` then one
checkpoint, so it pays the actor's task switch per job only).

Latency (``--latency``): 20,000 jobs a second offered over 1,000 random keys
for 3 s, each job sent once due (at once when the producer is behind), its
data when it was due and when its send was called; the handler records both
delays to its start.  inturn against the minimal design, alternated; the
percentiles' medians over the repetitions, with the rate the producer reached
and the share of the wall time the process was on the CPU (headroom is what
is left).

Memory: each side runs 100,000 and then one million distinct keys, one job
each, in a fresh child process, and reports the growth of its peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import logging
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeAlias

import attrs
import structlog
import trio

import inturn

SWEEP = {  # keys: jobs per key (issue 13's table)
    1: (1, 6, 20, 100, 1000),
    100: (1, 6, 20, 100, 1000),
    10_000: (1, 6, 20, 100),
    100_000: (1, 6, 20),
}
QUICK = {1: (1, 6, 100), 100: (1, 6, 100), 1_000: (1, 6)}


def configure_logging() -> None:
    # What an application does in production: debug off, loggers cached.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )


@attrs.frozen
class Shape:
    keys: int
    per_key: int
    jobs: int
    """At least this many jobs in all: the shape repeats over new keys."""

    @property
    def rounds(self) -> int:
        return max(1, math.ceil(self.jobs / (self.keys * self.per_key)))

    @property
    def total(self) -> int:
        return self.rounds * self.keys * self.per_key

    def sequence(self) -> Iterator[str]:
        """Each job's key, in sending order."""
        for round_ in range(self.rounds):
            if self.per_key == 1:  # made as sent: a million names would weigh on the RSS figures
                yield from (f"{round_}.{key}" for key in range(self.keys))
                continue
            names = [f"{round_}.{key}" for key in range(self.keys)]
            for _ in range(self.per_key):
                yield from names


Run: TypeAlias = Callable[[Shape], Awaitable[None]]


async def minimal_actor(
    channels: dict[str, trio.MemorySendChannel[int]],
    key: str,
    receive: trio.MemoryReceiveChannel[int],
) -> None:
    """The minimal design's task for *key*: run its jobs, exit once its channel is empty."""
    while True:
        try:
            receive.receive_nowait()
        except trio.WouldBlock:
            # empty: exit, and let the next job for this key spawn a new task
            del channels[key]
            return
        await trio.lowlevel.checkpoint()  # the no-op handler


async def run_minimal(shape: Shape) -> None:
    channels: dict[str, trio.MemorySendChannel[int]] = {}
    async with trio.open_nursery() as nursery:
        for n, key in enumerate(shape.sequence()):
            send = channels.get(key)
            if send is None:
                send, receive = trio.open_memory_channel[int](math.inf)
                channels[key] = send
                nursery.start_soon(minimal_actor, channels, key, receive)
            send.send_nowait(n)
            await trio.lowlevel.checkpoint()


async def run_pooled(shape: Shape) -> None:
    channels: dict[str, trio.MemorySendChannel[int]] = {}
    Ready: TypeAlias = tuple[str, trio.MemoryReceiveChannel[int]]
    ready, take = trio.open_memory_channel[Ready](math.inf)
    spare = 0  # workers done with their key, parked (or about to park) on the ready queue

    async def worker() -> None:
        nonlocal spare
        async for key, receive in take:  # parks while no key is ready; ends when closed
            while True:
                try:
                    receive.receive_nowait()
                except trio.WouldBlock:
                    del channels[key]
                    break
                await trio.lowlevel.checkpoint()  # the no-op handler
            spare += 1

    async with trio.open_nursery() as nursery:
        for n, key in enumerate(shape.sequence()):
            send = channels.get(key)
            if send is None:
                send, receive = trio.open_memory_channel[int](math.inf)
                channels[key] = send
                if spare:
                    spare -= 1
                else:
                    nursery.start_soon(worker)
                ready.send_nowait((key, receive))
            send.send_nowait(n)
            await trio.lowlevel.checkpoint()
        ready.close()  # wakes the parked workers to exit (cheaper than cancelling them)


class FloorRow:
    """The floor design's journal row: a job's key, encoded payload and attempts made."""

    __slots__ = ("attempt", "data", "key")

    def __init__(self, key: str, data: bytes) -> None:
        self.key, self.data, self.attempt = key, data, 0


class FloorJob:
    """What the floor design hands its handler, as inturn hands a `Job`."""

    __slots__ = ("attempt", "id", "key", "payload")

    def __init__(self, job_id: int, key: str, payload: object, attempt: int) -> None:
        self.id, self.key, self.payload, self.attempt = job_id, key, payload, attempt


async def run_floor(shape: Shape) -> None:
    # `run_minimal` and `minimal_actor` written out again with the floor's work added,
    # not shared through a helper: a call a job more would be measured on both sides.
    codec = inturn.JSONCodec()
    channels: dict[str, trio.MemorySendChannel[int]] = {}
    rows: dict[int, FloorRow] = {}  # the journal: every accepted job until it is done

    async def handler(job: FloorJob) -> None:
        await trio.lowlevel.checkpoint()

    async def actor(key: str, receive: trio.MemoryReceiveChannel[int]) -> None:
        while True:
            try:
                job_id = receive.receive_nowait()
            except trio.WouldBlock:
                del channels[key]
                return
            row = rows[job_id]
            row.attempt += 1
            await handler(FloorJob(job_id, key, codec.decode(row.data), row.attempt))
            del rows[job_id]

    async with trio.open_nursery() as nursery:
        for job_id, key in enumerate(shape.sequence()):
            rows[job_id] = FloorRow(key, codec.encode(job_id))
            send = channels.get(key)
            if send is None:
                send, receive = trio.open_memory_channel[int](math.inf)
                channels[key] = send
                nursery.start_soon(actor, key, receive)
            send.send_nowait(job_id)
            await trio.lowlevel.checkpoint()


def inturn_side(module: ModuleType, idle_timeout: float = 1.0) -> Run:
    async def run(shape: Shape) -> None:
        async def handler(job: Any) -> None:
            await trio.lowlevel.checkpoint()

        async with module.open_supervisor(handler, idle_timeout=idle_timeout) as sup:
            for n, key in enumerate(shape.sequence()):
                await sup.send(key, n)
            await sup.wait_idle()

    return run


CHUNK = 1_000
"""Jobs per ``send_many`` in the batch rows."""

BATCH_SHAPES = [(1, 200_000), (10_000, 100)]
"""The batch rows: (keys, jobs per key), sent key-major."""


def backlog(shape: Shape) -> Iterator[list[str]]:
    """*shape*'s jobs' keys in chunks of `CHUNK`, each key's jobs together."""
    chunk: list[str] = []
    for key in range(shape.keys):
        for _ in range(shape.per_key):
            chunk.append(f"k{key}")
            if len(chunk) == CHUNK:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def minimal_backlog(*, chunked: bool) -> Run:
    """`run_minimal` fed `backlog`'s order: a checkpoint per job, or (*chunked*) per chunk."""

    async def run(shape: Shape) -> None:
        channels: dict[str, trio.MemorySendChannel[int]] = {}
        async with trio.open_nursery() as nursery:
            n = 0
            for chunk in backlog(shape):
                for key in chunk:
                    send = channels.get(key)
                    if send is None:
                        send, receive = trio.open_memory_channel[int](math.inf)
                        channels[key] = send
                        nursery.start_soon(minimal_actor, channels, key, receive)
                    send.send_nowait(n)
                    n += 1
                    if not chunked:
                        await trio.lowlevel.checkpoint()
                if chunked:
                    await trio.lowlevel.checkpoint()

    return run


def inturn_chunked(module: ModuleType, batch: int | None) -> Run:
    """inturn fed `backlog`'s chunks with ``send_many``; with *batch*, a batch handler."""

    async def run(shape: Shape) -> None:
        async def handler(job: Any) -> None:
            await trio.lowlevel.checkpoint()

        async with module.open_supervisor(handler, batch=batch) as sup:
            n = 0
            for chunk in backlog(shape):
                await sup.send_many([(key, n + index) for index, key in enumerate(chunk)])
                n += len(chunk)
            await sup.wait_idle()

    return run


def load_inturn(src: Path) -> ModuleType:
    """Another copy of inturn (another commit's ``src/inturn``), as module ``inturn_against``.

    inturn imports itself relatively, so the copy runs its own code throughout.
    """
    spec = importlib.util.spec_from_file_location(
        "inturn_against",
        src / "inturn" / "__init__.py",
        submodule_search_locations=[str(src / "inturn")],
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["inturn_against"] = module
    spec.loader.exec_module(module)
    return module


@attrs.frozen
class Timing:
    cpu: float
    wall: float


def timed(run: Run, shape: Shape) -> Timing:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    trio.run(run, shape)
    return Timing(time.process_time() - cpu, time.perf_counter() - wall)


def table(title: str, sweep: dict[int, tuple[int, ...]], cell: Callable[[Shape], str]) -> None:
    columns = sorted({per_key for row in sweep.values() for per_key in row})
    print(f"\n{title}")
    print("| keys \\ jobs per key | " + " | ".join(f"{c:,}" for c in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for keys, row in sweep.items():
        cells = [cell(Shape(keys, c, 0)) if c in row else "" for c in columns]
        print(f"| {keys:,} | " + " | ".join(cells) + " |")


def sweep(
    sides: dict[str, Run], grid: dict[int, tuple[int, ...]], jobs: int, reps: int
) -> dict[tuple[str, int, int], list[Timing]]:
    """Each side's timings of each shape, one per repetition.

    Ctrl-C stops after the repetitions done so far, which are kept: a long
    run on a busy machine can be cut short and still read.
    """
    shapes = [Shape(keys, per_key, jobs) for keys, row in grid.items() for per_key in row]
    times: dict[tuple[str, int, int], list[Timing]] = {}
    names = list(sides)
    started = time.perf_counter()
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        try:
            for shape in shapes:
                for name in order:
                    times.setdefault((name, shape.keys, shape.per_key), []).append(
                        timed(sides[name], shape)
                    )
        except KeyboardInterrupt:
            if not rep:
                raise
            print(f"interrupted: the first {rep} repetitions")
            return {cell: timings[:rep] for cell, timings in times.items()}
        print(f"repetition {rep + 1}/{reps} done at {time.perf_counter() - started:.0f} s")
    return times


def ratios(
    times: dict[tuple[str, int, int], list[Timing]], side: str, baseline: str
) -> Callable[[Shape], str]:
    """A cell's median ratio of *baseline*'s time to *side*'s, CPU / wall."""

    def cell(shape: Shape) -> str:
        where = (shape.keys, shape.per_key)
        pairs = list(zip(times[(side, *where)], times[(baseline, *where)], strict=True))
        cpu = statistics.median(theirs.cpu / ours.cpu for ours, theirs in pairs)
        wall = statistics.median(theirs.wall / ours.wall for ours, theirs in pairs)
        return f"{cpu:.2f} / {wall:.2f}"

    return cell


def rate(
    times: dict[tuple[str, int, int], list[Timing]], side: str, jobs: int
) -> Callable[[Shape], str]:
    def cell(shape: Shape) -> str:
        cpu = statistics.median(t.cpu for t in times[side, shape.keys, shape.per_key])
        return f"{Shape(shape.keys, shape.per_key, jobs).total / cpu:,.0f}"

    return cell


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
    run = run_minimal if side == "minimal" else inturn_side(inturn, idle_timeout)
    trio.run(run, Shape(keys, 1, keys))
    print(json.dumps({"growth_kib": peak_rss_kib() - before}))


def rss_queued_child(keys: int) -> None:
    """Growth of the peak RSS with one job queued on each of *keys* keys, per key (bytes).

    The jobs wait for a ``max_concurrency`` slot that a first job holds: accepted,
    journaled, not started.
    """
    configure_logging()

    async def main() -> None:
        release = trio.Event()

        async def handler(job: Any) -> None:
            await release.wait()

        async with inturn.open_supervisor(handler, max_concurrency=1) as sup:
            await sup.send("holder", 0)
            gc.collect()
            before = peak_rss_kib()
            for start in range(0, keys, CHUNK):
                await sup.send_many([(f"k{n}", n) for n in range(start, start + CHUNK)])
            assert sup.stats().queued == keys
            print(json.dumps({"bytes_per_key": (peak_rss_kib() - before) * 1024 / keys}))
            release.set()

    trio.run(main)


def child(*arguments: str) -> dict[str, float]:
    """Run this script in a fresh process for one memory figure; what it answers.

    The child gets this process's collector threshold, so ``--gc-threshold``
    holds for the memory figures too.
    """
    threshold = str(gc.get_threshold()[0])
    out = subprocess.run(
        [sys.executable, __file__, *arguments, "--gc-threshold", threshold],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    answer: dict[str, float] = json.loads(out)
    return answer


def rss_growth(side: str, keys: int, idle_timeout: float = 1.0) -> float:
    return child("--rss-child", side, str(keys), str(idle_timeout))["growth_kib"] / 1024


def one(run: Run, shape: Shape, callgrind: bool) -> None:
    """Run one side on one shape, after a small warm-up: for a profiler.

    With *callgrind*, under ``valgrind --tool=callgrind --instr-atstart=no``,
    instructions are counted during that run alone: ``totals`` in the output
    file over the jobs printed is the count per job, which the machine's
    load does not move.
    """
    trio.run(run, Shape(10, 6, 600))
    gc.collect()
    if callgrind:
        subprocess.run(
            ["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True
        )
    cpu = time.process_time()
    trio.run(run, shape)
    cpu = time.process_time() - cpu
    if callgrind:
        subprocess.run(
            ["callgrind_control", "-i", "off", str(os.getpid())], check=True, capture_output=True
        )
    print(f"{shape.total} jobs, {cpu:.2f} s CPU")


def batch_rows(reps: int, against: ModuleType | None) -> None:
    """The batch rows: each side alternated per repetition, medians of ratios to both baselines."""
    sides: dict[str, Run] = {
        "minimal": minimal_backlog(chunked=False),
        "chunked": minimal_backlog(chunked=True),
        "inturn batch=100": inturn_chunked(inturn, 100),
        "inturn": inturn_chunked(inturn, None),
    }
    if against is not None:
        sides["against batch=100"] = inturn_chunked(against, 100)
    names = list(sides)
    print(f"\nbatches: a backlog in send_many chunks of {CHUNK:,}, key-major; {reps} repetitions")
    print(
        "| keys x jobs per key | side | jobs/s (CPU)"
        " | ratio to minimal, CPU / wall | ratio to chunked, CPU / wall |"
    )
    print("|---|---|---:|---|---|")
    for keys, per_key in BATCH_SHAPES:
        shape = Shape(keys, per_key, 0)
        times: dict[str, list[Timing]] = {name: [] for name in names}
        for rep in range(reps):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                times[name].append(timed(sides[name], shape))
        for name in names:
            ratios = []
            for baseline in ("minimal", "chunked"):
                pairs = list(zip(times[name], times[baseline], strict=True))
                cpu = statistics.median(theirs.cpu / ours.cpu for ours, theirs in pairs)
                wall = statistics.median(theirs.wall / ours.wall for ours, theirs in pairs)
                ratios.append(f"{cpu:.2f} / {wall:.2f}")
            rate_ = shape.total / statistics.median(t.cpu for t in times[name])
            print(f"| {keys:,} x {per_key:,} | {name} | {rate_:,.0f} | {' | '.join(ratios)} |")


LATENCY_RATE = 20_000
"""Jobs offered per second in the latency rows."""
LATENCY_KEYS = 1_000
LATENCY_SECONDS = 3.0


@attrs.frozen
class Latencies:
    """One latency run."""

    from_send: list[float]
    """Each job's start less the moment its ``send`` was called (seconds)."""
    from_due: list[float]
    """Each job's start less the moment it was due to be sent: the producer's lag too."""
    rate: float
    """Jobs sent per second (the offer, unless the producer fell behind)."""
    busy: float
    """The share of the wall time the process spent on the CPU."""


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def microseconds(figures: list[float]) -> str:
    """The median of *figures* (seconds), in microseconds."""
    return f"{statistics.median(figures) * 1e6:,.0f}"


Send: TypeAlias = Callable[[str, list[float]], Awaitable[object]]


async def offer(send: Send, seed: int) -> float:
    """Send `LATENCY_RATE` jobs a second for `LATENCY_SECONDS` to random keys of `LATENCY_KEYS`;
    the jobs sent per second.

    Each job's data is ``[due, sent]`` (``time.perf_counter`` values): when it
    was due, and when its send was called.  A job is sent once due, at once if
    the producer is behind (trio's timers wake at most once a millisecond, so
    jobs go in bursts of about 20)."""
    rng = random.Random(seed)
    start, start_perf = trio.current_time(), time.perf_counter()
    count = int(LATENCY_RATE * LATENCY_SECONDS)
    for n in range(count):
        if trio.current_time() < start + n / LATENCY_RATE:
            await trio.sleep_until(start + n / LATENCY_RATE)
        await send(
            f"k{rng.randrange(LATENCY_KEYS)}", [start_perf + n / LATENCY_RATE, time.perf_counter()]
        )
    return count / (time.perf_counter() - start_perf)


Side: TypeAlias = Callable[[Callable[[list[float]], None], int], Awaitable[float]]


async def minimal_latency(started: Callable[[list[float]], None], seed: int) -> float:
    """The minimal design under `offer`: its task calls *started* with each job's data."""
    channels: dict[str, trio.MemorySendChannel[list[float]]] = {}

    async def actor(key: str, receive: trio.MemoryReceiveChannel[list[float]]) -> None:
        while True:
            try:
                data = receive.receive_nowait()
            except trio.WouldBlock:
                del channels[key]
                return
            started(data)
            await trio.lowlevel.checkpoint()  # the no-op handler

    async with trio.open_nursery() as nursery:

        async def send(key: str, data: list[float]) -> None:
            channel = channels.get(key)
            if channel is None:
                channel, receive = trio.open_memory_channel[list[float]](math.inf)
                channels[key] = channel
                nursery.start_soon(actor, key, receive)
            channel.send_nowait(data)
            await trio.lowlevel.checkpoint()

        return await offer(send, seed)


def inturn_latency(module: ModuleType) -> Side:
    async def run(started: Callable[[list[float]], None], seed: int) -> float:
        async def handler(job: Any) -> None:
            started(job.payload)
            await trio.lowlevel.checkpoint()

        async with module.open_supervisor(handler) as sup:
            rate = await offer(sup.send, seed)
            await sup.wait_idle()
        return rate

    return run


def latency_run(side: Side, seed: int) -> Latencies:
    from_send: list[float] = []
    from_due: list[float] = []

    def started(data: list[float]) -> None:
        now = time.perf_counter()
        from_due.append(now - data[0])
        from_send.append(now - data[1])

    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    rate = trio.run(side, started, seed)
    busy = (time.process_time() - cpu) / (time.perf_counter() - wall)
    return Latencies(from_send, from_due, rate, busy)


def latency_rows(reps: int, against: ModuleType | None) -> None:
    """Send-to-start percentiles under `offer`'s load, sides alternated, medians over *reps*."""
    sides: dict[str, Side] = {"minimal": minimal_latency, "inturn": inturn_latency(inturn)}
    if against is not None:
        sides["against"] = inturn_latency(against)
    names = list(sides)
    runs: dict[str, list[Latencies]] = {name: [] for name in names}
    for rep in range(reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            runs[name].append(latency_run(sides[name], rep))
    print(
        f"\nlatency: {LATENCY_RATE:,} jobs/s offered over {LATENCY_KEYS:,} random keys for"
        f" {LATENCY_SECONDS:g} s; medians of {reps} repetitions"
    )
    print(
        "| side | sent jobs/s | send to start p50 / p99 / p99.9 µs"
        " | due to start p50 / p99 µs | CPU busy |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in names:
        sends = " / ".join(
            microseconds([quantile(run.from_send, q) for run in runs[name]])
            for q in (0.5, 0.99, 0.999)
        )
        dues = " / ".join(
            microseconds([quantile(run.from_due, q) for run in runs[name]]) for q in (0.5, 0.99)
        )
        rate = statistics.median(run.rate for run in runs[name])
        busy = statistics.median(run.busy for run in runs[name])
        print(f"| {name} | {rate:,.0f} | {sends} | {dues} | {busy:.0%} |")


def positive(text: str) -> int:
    """An argument that must be a whole number above 0 (a threshold of 0 or below
    would turn the collector off without saying so)."""
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes (smoke test)")
    parser.add_argument("--reps", type=positive, help="repetitions (default 3; 2 with --quick)")
    parser.add_argument("--jobs", type=positive, help="least jobs per run (default 200,000)")
    parser.add_argument("--keys", help="only these rows of the sweep, as 1,100")
    parser.add_argument("--shapes", help="only these cells, as 100x20,10000x6")
    parser.add_argument("--against", type=Path, help="a src/ dir with another inturn to run too")
    parser.add_argument("--sweep-only", action="store_true", help="skip the memory figures")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also run the floor design: minimal plus a codec, a journal row and a Job a job",
    )
    parser.add_argument("--batches", action="store_true", help="only the batch rows")
    parser.add_argument("--latency", action="store_true", help="only the latency rows")
    parser.add_argument(
        "--gc-threshold",
        type=positive,
        help="the collector's youngest-generation threshold for every side"
        f" (default: Python's, {gc.get_threshold()[0]})",
    )
    parser.add_argument(
        "--one", nargs=3, metavar=("SIDE", "KEYS", "PER_KEY"), help="run one side on one shape"
    )
    parser.add_argument(
        "--callgrind", action="store_true", help="with --one: count its run alone (see below)"
    )
    parser.add_argument("--rss-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--rss-queued-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gc_threshold is not None:
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    if args.rss_queued_child:
        rss_queued_child(args.rss_queued_child)
        return
    if args.rss_child:
        side, keys, idle = args.rss_child
        rss_child(side, int(keys), float(idle))
        return
    configure_logging()
    if args.gc_threshold is not None:
        print(f"collector thresholds: {gc.get_threshold()}")
    grid = QUICK if args.quick else SWEEP
    if args.keys:
        grid = {int(keys): grid[int(keys)] for keys in args.keys.split(",")}
    if args.shapes:
        cells = [tuple(map(int, shape.split("x"))) for shape in args.shapes.split(",")]
        grid = {}
        for keys, per_key in cells:
            grid[keys] = (*grid.get(keys, ()), per_key)
    jobs = args.jobs or (20_000 if args.quick else 200_000)
    reps = args.reps or (2 if args.quick else 3)
    distinct = 20_000 if args.quick else 1_000_000
    sides: dict[str, Run] = {
        "minimal": run_minimal,
        "pooled": run_pooled,
        "inturn": inturn_side(inturn),
    }
    if args.floor:
        sides["floor"] = run_floor
    against = load_inturn(args.against) if args.against else None
    if against is not None:
        sides["against"] = inturn_side(against)
        print(f"against: {args.against}")
    if args.one:
        side, keys, per_key = args.one
        # also the batch rows' sides, for a profile
        batch_sides = {
            "batch": inturn_chunked(inturn, 100),
            "chunked": minimal_backlog(chunked=True),
            "backlog": minimal_backlog(chunked=False),
            "floor": run_floor,
        }
        run = {**sides, **batch_sides}[side]
        one(run, Shape(int(keys), int(per_key), jobs), args.callgrind)
        return

    if args.batches:
        batch_rows(reps, against)
        return
    if args.latency:
        latency_rows(reps, against)
        return
    print(f"at least {jobs:,} jobs per run, {reps} repetitions; no-op handler")
    times = sweep(sides, grid, jobs, reps)
    for name in sides:
        table(f"{name}: jobs/s by CPU time (median)", grid, rate(times, name, jobs))
    inturns = ["inturn", "against"] if args.against else ["inturn"]
    pairs = [(side, baseline) for side in inturns for baseline in ("minimal", "pooled")]
    if args.floor:
        pairs += [("floor", "minimal"), ("inturn", "floor")]
    for side, baseline in [*pairs, ("pooled", "minimal")]:
        table(
            f"{side}/{baseline}, CPU / wall time ratio (median)",
            grid,
            ratios(times, side, baseline),
        )

    # Per-job debug events (job.accepted, job.started, job.completed) with
    # debug filtered out, as configured above: what they cost per job.
    log = structlog.get_logger("inturn").bind()
    calls = 200_000
    start = time.perf_counter()
    for n in range(calls):
        log.debug("job.started", key="key-1", job_id=n, attempt=1)
    per_call = (time.perf_counter() - start) / calls
    print(f"\ndebug events with debug off: {per_call * 1e9:.0f} ns per call")
    if args.sweep_only:
        return
    batch_rows(reps, against)
    latency_rows(reps, against)

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
    bytes_per_key = child("--rss-queued-child", str(distinct // 10))["bytes_per_key"]
    print(f"\n{distinct // 10:,} keys with one job queued each: {bytes_per_key:,.0f} bytes per key")


if __name__ == "__main__":
    main()
